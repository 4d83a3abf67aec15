"""Regenerate and edit-and-resend (issue #20): a turn that branches from a stored message.

``regenerate_of: <reply id>`` (or a user message id) starts a new run for the same user
message, storing no new user message; the earlier reply stays as an alternative.
``edit_of: <user message id>`` with ``message`` stores the edited text as an alternative of
that message and continues from it. ``plan`` looks the message up (the caller's own, else 404)
before anything is stored; ``apply`` adds the tree writes to the start transaction.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional, Tuple

from ..errors import BadRequest
from ..store.branches import answer_target, edit_writes, regenerate_writes
from .registry import PreparedTurn
from .request import TurnRequest

if TYPE_CHECKING:
    from ..store import Store


@dataclass(frozen=True)
class BranchPlan:
    """What a regenerate or edit request does to the tree, checked before anything is stored."""

    kind: str  # "regenerate" | "edit"
    session_id: str
    user_message_id: Optional[int] = None  # regenerate: the user message answered again
    parent_id: Optional[int] = None  # edit: the parent of the edited message


def plan(store: "Store", owner: str, request: TurnRequest, max_chars: int) -> Tuple[TurnRequest, Optional[BranchPlan]]:
    """The request with its branch's session (and, for a regenerate, the message answered again), and
    the plan; the request unchanged and None for an ordinary send. Raises BadRequest/NotFound."""
    ask = request.branch
    if ask is None:
        return request, None
    if ask.kind == "regenerate":
        target = answer_target(store, owner, ask.message_id)
        branch = BranchPlan("regenerate", target["session_id"], user_message_id=target["id"])
        message = target["content"] or " "  # the turn's message is the one answered again
        if len(message) > max_chars:
            raise BadRequest("message is too long")
    else:
        edited = store.messages.get(owner, ask.message_id)
        if edited["role"] != "user":
            raise BadRequest("edit_of must name one of your messages (role user)")
        branch = BranchPlan("edit", edited["session_id"], parent_id=edited.get("parent_id"))
        message = request.message
    if request.session_id is not None and request.session_id != branch.session_id:
        raise BadRequest("that message belongs to another session")
    return dataclasses.replace(request, message=message, session_id=branch.session_id), branch


def apply(owner: str, branch: Optional[BranchPlan], prepared: PreparedTurn) -> None:
    """Adjust a prepared turn for the branch plan (no-op without one)."""
    if branch is None:
        return
    if branch.kind == "regenerate":
        assert branch.user_message_id is not None  # a regenerate plan names the user message it answers
        prepared.message = None  # the answered message is already stored
        prepared.in_transaction.insert(0, regenerate_writes(owner, branch.session_id, branch.user_message_id))
    else:
        prepared.in_transaction.insert(0, edit_writes(owner, branch.session_id, branch.parent_id))
