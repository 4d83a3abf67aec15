"""Tool approvals and generated images: the durable side of agent mode."""

from __future__ import annotations

import json
import time
from typing import Optional

from .database import Locked


def _decode(row: dict) -> dict:
    row = dict(row)
    row["call"] = json.loads(row["call"]) if row.get("call") else {}
    row["state"] = json.loads(row["state"]) if row.get("state") else {}
    return row


class ApprovalRepo:
    """Create, read and consume (once) tool approvals."""

    def __init__(self, locked: Locked):
        self._l = locked

    def create(
        self,
        *,
        approval_id: str,
        owner: str,
        session_id: str,
        run_id: str,
        call: dict,
        call_hash: str,
        state: dict,
        ttl: float,
        now: Optional[float] = None,
    ) -> dict:
        """Store a pending approval with the continuation state; returns the row."""
        now = time.time() if now is None else now
        row = {
            "id": approval_id,
            "owner": owner,
            "session_id": session_id,
            "run_id": run_id,
            "call": json.dumps(call, ensure_ascii=False),
            "call_hash": call_hash,
            "created_at": now,
            "expires_at": now + ttl,
            "used_at": None,
            "decision": None,
            "state": json.dumps(state, ensure_ascii=False),
        }
        with self._l.tx() as db:
            db.table("approvals").insert(row)
        return _decode(row)

    def get(self, approval_id: str) -> Optional[dict]:
        """The approval (any owner: the caller checks the binding), or None."""
        with self._l.read() as db:
            rows = list(db["approvals"].rows_where("id = ?", [approval_id], limit=1))
        return _decode(rows[0]) if rows else None

    def consume(self, approval_id: str, owner: str, decision: str, now: Optional[float] = None) -> bool:
        """Mark the approval used; False when it was already used (a racing answer won)."""
        now = time.time() if now is None else now
        with self._l.tx() as db:
            return self.consume_with(db, approval_id, owner, decision, now)

    @staticmethod
    def consume_with(db, approval_id: str, owner: str, decision: str, now: float) -> bool:
        """``consume`` inside the caller's transaction."""
        cursor = db.execute(
            "update approvals set used_at = ?, decision = ? where id = ? and owner = ? and used_at is null",
            [now, decision, approval_id, owner],
        )
        return cursor.rowcount == 1

    def expire(self, approval_id: str, seconds_ago: float = 1.0) -> None:
        """Make an approval expired now (tests and admin tools)."""
        with self._l.tx() as db:
            db.execute("update approvals set expires_at = ? where id = ?", [time.time() - seconds_ago, approval_id])


class ImageRepo:
    """Which owner owns each stored image file."""

    def __init__(self, locked: Locked):
        self._l = locked

    def add(self, name: str, owner: str, session_id: Optional[str], mime: str, size: int) -> None:
        """Record a stored image."""
        with self._l.tx() as db:
            db.table("images").insert(
                {
                    "name": name,
                    "owner": owner,
                    "session_id": session_id,
                    "mime": mime,
                    "size": size,
                    "created_at": time.time(),
                }
            )

    def get(self, owner: str, name: str) -> Optional[dict]:
        """The owner's image record, or None (also for other owners' images)."""
        with self._l.read() as db:
            rows = list(db["images"].rows_where("name = ? and owner = ?", [name, owner], limit=1))
        return rows[0] if rows else None
