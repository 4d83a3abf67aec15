"""Branches of a conversation tree: alternatives of a message, selecting one, and the start-time writes.

A message's *alternatives* are the messages of its session with the same parent (regenerated
replies of one user message; edited versions of one user message). Selecting a message makes
the newest message below it (following the newest child at each step) the session's
``branch_head``; ``MessageRepo.page``/``recent`` then read that branch.
"""

from __future__ import annotations

from typing import Dict, List, Optional

from ..errors import BadRequest, NotFound
from .database import Locked


class BranchRepo:
    """Sibling information and branch selection; every query filters by owner."""

    def __init__(self, locked: Locked):
        self._l = locked

    def alternatives(self, owner: str, session_id: str, messages: List[dict]) -> Dict[int, dict]:
        """For each message id: ``{"index": 1-based, "count": n, "ids": [sibling ids, oldest first]}``."""
        parents = {m.get("parent_id") for m in messages}
        if not parents:
            return {}
        known = [p for p in parents if p is not None]
        groups: Dict[Optional[int], List[int]] = {}
        with self._l.read() as db:
            if known:
                marks = ",".join("?" * len(known))
                rows = db.execute(
                    f"select parent_id, id from messages where session_id = ? and owner = ?"
                    f" and parent_id in ({marks}) order by id",
                    [session_id, owner] + known,
                ).fetchall()
                for parent, message_id in rows:
                    groups.setdefault(parent, []).append(message_id)
            if None in parents:
                groups[None] = [
                    row[0]
                    for row in db.execute(
                        "select id from messages where session_id = ? and owner = ? and parent_id is null order by id",
                        [session_id, owner],
                    ).fetchall()
                ]
        out = {}
        for message in messages:
            ids = groups.get(message.get("parent_id")) or [message["id"]]
            index = ids.index(message["id"]) + 1 if message["id"] in ids else 1
            out[message["id"]] = {"index": index, "count": len(ids), "ids": ids}
        return out

    def select(self, owner: str, session_id: str, message_id: int) -> int:
        """Show the branch through ``message_id``: the newest message below it becomes the head; returns it."""
        with self._l.tx() as db:
            row = db.execute(
                "select id from messages where id = ? and session_id = ? and owner = ?", [message_id, session_id, owner]
            ).fetchone()
            if row is None:
                raise NotFound("message not found in this session")
            head = message_id
            for _ in range(100_000):  # bounded: ids grow downwards, so this ends anyway
                child = db.execute(
                    "select max(id) from messages where parent_id = ? and session_id = ? and id > ?",
                    [head, session_id, head],
                ).fetchone()[0]
                if child is None:
                    break
                head = child
            db.execute("update sessions set branch_head = ? where id = ? and owner = ?", [head, session_id, owner])
        return head


def answer_target(store, owner: str, message_id: int) -> dict:
    """The user message a regenerate/retry of ``message_id`` (a reply, or the user message itself) answers."""
    message = store.messages.get(owner, message_id)
    if message["role"] == "user":
        return message
    if message["role"] != "assistant" or message.get("parent_id") is None:
        raise BadRequest("only a reply (or a user message) can be regenerated")
    parent = store.messages.get(owner, message["parent_id"])
    if parent["role"] != "user":
        raise BadRequest("this reply does not answer a user message, so it cannot be regenerated")
    return parent


def regenerate_writes(owner: str, session_id: str, user_message_id: int):
    """The start transaction's writes for a regenerate: the run answers ``user_message_id``, whose branch is shown.

    Must run first among the start's hooks: the run row is then the connection's last insert.
    """

    def write(db) -> None:
        db.execute(
            "update sessions set branch_head = ? where id = ? and owner = ?", [user_message_id, session_id, owner]
        )
        db.execute(
            "update runs set user_message_id = ? where rowid = last_insert_rowid() and session_id = ?"
            " and owner = ? and status = 'running'",
            [user_message_id, session_id, owner],
        )

    return write


def edit_writes(owner: str, session_id: str, parent_id: Optional[int]):
    """The start transaction's writes for edit-and-resend: the new user message is an alternative of the edited one."""

    def write(db) -> None:
        row = db.execute(
            "select max(id) from messages where session_id = ? and owner = ? and role = 'user'", [session_id, owner]
        ).fetchone()
        if row and row[0] is not None:
            db.execute("update messages set parent_id = ? where id = ?", [parent_id, row[0]])

    return write
