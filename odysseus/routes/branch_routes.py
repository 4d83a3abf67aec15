"""Branches (issue #20): regenerate/retry and edit-and-resend on /api/chat_stream, and selecting a branch.

``regenerate_of: <reply id>`` (or a user message id) starts a new run for the same user
message, storing no new user message; the earlier reply stays as an alternative.
``edit_of: <user message id>`` with ``message`` stores the edited text as an alternative of
that message and continues from it. ``PUT /api/sessions/{id}/branch {"message_id"}`` selects
which alternative (and the newest message below it) the session shows and the model is sent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from flask import Blueprint, current_app, jsonify

from ..errors import BadRequest
from ..store.branches import BranchRepo, answer_target, edit_writes, regenerate_writes
from .auth import current_owner
from .params import MAX_ROW_ID, body

bp = Blueprint("branches", __name__)


@dataclass
class BranchPlan:
    """What a regenerate or edit request does to the tree, checked before anything is stored."""

    kind: str  # "regenerate" | "edit"
    session_id: str
    user_message_id: Optional[int] = None  # regenerate: the user message answered again
    parent_id: Optional[int] = None  # edit: the parent of the edited message


def _store():
    return current_app.extensions["odysseus.store"]


def _branches() -> BranchRepo:
    return _store().branches


def _message_id(data: dict, key: str) -> int:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not (1 <= value <= MAX_ROW_ID):
        raise BadRequest(f"{key} must be a message id (a positive whole number)")
    return value


def plan_branch(owner: str, data: dict) -> Optional[BranchPlan]:
    """Validate ``regenerate_of``/``edit_of`` in a chat_stream body and fill in its session (and, for a
    regenerate, its message); None for an ordinary send. Raises BadRequest/NotFound; stores nothing."""
    keys = [k for k in ("regenerate_of", "edit_of") if data.get(k) is not None]
    if not keys:
        return None
    if len(keys) > 1:
        raise BadRequest("send either regenerate_of or edit_of, not both")
    if data.get("mode") == "compare":
        raise BadRequest("compare mode cannot regenerate or edit; pick the reply to keep instead")
    store = _store()
    if keys[0] == "regenerate_of":
        target = answer_target(store, owner, _message_id(data, "regenerate_of"))
        plan = BranchPlan("regenerate", target["session_id"], user_message_id=target["id"])
        data["message"] = target["content"] or " "  # the turn request's message is the one answered again
    else:
        edited = store.messages.get(owner, _message_id(data, "edit_of"))
        if edited["role"] != "user":
            raise BadRequest("edit_of must name one of your messages (role user)")
        plan = BranchPlan("edit", edited["session_id"], parent_id=edited.get("parent_id"))
    session = data.get("session") or data.get("session_id")
    if session is not None and session != plan.session_id:
        raise BadRequest("that message belongs to another session")
    data["session"] = plan.session_id
    return plan


def apply_branch(owner: str, req: dict, prepared) -> None:
    """Adjust a prepared turn for the request's branch plan (called by ``start_turn``; no-op without one)."""
    plan: Optional[BranchPlan] = req.get("branch")
    if plan is None:
        return
    if plan.kind == "regenerate":
        assert plan.user_message_id is not None  # a regenerate plan names the user message it answers
        prepared.message = None  # the answered message is already stored
        prepared.in_transaction.insert(0, regenerate_writes(owner, plan.session_id, plan.user_message_id))
    else:
        prepared.in_transaction.insert(0, edit_writes(owner, plan.session_id, plan.parent_id))


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
