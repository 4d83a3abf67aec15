"""Background chat over HTTP: queue a turn, poll its job, cancel it (the runner: ``turns/jobs.py``)."""

from __future__ import annotations

from flask import Blueprint, jsonify

from .auth import current_owner
from .params import body, page_args
from .parts import ext, turns

bp = Blueprint("background", __name__)


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


@bp.post("/api/chat/background")
def submit():
    """Queue a turn; answers at once with the job id (``turns/jobs.py``)."""
    owner = current_owner()
    return jsonify(ext("jobs").submit(owner, turns().parse(body()))), 202


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
