"""Background chat: queue a turn, poll its job. The turn runs on the same run engine."""

from __future__ import annotations

import secrets

from flask import Blueprint, Flask, current_app, jsonify

from ..errors import BadRequest
from .auth import current_owner
from .params import body, page_args
from .turn_registry import build_turn
from .turn_start import ext, parse_turn_request, start_turn

bp = Blueprint("background", __name__)

_JOB_STATUS = {"done": "done", "error": "error", "stopped": "cancelled", "interrupted": "error"}


def _job_view(job: dict) -> dict:
    view = {
        k: job.get(k)
        for k in (
            "job_id",
            "status",
            "session_id",
            "run_id",
            "message_id",
            "created_at",
            "updated_at",
            "finished_at",
            "error",
            "attempts",
        )
    }
    if job["status"] == "done":
        view["result"] = {"content": job.get("result") or "", "message_id": job.get("message_id")}
    return view


def init_app(app: Flask) -> None:
    """Create the job pool and queue again every job a previous process left queued."""
    store = app.extensions["odysseus.store"]
    engine = app.extensions["odysseus.runs"]

    def run_job(job_id: str, claimed: bool = False) -> None:
        """Run a queued job (``claimed``: the pool already claimed it, ``store.jobs.claim_fairly``)."""
        if not claimed and engine.draining:
            return  # left queued: the next worker picks it up
        if not claimed and not store.jobs.claim(job_id, engine.worker, engine.durable.lease_seconds):
            return  # cancelled while queued, or another worker took it
        job = store.jobs.by_id(job_id)
        with app.app_context():
            try:
                req = parse_turn_request(job["request"])
                req["client_message_id"] = job_id
                started = start_turn(job["owner"], req)
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

    # [issue 14] the backend's queue: this process's (memory) or one shared by every worker (redis)
    pool = engine.backend.job_pool(int(app.config["BACKGROUND_WORKERS"]), run_job, store, engine)
    app.extensions["odysseus.jobs"] = pool

    booted = False

    def requeue_orphans() -> None:
        """Jobs whose worker is gone go back to the queue (at boot, then with the engine's recovery cadence)."""
        nonlocal booted
        if store.jobs.recover(engine.worker)["requeued"] or not booted:
            booted = True
            for job in store.jobs.queued():
                pool.submit(job["job_id"], job["owner"])

    requeue_orphans()
    engine.maintenance.append(requeue_orphans)


@bp.post("/api/chat/background")
def submit():
    """Queue a turn; answers at once with the job id."""
    owner = current_owner()
    req = parse_turn_request(body())
    if req["mode"] == "compare":
        raise BadRequest("compare mode cannot run in the background")
    store = ext("store")
    candidates = ext("router").resolve(req["model"])
    if req["session_id"]:
        store.sessions.get(owner, req["session_id"])
    build_turn(req, candidates, owner)  # validate mode-specific input before anything is stored
    if not req["session_id"]:
        req["session_id"] = store.sessions.create(owner, req["message"][:60])["id"]
    job_id = "job_" + secrets.token_urlsafe(16)
    stored = dict(req["data"])  # the whole validated request: the job starts through the same path later
    stored.pop("session", None)
    stored["session_id"] = req["session_id"]
    store.jobs.create(job_id, owner, stored)
    current_app.extensions["odysseus.jobs"].submit(job_id, owner)
    return jsonify({"job_id": job_id, "status": "queued", "session_id": req["session_id"]}), 202


@bp.get("/api/chat/background/<job_id>")
def status(job_id: str):
    """A job's status and, once complete, its result and saved message id."""
    return jsonify(_job_view(ext("store").jobs.get(current_owner(), job_id)))


@bp.get("/api/chat/background")
def list_jobs():
    """The caller's jobs, newest first."""
    limit, offset = page_args(50, 200)
    return jsonify({"jobs": [_job_view(j) for j in ext("store").jobs.list(current_owner(), limit, offset)]})


@bp.post("/api/chat/background/<job_id>/cancel")
def cancel(job_id: str):
    """Cancel a queued or running job."""
    owner = current_owner()
    store = ext("store")
    job = store.jobs.get(owner, job_id)
    if job["status"] == "queued":
        store.jobs.finish(job_id, "cancelled")
    elif job["status"] == "running" and job.get("run_id"):
        ext("runs").stop_run(owner, job["run_id"], "cancelled")
    return jsonify(_job_view(store.jobs.get(owner, job_id)))
