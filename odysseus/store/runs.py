"""Run records: the durable side of the run engine (status, checkpoints, outcome)."""

from __future__ import annotations

import time
from typing import List, Optional

from ..errors import NotFound
from .database import Locked
from .messages import insert_message

RUN_STATUSES = ("running", "done", "error", "stopped", "interrupted")


class RunRepo:
    """Create, checkpoint and finish runs; every owner-facing query filters by owner."""

    def __init__(self, locked: Locked):
        self._l = locked

    def create(self, *, run_id: str, session_id: str, owner: str, mode: str, model: str,
               user_message_id: Optional[int], client_message_id: Optional[str], detached: bool = True) -> dict:
        """Record a new running run."""
        now = time.time()
        row = {"run_id": run_id, "session_id": session_id, "owner": owner, "mode": mode, "model": model,
               "status": "running", "stop_reason": None, "created_at": now, "updated_at": now,
               "finished_at": None, "event_count": 0, "last_event_type": None, "error": None,
               "partial_content": "", "partial_thinking": "", "message_id": None,
               "user_message_id": user_message_id, "client_message_id": client_message_id,
               "detached": 1 if detached else 0}
        with self._l.tx() as db:
            db["runs"].insert(row)
        return row

    def checkpoint(self, run_id: str, *, content: str, thinking: str, event_count: int,
                   last_event_type: Optional[str]) -> None:
        """Save the partial output so far (only while the run is still running)."""
        with self._l.tx() as db:
            db.execute(
                "update runs set partial_content = ?, partial_thinking = ?, event_count = ?, last_event_type = ?,"
                " updated_at = ? where run_id = ? and status = 'running'",
                [content, thinking, event_count, last_event_type, time.time(), run_id])

    def finish_with_message(self, run: dict, *, status: str, stop_reason: Optional[str], error: Optional[str],
                            content: str, thinking: str, metadata: dict, event_count: int,
                            last_event_type: Optional[str]) -> int:
        """Save the assistant reply and the run's outcome in one transaction; return the message id.

        One transaction is what makes "saved exactly once" hold across a crash: either both
        the reply and the final status are stored, or neither, and recovery redoes it.
        """
        assert status in RUN_STATUSES
        now = time.time()
        with self._l.tx() as db:
            message_id = insert_message(db, run["owner"], run["session_id"], "assistant", content,
                                        thinking=thinking, metadata=metadata, run_id=run["run_id"])
            db.execute(
                "update runs set status = ?, stop_reason = ?, error = ?, message_id = ?, event_count = ?,"
                " last_event_type = ?, updated_at = ?, finished_at = ?, partial_content = ?, partial_thinking = ?"
                " where run_id = ?",
                [status, stop_reason, error, message_id, event_count, last_event_type, now, now, content,
                 thinking, run["run_id"]])
        return message_id

    def get(self, owner: str, run_id: str) -> dict:
        """The owner's run, or NotFound."""
        with self._l.read() as db:
            rows = list(db["runs"].rows_where("run_id = ? and owner = ?", [run_id, owner], limit=1))
        if not rows:
            raise NotFound("run not found")
        return rows[0]

    def latest_for_session(self, owner: str, session_id: str) -> Optional[dict]:
        """The session's newest run, if any."""
        with self._l.read() as db:
            rows = list(db["runs"].rows_where("session_id = ? and owner = ?", [session_id, owner],
                                              order_by="created_at desc, rowid desc", limit=1))
        return rows[0] if rows else None

    def by_client_message(self, owner: str, session_id: str, client_message_id: str) -> Optional[dict]:
        """The run started for ``client_message_id`` in this session, if any."""
        with self._l.read() as db:
            rows = list(db["runs"].rows_where("session_id = ? and owner = ? and client_message_id = ?",
                                              [session_id, owner, client_message_id],
                                              order_by="created_at desc", limit=1))
        return rows[0] if rows else None

    def list(self, owner: str, limit: int = 50, offset: int = 0) -> List[dict]:
        """The owner's runs, newest first."""
        with self._l.read() as db:
            return list(db["runs"].rows_where("owner = ?", [owner], order_by="created_at desc, rowid desc",
                                              limit=limit, offset=offset))

    def running(self) -> List[dict]:
        """Every run recorded as running (on start-up: left by a dead process)."""
        with self._l.read() as db:
            return list(db["runs"].rows_where("status = 'running'"))
