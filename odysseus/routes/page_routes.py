"""The bundled single-page frontend: ``GET /`` serves templates/index.html."""

from __future__ import annotations

import os

from flask import Blueprint, current_app, render_template

bp = Blueprint("page", __name__)


def _vendor_ready() -> bool:
    """True when ``make vendor`` has copied the third-party browser libraries."""
    return os.path.exists(os.path.join(current_app.static_folder or "", "vendor", ".installed"))


@bp.get("/")
def index():
    """The chat page; it reads everything else from the JSON and SSE API."""
    response = current_app.make_response(
        render_template(
            "index.html", vendor_ready=_vendor_ready(), max_message_chars=int(current_app.config["MAX_MESSAGE_CHARS"])
        )
    )
    # The page is the same for everyone; data comes from the API, so never serve a stale shell.
    response.headers["Cache-Control"] = "no-cache"
    return response
