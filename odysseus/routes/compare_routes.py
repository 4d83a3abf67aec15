"""Compare mode's second half: keep one of the side-by-side replies as the chat's reply.

The replies themselves stream from ``POST /api/chat_stream`` with ``mode: "compare"`` (one
request per model, nothing stored, cancelled when the page stops reading). The page then sends
the chosen text here, and it is saved with the user's message as an ordinary exchange.
"""

from __future__ import annotations

from flask import Blueprint, current_app, jsonify

from ..errors import BadRequest
from ..store.compare_keep import keep_compare_reply
from .auth import current_owner
from .params import body, optional_str
from ..turns.start import session_title

bp = Blueprint("compare", __name__)


def _text(data: dict, key: str, required: bool) -> str:
    value = data.get(key, "")
    if value is None:
        value = ""
    if not isinstance(value, str) or (required and not value.strip()):
        raise BadRequest(f"{key} is required and must be a non-empty string" if required else f"{key} must be a string")
    if len(value) > int(current_app.config["MAX_MESSAGE_CHARS"]):
        raise BadRequest(f"{key} is too long")
    if "\x00" in value:
        raise BadRequest(f"{key} must not contain NUL characters")
    return value


@bp.post("/api/compare/keep")
def keep():
    """Save ``message`` and the chosen ``content`` (from ``model``) on ``session`` (or a new session)."""
    owner = current_owner()
    data = body()
    message = _text(data, "message", True)
    content = _text(data, "content", True)
    thinking = _text(data, "thinking", False)
    model = optional_str(data, "model", 200) or "compare"
    session_id = optional_str(data, "session") or optional_str(data, "session_id")
    store = current_app.extensions["odysseus.store"]
    if session_id:
        store.sessions.get(owner, session_id)  # 404 for an unknown or foreign session
    kept = keep_compare_reply(
        store.locked, owner, session_id, session_title(message), message, content, thinking, model
    )
    return jsonify(kept), 201
