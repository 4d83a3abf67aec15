"""Keeping one reply of a compare: the user's message and the chosen text saved as one exchange."""

from __future__ import annotations

import time
from typing import Optional

from .database import Locked
from .messages import insert_message
from .sessions import session_in_tx


def keep_compare_reply(
    locked: Locked,
    owner: str,
    session_id: Optional[str],
    title: str,
    message: str,
    content: str,
    thinking: str,
    model: str,
) -> dict:
    """Store ``message`` and the kept reply on the session's selected branch, in one transaction.

    ``session_id`` None creates the session (titled ``title``).
    """
    now = time.time()
    with locked.tx() as db:
        session_id = session_in_tx(db, owner, session_id, title, now)
        user_id = insert_message(db, owner, session_id, "user", message)
        reply_id = insert_message(
            db,
            owner,
            session_id,
            "assistant",
            content,
            thinking=thinking,
            metadata={"model_info": {"model": model, "label": model}, "compare": True, "status": "done"},
        )
    return {"session_id": session_id, "user_message_id": user_id, "message_id": reply_id}
