"""[issue 33] The heads of /v1 responses and completions: one row each, naming its run; every query filters by owner.

The row is written inside the run's start transaction (``insert`` is given the start's connection),
so a refused start leaves none. What the response produced lives where every run's output does: the
run's log, and once it ended its saved reply (``odysseus.openai_api.stored`` rebuilds the object).
"""

from __future__ import annotations

import json
import time
from typing import Any, Dict, Optional

from ..errors import NotFound
from .database import Locked, select_rows


def insert_head(
    db: Any, owner: str, object_id: str, run_id: str, kind: str, head: Dict[str, Any], stored: bool
) -> None:
    """Store a response's head inside the caller's transaction (the run's start)."""
    db.execute(
        "insert into openai_responses (id, owner, run_id, kind, created_at, stored, head) values (?, ?, ?, ?, ?, ?, ?)",
        [object_id, owner, run_id, kind, time.time(), 1 if stored else 0, json.dumps(head, ensure_ascii=False)],
    )


class OpenAIResponseRepo:
    """Read and delete the heads of the OpenAI-compatible API's responses."""

    def __init__(self, locked: Locked):
        self._l = locked

    def find(self, owner: str, object_id: str) -> Optional[dict]:
        """The owner's row with its run's status and session (None when unknown, deleted or another user's)."""
        with self._l.read() as db:
            rows = select_rows(
                db,
                "select o.id, o.run_id, o.kind, o.stored, o.head, r.session_id, r.status, r.message_id,"
                " r.user_message_id, r.events_purged, r.first_seq, r.owner from openai_responses o"
                " join runs r on r.run_id = o.run_id where o.id = ? and o.owner = ? and r.owner = ? limit 1",
                [object_id, owner, owner],
            )
        if not rows:
            return None
        row = rows[0]
        row["head"] = json.loads(row["head"])
        return row

    def get(self, owner: str, object_id: str) -> dict:
        """``find`` or NotFound."""
        row = self.find(owner, object_id)
        if row is None:
            raise NotFound(f"No response found with id '{object_id}'.")
        return row

    def delete(self, owner: str, object_id: str) -> bool:
        """Forget a response (its conversation stays in the owner's history); True when there was one."""
        with self._l.tx() as db:
            return (
                db.execute("delete from openai_responses where id = ? and owner = ?", [object_id, owner]).rowcount == 1
            )
