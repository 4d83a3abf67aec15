"""A comparison kept whole: the question once, and each model's reply once, as its alternatives.

``store_question`` saves the user's message (and creates the session when there is none yet) with
``metadata.compare = {"models": [...]}``. Each pane then opens its reply with ``open_pane``: an
assistant message whose parent is the question, so the replies of one comparison are siblings and
the page shows them with the ``< i/n >`` pager (``store/branches.py``). A model gets one reply per
question: opening a second is a ``Conflict``. ``save_pane`` writes the text as it streams (at most
every ``FLUSH_SECONDS``) and once more when the pane ends; until it ends, the stored status is
``stopped``, so a reply whose stream was cut is already what it should be: a partial, stopped reply.
"""

from __future__ import annotations

import json
import time
from typing import Any, Dict, List, Optional

from ..errors import BadRequest, Conflict, NotFound
from .database import Locked
from .messages import insert_message
from .sessions import session_in_tx

#: how often a streaming pane's text is written (and once more at its end)
FLUSH_SECONDS = 0.5


def store_question(
    locked: Locked,
    owner: str,
    session_id: Optional[str],
    title: str,
    message: str,
    models: List[str],
    metadata: Optional[Dict[str, Any]] = None,
) -> Dict[str, Any]:
    """Save the question on the session's selected branch (``session_id`` None: a new session titled ``title``)."""
    now = time.time()
    with locked.tx() as db:
        session_id = session_in_tx(db, owner, session_id, title, now)
        meta = dict(metadata or {}, compare={"models": list(models)})
        message_id = insert_message(db, owner, session_id, "user", message, metadata=meta)
    return {"session_id": session_id, "message_id": message_id, "models": list(models)}


def open_pane(locked: Locked, owner: str, session_id: str, question_id: int, model: str) -> Dict[str, Any]:
    """Open ``model``'s reply to the question ``question_id``; returns the question row and ``reply_id``.

    404 for a question that is not the owner's, not in ``session_id`` or not a comparison's; 400
    for a model the comparison did not name; 409 when that model's reply already exists.
    """
    with locked.tx() as db:
        row = db.execute(
            "select content, metadata from messages where id = ? and session_id = ? and owner = ? and role = 'user'",
            [question_id, session_id, owner],
        ).fetchone()
        meta = json.loads(row[1] or "{}") if row else {}
        if row is None or not isinstance(meta.get("compare"), dict):
            raise NotFound("no comparison with this question in this session")
        if model not in (meta["compare"].get("models") or []):
            raise BadRequest("this model is not one of the comparison's models")
        taken = db.execute(
            "select 1 from messages where parent_id = ? and session_id = ? and role = 'assistant'"
            " and json_extract(metadata, '$.compare_model') = ?",
            [question_id, session_id, model],
        ).fetchone()
        if taken is not None:
            raise Conflict("this model's reply to the question is already saved")
        reply_id = insert_message(
            db,
            owner,
            session_id,
            "assistant",
            "",
            metadata=_reply_meta(model, "stopped"),
            parent=question_id,
        )
    return {"question": row[0], "question_metadata": meta, "reply_id": reply_id}


def save_pane(
    locked: Locked,
    owner: str,
    reply_id: int,
    model: str,
    content: str,
    thinking: str,
    status: str,
    error: Optional[str] = None,
    extra: Optional[Dict[str, Any]] = None,
) -> None:
    """Write a pane's reply as it is now (``status``: ``stopped`` while streaming, then done/failed)."""
    meta = dict(extra or {}, **_reply_meta(model, status))
    if error:
        meta["error"] = error
    with locked.tx() as db:
        db.execute(
            "update messages set content = ?, thinking = ?, metadata = ? where id = ? and owner = ?",
            [content, thinking, json.dumps(meta), reply_id, owner],
        )


def discard_pane(locked: Locked, owner: str, reply_id: int) -> None:
    """Remove a pane's reply that never streamed (its response was refused, e.g. 429), so a retry may open it."""
    with locked.tx() as db:
        row = db.execute(
            "select session_id, parent_id from messages where id = ? and owner = ? and role = 'assistant'"
            " and content = '' and thinking = ''",
            [reply_id, owner],
        ).fetchone()
        if row is None:
            return
        db.execute("delete from messages where id = ?", [reply_id])
        db.execute("update sessions set branch_head = ? where id = ? and branch_head = ?", [row[1], row[0], reply_id])


def _reply_meta(model: str, status: str) -> Dict[str, Any]:
    return {
        "model_info": {"model": model, "label": model},
        "compare": True,
        "compare_model": model,
        "status": status,
        **({"stopped": True} if status == "stopped" else {}),
    }
