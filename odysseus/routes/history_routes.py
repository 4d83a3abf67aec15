"""Chat history: sessions and messages, always the caller's own."""

from __future__ import annotations

from flask import Blueprint, current_app, jsonify

from .. import signals
from ..errors import BadRequest
from .auth import current_owner
from .params import body, optional_str, page_args

bp = Blueprint("history", __name__)
#: Message ids are SQLite integers: a larger number in the URL is an unknown message (404), not a 500.
MESSAGE_ID = "<int(max=9223372036854775807):message_id>"


def _store():
    return current_app.extensions["odysseus.store"]


@bp.post("/api/sessions")
def create_session():
    """Create an empty session."""
    data = body()
    title = optional_str(data, "title", 200) or "New chat"
    return jsonify(_store().sessions.create(current_owner(), title)), 201


@bp.get("/api/sessions")
def list_sessions():
    """The caller's sessions, most recent first."""
    limit, offset = page_args(100, 500)
    return jsonify({"sessions": _store().sessions.list(current_owner(), limit, offset)})


@bp.get("/api/sessions/<session_id>")
def get_session(session_id: str):
    """One session."""
    return jsonify(_store().sessions.get(current_owner(), session_id))


@bp.patch("/api/sessions/<session_id>")
def rename_session(session_id: str):
    """Rename a session."""
    title = optional_str(body(), "title", 200)
    if not title:
        raise BadRequest("title is required")
    return jsonify(_store().sessions.rename(current_owner(), session_id, title))


@bp.delete("/api/sessions/<session_id>")
def delete_session(session_id: str):
    """Delete a session, stopping its run first."""
    owner = current_owner()
    store = _store()
    store.sessions.get(owner, session_id)
    manager = current_app.extensions["odysseus.runs"]
    run = manager.for_session(owner, session_id)
    if run is not None:
        manager.stop(owner, session_id, run.run_id, reason="session_deleted")
    images = store.sessions.delete(owner, session_id)
    signals.session_deleted.send(current_app._get_current_object(), owner=owner, session_id=session_id,
                                 images=images)
    return jsonify({"deleted": True})


@bp.get("/api/sessions/<session_id>/messages")
def list_messages(session_id: str):
    """The session's messages in order."""
    owner = current_owner()
    _store().sessions.get(owner, session_id)
    return jsonify({"session_id": session_id, "messages": _store().messages.list(owner, session_id)})


@bp.patch(f"/api/messages/{MESSAGE_ID}")
def edit_message(message_id: int):
    """Edit a message's content."""
    data = body()
    content = data.get("content")
    if not isinstance(content, str) or not content.strip():
        raise BadRequest("content is required and must be a non-empty string")
    return jsonify(_store().messages.update_content(current_owner(), message_id, content))


@bp.delete(f"/api/messages/{MESSAGE_ID}")
def delete_message(message_id: int):
    """Delete a message."""
    _store().messages.delete(current_owner(), message_id)
    return jsonify({"deleted": True})
