"""Tool approvals, pure logic: call hashing, expiry and the checks an answer must pass.

An approval is created when the loop reaches a call that needs the user's consent.
It is single-use, bound to its owner, its session and the exact call: the call's
server-side id (``server_id``, made by the agent loop, never the provider's id alone) and a
SHA-256 of the canonical JSON of server id, provider id, tool name and arguments. It
expires ``ttl`` seconds after it was asked. ``check`` is what an answer must pass; the store marks it used with a
conditional update, so two answers racing cannot both win.

Refusals carry a machine-readable ``reason``: ``not_found`` (an unknown id, or another owner's:
404, as every other id of another user), ``invalid`` (already used, bad decision, changed call
content), ``expired`` or ``wrong_session``.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from typing import Any, Optional

from ..errors import BadRequest

DECISIONS = ("approve", "approve_task", "deny")
KIND = "tool_approval"


def canonical(value: Any) -> str:
    """Stable JSON text for hashing."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def call_hash(call: dict) -> str:
    """The hash an approval is bound to: server id, provider id, tool name and canonical arguments."""
    return hashlib.sha256(
        canonical(
            {
                "server_id": call.get("server_id"),
                "id": call.get("id"),
                "name": call.get("name"),
                "arguments": call.get("arguments"),
            }
        ).encode("utf-8")
    ).hexdigest()


def public_call(call: dict) -> dict:
    """The call as shown to the user and echoed back in an answer."""
    return {
        "call_id": call.get("id"),
        "server_id": call.get("server_id"),
        "tool": call.get("name"),
        "arguments": call.get("arguments"),
    }


def new_approval_id() -> str:
    """An unguessable approval id (128 random bits)."""
    return "apr_" + secrets.token_urlsafe(16)


def refused(reason: str, message: str) -> BadRequest:
    """The error an answer gets: 404 not_found, 400 invalid, 410 expired, 403 wrong_session."""
    status = {"not_found": 404, "invalid": 400, "expired": 410, "wrong_session": 403}[reason]
    return BadRequest(message, status=status, reason=reason)


def presented_matches(row_call: dict, presented: Any) -> bool:
    """True when the call the client echoes is the stored call (tool, arguments, and the ids if given)."""
    if not isinstance(presented, dict):
        return False
    if presented.get("server_id") is not None and presented.get("server_id") != row_call.get("server_id"):
        return False
    tool = presented.get("tool", presented.get("name"))
    if tool != row_call.get("name"):
        return False
    if canonical(presented.get("arguments")) != canonical(row_call.get("arguments")):
        return False
    call_id = presented.get("call_id", presented.get("id"))
    return call_id is None or call_id == row_call.get("id")


def check(
    row: Optional[dict], *, owner: str, session_id: Optional[str], decision: Any, presented: Any = None, now: float
) -> None:
    """Raise the refusal an answer deserves, or return when it may be used.

    Order matters: a foreign or unknown id is ``not_found`` without saying which, so ids
    of other owners cannot be probed; the session is checked before use and expiry.
    """
    if row is None or row.get("owner") != owner:
        raise refused("not_found", "unknown tool approval")
    if decision not in DECISIONS:
        raise refused("invalid", f"tool_approval_decision must be one of {', '.join(DECISIONS)}")
    if session_id != row.get("session_id"):
        raise refused("wrong_session", "this approval belongs to another session")
    if row.get("used_at"):
        raise refused("invalid", "this approval has already been answered")
    if now >= float(row.get("expires_at") or 0):
        raise refused("expired", "this approval has expired; ask again")
    call = row.get("call") or {}
    if call_hash(call) != row.get("call_hash"):
        raise refused("invalid", "the stored call does not match its approval")
    if presented is not None and not presented_matches(call, presented):
        raise refused("invalid", "the call content does not match what was approved")
