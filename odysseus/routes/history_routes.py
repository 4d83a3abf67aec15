"""Chat history: sessions and messages, always the caller's own."""

from __future__ import annotations

import re
from typing import Any, Dict, Optional

from flask import Blueprint, current_app, jsonify, request

from ..errors import BadRequest
from ..store.sessions import ANY_FOLDER, NO_FOLDER
from .auth import current_owner
from .branch_routes import with_alternatives
from .params import MAX_ROW_ID, body, optional_query_int, optional_str, page_args

MESSAGES_PAGE = 200  # messages per page by default
MESSAGES_PAGE_MAX = 1000
SESSIONS_PAGE = 100
SESSIONS_PAGE_MAX = 500
#: A sessions cursor: the ``updated_at`` (repr of a float) and the id of the last session shown.
_SESSION_CURSOR = re.compile(r"([0-9]{1,12}(?:\.[0-9]{1,20})?(?:e[+-]?[0-9]{1,3})?)~(s_[A-Za-z0-9_-]{1,64})")

bp = Blueprint("history", __name__)
#: Message ids are SQLite integers in ASCII digits: anything else (``٣``, a larger number) is an unknown message (404).
MESSAGE_ID = "<digits:message_id>"


def _store():
    return current_app.extensions["odysseus.store"]


@bp.post("/api/sessions")
def create_session():
    """Create an empty session."""
    data = body()
    title = optional_str(data, "title", 200) or "New chat"
    return jsonify(_store().sessions.create(current_owner(), title)), 201


#: ``GET /api/sessions?origin=``: the page's chats (default), the /v1 API's conversations, or both
SESSION_ORIGINS = ("page", "api", "all")


def session_cursor(session: dict) -> str:
    """The ``before`` value that continues a sessions listing after ``session``."""
    return f"{float(session['updated_at'])!r}~{session['id']}"


def _parse_session_cursor(raw: str) -> tuple:
    match = _SESSION_CURSOR.fullmatch(raw)
    if not match:
        raise BadRequest("before must be the next_before value of the previous page")
    return float(match.group(1)), match.group(2)


def _query_flag(name: str) -> Optional[bool]:
    """An optional ``true``/``false`` query argument; None when absent or empty."""
    raw = request.args.get(name)
    if raw is None or raw == "":
        return None
    if raw not in ("true", "false"):
        raise BadRequest(f"{name} must be true or false")
    return raw == "true"


def _body_flag(data: Dict[str, Any], name: str) -> bool:
    """A body field that must be true or false (JSON booleans; a form's "true"/"false")."""
    value = data[name]
    if isinstance(value, bool):
        return value
    if value in ("true", "false"):
        return value == "true"
    raise BadRequest(f"{name} must be true or false")


@bp.get("/api/sessions")
def list_sessions():
    """The caller's sessions, most recently updated first, a page at a time.

    ``?limit=`` (default 100, at most 500); ``?before=`` takes the previous page's
    ``next_before`` (``offset`` still works but can repeat a session that moved meanwhile).
    ``?origin=``: ``page`` (default: the page's own chats), ``api`` (conversations made through
    the OpenAI-compatible API, /v1) or ``all``. ``?archived=true`` lists the archived chats instead
    of the others; ``?pinned=true|false`` and ``?folder_id=<id>|none`` narrow the list (the sidebar's
    pinned, folder and dated sections). Another user's folder id is a 404.
    """
    owner = current_owner()
    limit, offset = page_args(SESSIONS_PAGE, SESSIONS_PAGE_MAX)
    origin = request.args.get("origin") or "page"
    if origin not in SESSION_ORIGINS:
        raise BadRequest(f"origin must be one of {', '.join(SESSION_ORIGINS)}")
    raw_before = request.args.get("before")
    before = _parse_session_cursor(raw_before) if raw_before else None
    if before is not None and offset:
        raise BadRequest("send before or offset, not both")
    folder = request.args.get("folder_id") or ANY_FOLDER
    if folder not in (ANY_FOLDER, NO_FOLDER):
        _store().folders.get(owner, folder)  # 404 for an unknown or another user's folder
    rows = _store().sessions.list(
        owner,
        limit + 1,
        offset,
        before=before,
        origin=origin,
        archived=bool(_query_flag("archived")),
        pinned=_query_flag("pinned"),
        folder=folder,
    )
    has_more = len(rows) > limit
    sessions = rows[:limit]
    return jsonify(
        {"sessions": sessions, "has_more": has_more, "next_before": session_cursor(sessions[-1]) if has_more else None}
    )


@bp.get("/api/sessions/<session_id>")
def get_session(session_id: str):
    """One session."""
    return jsonify(_store().sessions.get(current_owner(), session_id))


@bp.patch("/api/sessions/<session_id>")
def update_session(session_id: str):
    """Rename a session (``title``), move it into a folder (``folder_id``, null for none), pin or archive it.

    Any subset of the fields; all are checked before anything is stored. Another user's session or
    folder is a 404.
    """
    data = body()
    changes: Dict[str, Any] = {}
    if "title" in data:
        title = optional_str(data, "title", 200)
        if not title:
            raise BadRequest("title must be a non-empty string")
        changes["title"] = title
    if "folder_id" in data:
        folder_id = data["folder_id"]
        if folder_id is not None and (not isinstance(folder_id, str) or len(folder_id) > 200):
            raise BadRequest("folder_id must be a folder's id or null")
        changes["folder_id"] = folder_id or None
    for name in ("pinned", "archived"):
        if name in data:
            changes[name] = _body_flag(data, name)
    if not changes:
        raise BadRequest("send title, folder_id, pinned or archived")
    return jsonify(_store().sessions.update(current_owner(), session_id, changes))


@bp.delete("/api/sessions/<session_id>")
def delete_session(session_id: str):
    """Delete a session: under its lock, stop its run (``session_deleted``), then remove everything it left.

    A send racing the delete either finished starting before (its run is stopped here) or finds the
    session gone (404); nothing is ever written into the deleted session.
    """
    owner = current_owner()
    store = _store()
    store.sessions.get(owner, session_id)
    engine = current_app.extensions["odysseus.runs"]
    engine.delete_session(owner, session_id, lambda: store.sessions.delete(owner, session_id))
    return jsonify({"deleted": True})


@bp.get("/api/sessions/<session_id>/messages")
def list_messages(session_id: str):
    """The session's newest messages (``?limit=``, default 200, at most 1000), in order.

    ``?before=<message id>`` pages back: the messages just older than that id.
    ``has_more`` says whether still older ones exist.
    """
    owner = current_owner()
    limit = optional_query_int("limit", 1, MESSAGES_PAGE_MAX) or MESSAGES_PAGE
    before = optional_query_int("before", 1, MAX_ROW_ID)
    _store().sessions.get(owner, session_id)
    messages, has_more = _store().messages.page(owner, session_id, before, limit)
    messages = with_alternatives(owner, session_id, messages)  # the `< 2/3 >` control (branch_routes.py)
    return jsonify({"session_id": session_id, "messages": messages, "has_more": has_more})


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
