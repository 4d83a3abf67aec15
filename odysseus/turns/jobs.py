"""Background turns: queue a ``TurnRequest``, run it later on the same run engine. No Flask.

``submit`` validates the request as a start would (model, session, the mode's input), creates
the session when none is named, stores the job row (the request as ``TurnRequest.to_json()``)
and hands the id to the backend's pool (this process's, or one shared through Redis). A pool
worker calls ``run``: claim the row, ``TurnService.start_turn`` with the job id as the
``client_message_id`` (so a job re-run after a crash attaches to the turn it started), wait for
the run to settle, record the outcome. No app context is needed anywhere on that path.

Rows written before ``to_json`` existed hold the raw request body; they are parsed as a
background body (``turns/parse.py``), exactly as they were when queued.
"""

from __future__ import annotations

import dataclasses
import secrets
from typing import Any, Dict, Mapping

from ..errors import BadRequest
from .parse import BACKGROUND
from .request import TurnRequest
from .start import TurnService

_JOB_STATUS = {"done": "done", "error": "error", "stopped": "cancelled", "interrupted": "error"}


class BackgroundJobs:
    """One app's background turns: submit, run, and re-queue those whose worker died."""

    def __init__(self, turns: TurnService, workers: int):
        self.turns, self.store, self.engine = turns, turns.store, turns.engine  # the store and engine stay
        # [issue 14] the backend's queue: this process's (memory) or one shared by every worker (redis)
        self.pool = self.engine.backend.job_pool(workers, self.run, self.store, self.engine)
        self._booted = False

    def submit(self, owner: str, request: TurnRequest) -> Dict[str, Any]:
        """Validate and queue ``request``; the job's id, status and session. Raises before storing anything."""
        if request.mode == "compare":
            raise BadRequest("compare mode cannot run in the background")
        self.turns.prepare(owner, request)  # the model, the session and the mode's input; stores nothing
        session_id = request.session_id or self.store.sessions.create(owner, request.message[:60])["id"]
        job_id = "job_" + secrets.token_urlsafe(16)
        # the whole validated request: the job starts through the same path later
        self.store.jobs.create(job_id, owner, dataclasses.replace(request, session_id=session_id).to_json())
        self.pool.submit(job_id, owner)
        return {"job_id": job_id, "status": "queued", "session_id": session_id}

    def request_of(self, job: Mapping[str, Any]) -> TurnRequest:
        """The job's request: written by ``submit``, or an older row's raw body parsed as it was queued."""
        stored = job["request"]
        if TurnRequest.is_json(stored):
            request = TurnRequest.from_json(stored)
        else:
            request = self.turns.parse(stored, BACKGROUND)
        return dataclasses.replace(request, client_message_id=job["job_id"])

    def run(self, job_id: str, claimed: bool = False) -> None:
        """Run a queued job (``claimed``: the pool already claimed it, ``store.jobs.claim_fairly``)."""
        store, engine = self.store, self.engine
        if not claimed and engine.draining:
            return  # left queued: the next worker picks it up
        if not claimed and not store.jobs.claim(job_id, engine.worker, engine.durable.lease_seconds):
            return  # cancelled while queued, or another worker took it
        job = store.jobs.by_id(job_id)
        if job is None:
            return  # deleted since it was queued
        try:
            started = self.turns.start_turn(job["owner"], self.request_of(job))
        except Exception as exc:  # the request was valid when queued; the world changed since
            store.jobs.finish(job_id, "error", error=getattr(exc, "message", str(exc)))
            return
        if started.run is None:
            row = started.row or {}
            store.jobs.finish(
                job_id,
                _JOB_STATUS.get(row.get("status") or "", "error"),
                message_id=row.get("message_id"),
                error=row.get("error"),
            )
            return
        run = started.run
        store.jobs.attach_run(job_id, started.session_id, run.run_id)
        run.settled.wait()
        store.jobs.finish(
            job_id, _JOB_STATUS.get(run.status, "error"), message_id=run.message_id, result=run.content, error=run.error
        )

    def requeue_orphans(self) -> None:
        """Jobs whose worker is gone go back to the queue (at boot, then with the engine's recovery cadence)."""
        if self.store.jobs.recover(self.engine.worker)["requeued"] or not self._booted:
            self._booted = True
            for job in self.store.jobs.queued():
                self.pool.submit(job["job_id"], job["owner"])


def init_app(app: Any) -> None:
    """Create the job pool and queue again every job a previous process left queued."""
    jobs = app.extensions["odysseus.jobs"] = BackgroundJobs(
        app.extensions["odysseus.turns"], int(app.config["BACKGROUND_WORKERS"])
    )
    jobs.requeue_orphans()
    jobs.engine.maintenance.append(jobs.requeue_orphans)
