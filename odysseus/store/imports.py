"""Storing an imported chat: the new session and all its messages in one transaction."""

from __future__ import annotations

import time
from typing import List

from .database import Locked
from .messages import insert_message
from .sessions import new_id


def import_chat(locked: Locked, owner: str, title: str, messages: List[dict]) -> dict:
    """Create a session for ``owner`` holding ``messages`` (already validated); all or nothing."""
    now = time.time()
    session = {"id": new_id("s_"), "owner": owner, "title": title, "created_at": now, "updated_at": now}
    with locked.tx() as db:
        db["sessions"].insert(session)
        for message in messages:
            insert_message(db, owner, session["id"], message["role"], message["content"],
                           thinking=message.get("thinking") or "", metadata=message.get("metadata"))
    return session
