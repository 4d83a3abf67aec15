"""Run records: the durable side of the run engine (status, lease, outcome).

Writes during a run (its events, lease renewals, the final save) belong to the engine's
native writer (``odysseus.runs.durable``); this repository creates rows inside the start
transaction and answers the owner-facing queries.
"""

from __future__ import annotations

import time
from typing import List, Optional, Tuple

from ..errors import NotFound
from .database import Locked, select_rows

RUN_STATUSES = ("running", "done", "error", "stopped", "interrupted")


class RunRepo:
    """Create, checkpoint and finish runs; every owner-facing query filters by owner."""

    def __init__(self, locked: Locked):
        self._l = locked

    @staticmethod
    def insert_running(
        db,
        *,
        run_id: str,
        session_id: str,
        owner: str,
        mode: str,
        model: str,
        user_message_id: Optional[int],
        client_message_id: Optional[str],
        worker: str,
        lease_until: float,
        first_seq: int,
        terminal_type: str,
    ) -> None:
        """Record a new running run inside the caller's transaction (the engine's start)."""
        now = time.time()
        db.execute(
            "insert into runs (run_id, session_id, owner, mode, model, status, created_at, updated_at, event_count,"
            " partial_content, partial_thinking, user_message_id, client_message_id, detached, worker, lease_until,"
            " first_seq, terminal_type, events_purged) values (?, ?, ?, ?, ?, 'running', ?, ?, 0, '', '', ?, ?, 1,"
            " ?, ?, ?, ?, 0)",
            [
                run_id,
                session_id,
                owner,
                mode,
                model,
                now,
                now,
                user_message_id,
                client_message_id,
                worker,
                lease_until,
                first_seq,
                terminal_type,
            ],
        )

    def mark_failed(self, run_id: str, error: str) -> None:
        """A run whose final save failed for good: record it as an error so memory and database agree."""
        now = time.time()
        with self._l.tx() as db:
            db.execute(
                "update runs set status = 'error', error = ?, updated_at = ?, finished_at = ?,"
                " lease_until = null where run_id = ? and status = 'running'",
                [error, now, now, run_id],
            )

    def get(self, owner: str, run_id: str) -> dict:
        """The owner's run, or NotFound."""
        with self._l.read() as db:
            rows = select_rows(db, "select * from runs where run_id = ? and owner = ? limit 1", [run_id, owner])
        if not rows:
            raise NotFound("run not found")
        return rows[0]

    def latest_for_session(self, owner: str, session_id: str) -> Optional[dict]:
        """The session's newest run, if any."""
        with self._l.read() as db:
            rows = select_rows(
                db,
                "select * from runs where session_id = ? and owner = ? order by created_at desc, rowid desc limit 1",
                [session_id, owner],
            )
        return rows[0] if rows else None

    def by_client_message(self, owner: str, session_id: str, client_message_id: str) -> Optional[dict]:
        """The run started for ``client_message_id`` in this session, if any."""
        with self._l.read() as db:
            rows = select_rows(
                db,
                "select * from runs where session_id = ? and owner = ? and client_message_id = ?"
                " order by created_at desc limit 1",
                [session_id, owner, client_message_id],
            )
        return rows[0] if rows else None

    def client_message_state(self, owner: str, session_id: str, client_message_id: str) -> Tuple[Optional[dict], bool]:
        """``by_client_message``'s row and whether the session holds a user message with that id: one statement.

        [startpath, issue 22] what a turn start with a ``client_message_id`` (every send from the page) asks.
        """
        with self._l.read() as db:
            cursor = db.execute(
                "select exists(select 1 from messages where session_id = ?1 and owner = ?2"
                " and client_message_id = ?3 and role = 'user'), r.* from (select 1) left join"
                " (select * from runs where session_id = ?1 and owner = ?2 and client_message_id = ?3"
                " order by created_at desc limit 1) r on 1",
                [session_id, owner, client_message_id],
            )
            columns = [d[0] for d in cursor.description][1:]
            message_exists, *values = cursor.fetchone()
        row = dict(zip(columns, values, strict=True))
        return (row if row["run_id"] is not None else None), bool(message_exists)

    def list(self, owner: str, limit: int = 50, offset: int = 0) -> List[dict]:
        """The owner's runs, newest first."""
        with self._l.read() as db:
            return list(
                db["runs"].rows_where(
                    "owner = ?", [owner], order_by="created_at desc, rowid desc", limit=limit, offset=offset
                )
            )

    def running(self) -> List[dict]:
        """Every run recorded as running (on start-up: left by a dead process)."""
        with self._l.read() as db:
            return list(db["runs"].rows_where("status = 'running'"))
