"""Compare mode's bookends: store the question before the panes stream; keep a reply (older pages).

``POST /api/compare/start`` stores the question once (``store/compare_replies.py``); the panes then
stream from ``POST /api/chat_stream`` with ``mode: "compare"`` and ``compare_of`` (one request per
model, cancelled when the page stops reading), each saving its reply as an alternative of the
question. "Keep this" is then a branch selection (``PUT /api/sessions/{id}/branch``).

``POST /api/compare/keep`` is the older pages' way: they streamed panes without ``compare_of`` and
sent the chosen text here, saved with the user's message as an ordinary exchange.
"""

from __future__ import annotations

from flask import Blueprint, current_app, jsonify

from ..errors import BadRequest
from ..store.compare_keep import keep_compare_reply
from .auth import current_owner
from ..turns.compare import start_question
from ..turns.parse import CHAT_STREAM
from ..turns.start import session_title
from .params import body, optional_str
from .parts import turns

MAX_MODELS = 8


def _models(data: dict) -> list:
    models = data.get("models")
    if not isinstance(models, list) or not 2 <= len(models) <= MAX_MODELS:
        raise BadRequest(f"models must be a list of 2 to {MAX_MODELS} model ids")
    if not all(isinstance(m, str) and m.strip() and len(m) <= 200 and "\x00" not in m for m in models):
        raise BadRequest("each model must be a model id (a non-empty string)")
    if len(set(models)) != len(models):
        raise BadRequest("each model may be compared once")
    return models


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


@bp.post("/api/compare/start")
def start():
    """Store a comparison's question (``message``, ``models``, optional ``session`` and context switches)."""
    owner = current_owner()
    data = body()
    models = _models(data)
    request = turns().parse(dict(data, mode="compare"), CHAT_STREAM)
    if "\x00" in request.message:
        raise BadRequest("message must not contain NUL characters")
    return jsonify(start_question(turns(), owner, request, models)), 201
