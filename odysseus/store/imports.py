"""Storing an imported chat: the new session and all its messages in one transaction."""

from __future__ import annotations

import time
from typing import Any, Dict, List, Optional

from .database import Locked
from .folders import folder_for_import
from .messages import insert_message
from .sessions import new_id, session_view


def import_chat(
    locked: Locked,
    owner: str,
    title: str,
    messages: List[dict],
    branch_head: Optional[int] = None,
    pinned: bool = False,
    archived: bool = False,
    folder: Optional[str] = None,
) -> dict:
    """Create a session for ``owner`` holding ``messages`` (already validated); all or nothing.

    A message's ``parent_id`` naming an earlier message's export ``id`` keeps the branch
    structure; without one a message follows the message before it. ``folder`` is a folder
    name: the owner's folder of that name (any case), made when missing (see folder_for_import).
    """
    now = time.time()
    session: Dict[str, Any] = {
        "id": new_id("s_"),
        "owner": owner,
        "title": title,
        "created_at": now,
        "updated_at": now,
        "pinned": int(pinned),
        "archived": int(archived),
    }
    new_ids: Dict[Any, int] = {}  # the export's message ids (whatever the file holds) -> the new ids
    tree = any(m.get("parent_id") is not None for m in messages)  # an export with branches: no parent = a root
    with locked.tx() as db:
        session["folder_id"] = folder_for_import(db, owner, folder, now) if folder else None
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
    return session_view(session)
