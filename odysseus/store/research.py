"""Research jobs: the job list, each job's status and its saved result (report, sources, findings)."""

from __future__ import annotations

import json
import time
from typing import List, Optional

from ..errors import NotFound
from .database import Locked

JOB_STATUSES = ("running", "done", "error", "cancelled")
_JSON = ("sources", "findings", "stats")


def _decode(row: dict) -> dict:
    row = dict(row)
    for key in _JSON:
        row[key] = json.loads(row[key]) if row.get(key) else ([] if key != "stats" else {})
    row["partial"] = bool(row.get("partial"))
    return row


def _like(text: str) -> str:
    return "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


class ResearchRepo:
    """Create, finish, read, search and delete jobs; every query filters by owner."""

    def __init__(self, locked: Locked):
        self._l = locked

    def create(self, job_id: str, owner: str, session_id: str, query: str) -> dict:
        """Record a running job."""
        now = time.time()
        row = {
            "job_id": job_id,
            "owner": owner,
            "session_id": session_id,
            "query": query,
            "status": "running",
            "partial": 0,
            "message_id": None,
            "report": "",
            "sources": "[]",
            "findings": "[]",
            "stats": "{}",
            "error": None,
            "created_at": now,
            "updated_at": now,
            "finished_at": None,
        }
        with self._l.tx() as db:
            db.table("research_jobs").insert(row, replace=True)
        return _decode(row)

    def finish(
        self,
        job_id: str,
        status: str,
        *,
        message_id: Optional[int],
        report: str,
        sources: List[dict],
        findings: List[dict],
        stats: dict,
        partial: bool,
        error: Optional[str],
    ) -> None:
        """Record a job's outcome and result (once: a finished job stays as it ended)."""
        assert status in JOB_STATUSES
        now = time.time()
        with self._l.tx() as db:
            db.execute(
                "update research_jobs set status = ?, message_id = ?, report = ?, sources = ?, findings = ?,"
                " stats = ?, partial = ?, error = ?, updated_at = ?, finished_at = ?"
                " where job_id = ? and status = 'running'",
                [
                    status,
                    message_id,
                    report,
                    json.dumps(sources),
                    json.dumps(findings),
                    json.dumps(stats),
                    1 if partial else 0,
                    error,
                    now,
                    now,
                    job_id,
                ],
            )

    def get(self, owner: str, job_id: str) -> dict:
        """The owner's job, or NotFound."""
        with self._l.read() as db:
            rows = list(db["research_jobs"].rows_where("job_id = ? and owner = ?", [job_id, owner], limit=1))
        if not rows:
            raise NotFound("research job not found")
        return _decode(rows[0])

    def list(self, owner: str, q: str = "", limit: int = 50, offset: int = 0) -> List[dict]:
        """The owner's jobs, newest first; ``q`` matches the question or the report."""
        where, args = "owner = ?", [owner]
        if q:
            where += " and (query like ? escape '\\' or report like ? escape '\\')"
            args += [_like(q), _like(q)]
        with self._l.read() as db:
            return [
                _decode(r)
                for r in db["research_jobs"].rows_where(
                    where, args, order_by="created_at desc, rowid desc", limit=limit, offset=offset
                )
            ]

    def delete(self, owner: str, job_id: str) -> None:
        """Forget the owner's job (NotFound when it is not theirs)."""
        with self._l.tx() as db:
            if db.execute("delete from research_jobs where job_id = ? and owner = ?", [job_id, owner]).rowcount != 1:
                raise NotFound("research job not found")

    def delete_session(self, owner: str, session_id: str) -> int:
        """Forget every job saved into a deleted session."""
        with self._l.tx() as db:
            return db.execute(
                "delete from research_jobs where owner = ? and session_id = ?", [owner, session_id]
            ).rowcount
