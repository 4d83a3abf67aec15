"""Background jobs: a queued turn, its status and its result, persisted so they survive restarts."""

from __future__ import annotations

import json
import time
from typing import List, Optional

from ..errors import NotFound
from ..process_identity import worker_is_dead
from .database import Locked

JOB_STATUSES = ("queued", "running", "done", "error", "cancelled")


#: what ``claim_fairly`` says
CLAIMED, GONE, NOT_YET = "claimed", "gone", "not_yet"

#: the job's owner (``jobs.owner``: the row being claimed) runs no more jobs than any other user who has
#: jobs queued; one pass over the queued jobs' owners, then a count of running jobs per such owner
_FAIR = (
    " and (select count(*) from jobs as mine where mine.owner = jobs.owner and mine.status = 'running')"
    " <= coalesce((select min((select count(*) from jobs as theirs where theirs.owner = waiting.owner"
    " and theirs.status = 'running')) from (select distinct owner from jobs where status = 'queued') as waiting"
    " where waiting.owner != jobs.owner), 1 << 62)"
)


def _decode(row: dict) -> dict:
    row = dict(row)
    row["request"] = json.loads(row["request"]) if row.get("request") else {}
    return row


class JobRepo:
    """Create, claim, finish and read jobs; owner-facing reads filter by owner."""

    def __init__(self, locked: Locked):
        self._l = locked

    def create(self, job_id: str, owner: str, request: dict) -> dict:
        """Record a queued job."""
        now = time.time()
        row = {
            "job_id": job_id,
            "owner": owner,
            "session_id": request.get("session_id"),
            "request": json.dumps(request),
            "status": "queued",
            "run_id": None,
            "message_id": None,
            "result": None,
            "error": None,
            "attempts": 0,
            "created_at": now,
            "updated_at": now,
            "finished_at": None,
        }
        with self._l.tx() as db:
            db.table("jobs").insert(row)
        return _decode(row)

    def get(self, owner: str, job_id: str) -> dict:
        """The owner's job, or NotFound."""
        with self._l.read() as db:
            rows = list(db["jobs"].rows_where("job_id = ? and owner = ?", [job_id, owner], limit=1))
        if not rows:
            raise NotFound("job not found")
        return _decode(rows[0])

    def by_id(self, job_id: str) -> Optional[dict]:
        """Any job by id (for the worker pool)."""
        with self._l.read() as db:
            rows = list(db["jobs"].rows_where("job_id = ?", [job_id], limit=1))
        return _decode(rows[0]) if rows else None

    def claim(self, job_id: str, worker: str = "", lease_seconds: float = 15.0) -> bool:
        """Move a queued job to running under ``worker``'s lease; False when it is no longer queued."""
        return self._claim(job_id, worker, lease_seconds, "") == CLAIMED

    def claim_fairly(self, job_id: str, worker: str = "", lease_seconds: float = 15.0) -> str:
        """Claim a queued job unless it is not its owner's turn: ``CLAIMED``, ``GONE`` (no longer
        queued) or ``NOT_YET`` (another user with jobs queued has fewer running than this owner).

        Max-min fairness between users, decided and claimed in one write: two readers free at the
        same moment cannot both see the owner's running count before either claim (each sees the
        other's), so one user's burst cannot take every slot while another user's job waits.
        """
        return self._claim(job_id, worker, lease_seconds, _FAIR)

    def _claim(self, job_id: str, worker: str, lease_seconds: float, condition: str) -> str:
        now = time.time()
        with self._l.tx() as db:
            cursor = db.execute(
                "update jobs set status = 'running', attempts = attempts + 1, updated_at = ?,"
                " worker = ?, lease_until = ? where job_id = ? and status = 'queued'" + condition,
                [now, worker, now + lease_seconds, job_id],
            )
            if cursor.rowcount == 1:
                return CLAIMED
            if not condition:
                return GONE  # the plain claim asked only whether it was still queued
            row = db.execute("select status from jobs where job_id = ?", [job_id]).fetchone()
            return NOT_YET if row is not None and row[0] == "queued" else GONE

    def attach_run(self, job_id: str, session_id: str, run_id: str) -> None:
        """Record the session and run a job's turn runs in."""
        with self._l.tx() as db:
            db.table("jobs").update(job_id, {"session_id": session_id, "run_id": run_id, "updated_at": time.time()})

    def finish(
        self,
        job_id: str,
        status: str,
        *,
        message_id: Optional[int] = None,
        result: Optional[str] = None,
        error: Optional[str] = None,
    ) -> None:
        """Record a job's outcome (only while it is not already final)."""
        assert status in JOB_STATUSES
        now = time.time()
        with self._l.tx() as db:
            db.execute(
                "update jobs set status = ?, message_id = ?, result = ?, error = ?, updated_at = ?,"
                " finished_at = ? where job_id = ? and status in ('queued', 'running')",
                [status, message_id, result, error, now, now, job_id],
            )

    def queued(self) -> List[dict]:
        """Every queued job, oldest first."""
        with self._l.read() as db:
            return [_decode(r) for r in db["jobs"].rows_where("status = 'queued'", order_by="created_at")]

    def recover(self, me: str = "", max_attempts: int = 2) -> dict:
        """Jobs whose worker is gone (lease expired, or its pid dead on this boot): re-queue once, else fail.

        A job another live worker is running (a reload's old worker) keeps its fresh lease and is left alone.
        """
        now = time.time()
        requeued = failed = 0
        with self._l.tx() as db:
            rows = db.execute(
                "select job_id, attempts, worker, lease_until from jobs where status = 'running'"
            ).fetchall()
            for job_id, attempts, worker, lease_until in rows:
                if lease_until is not None and lease_until >= now and not worker_is_dead(worker, me):
                    continue
                if (attempts or 0) < max_attempts:
                    db.execute("update jobs set status = 'queued', updated_at = ? where job_id = ?", [now, job_id])
                    requeued += 1
                else:
                    db.execute(
                        "update jobs set status = 'error', error = 'interrupted by a server restart',"
                        " updated_at = ?, finished_at = ? where job_id = ?",
                        [now, now, job_id],
                    )
                    failed += 1
        return {"requeued": requeued, "failed": failed}

    def list(self, owner: str, limit: int = 50, offset: int = 0) -> List[dict]:
        """The owner's jobs, newest first."""
        with self._l.read() as db:
            return [
                _decode(r)
                for r in db["jobs"].rows_where(
                    "owner = ?", [owner], order_by="created_at desc", limit=limit, offset=offset
                )
            ]
