"""Branches (issue #20) over HTTP: selecting a branch, and each message's alternatives.

``PUT /api/sessions/{id}/branch {"message_id"}`` selects which alternative (and the newest
message below it) the session shows and the model is sent. Regenerate and edit-and-resend
are turns (``regenerate_of`` / ``edit_of`` on /api/chat_stream): ``turns/branch.py``.
"""

from __future__ import annotations

from flask import Blueprint, current_app, jsonify

from ..errors import BadRequest
from ..store.branches import BranchRepo
from .auth import current_owner
from .params import MAX_ROW_ID, body

bp = Blueprint("branches", __name__)


def _store():
    return current_app.extensions["odysseus.store"]


def _branches() -> BranchRepo:
    return _store().branches


def _message_id(data: dict, key: str) -> int:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not (1 <= value <= MAX_ROW_ID):
        raise BadRequest(f"{key} must be a message id (a positive whole number)")
    return value


@bp.put("/api/sessions/<session_id>/branch")
def select_branch(session_id: str):
    """Show the branch through ``message_id`` (one of the alternatives the messages page lists)."""
    owner = current_owner()
    data = body()
    _store().sessions.get(owner, session_id)
    head = _branches().select(owner, session_id, _message_id(data, "message_id"))
    return jsonify({"session_id": session_id, "head_id": head})


def with_alternatives(owner: str, session_id: str, messages: list) -> list:
    """The messages page with each message's ``branch``: ``{index, count, ids}`` of its alternatives."""
    info = _branches().alternatives(owner, session_id, messages)
    return [dict(m, branch=info.get(m["id"], {"index": 1, "count": 1, "ids": [m["id"]]})) for m in messages]
