"""``GET /api/images/<name>``: a generated image, only for the owner who generated it (``tools/image_store.py``)."""

from __future__ import annotations

from flask import Blueprint, send_file

from ..errors import NotFound
from .auth import current_owner
from .parts import ext

bp = Blueprint("images", __name__)


@bp.get("/api/images/<name>")
def image(name: str):
    """A generated image, only for the owner who generated it."""
    found = ext("agent").images.find(current_owner(), name)
    if found is None:
        raise NotFound("image not found")
    response = send_file(found["path"], mimetype=found["mime"], max_age=3600)
    response.headers["Cache-Control"] = "private, max-age=3600"
    response.headers["X-Content-Type-Options"] = "nosniff"
    return response
