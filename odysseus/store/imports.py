"""Storing an imported chat: the new session and all its messages in one transaction."""

from __future__ import annotations

import time
from typing import Any, Dict, List, Optional

from .database import Locked
from .messages import insert_message
from .sessions import new_id


def import_chat(
    locked: Locked, owner: str, title: str, messages: List[dict], branch_head: Optional[int] = None
) -> dict:
    """Create a session for ``owner`` holding ``messages`` (already validated); all or nothing.

    A message's ``parent_id`` naming an earlier message's export ``id`` keeps the branch
    structure; without one a message follows the message before it.
    """
    now = time.time()
    session: Dict[str, Any] = {"id": new_id("s_"), "owner": owner, "title": title, "created_at": now, "updated_at": now}
    new_ids: Dict[Any, int] = {}  # the export's message ids (whatever the file holds) -> the new ids
    tree = any(m.get("parent_id") is not None for m in messages)  # an export with branches: no parent = a root
    with locked.tx() as db:
        db.table("sessions").insert(session)
        for message in messages:
            message_id = insert_message(
                db,
                owner,
                session["id"],
                message["role"],
                message["content"],
                thinking=message.get("thinking") or "",
                metadata=message.get("metadata"),
            )
            if message.get("rating"):  # (value, comment, rated_at) from chats/transfer.py
                value, comment, rated_at = message["rating"]
                db.execute(
                    "update messages set rating = ?, rating_comment = ?, rated_at = ? where id = ?",
                    [value, comment, rated_at or now, message_id],
                )
            if tree:
                parent = new_ids.get(message.get("parent_id"))  # an unknown parent makes a root, never a cycle
                db.execute("update messages set parent_id = ? where id = ?", [parent, message_id])
            if message.get("id") is not None:
                new_ids.setdefault(message["id"], message_id)
        if branch_head in new_ids:
            db.execute("update sessions set branch_head = ? where id = ?", [new_ids[branch_head], session["id"]])
    return session
