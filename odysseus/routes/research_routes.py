"""The research job API: start, the job's own stream, status, cancel, result, list, delete.

A job id is the id of the run doing the research; every route is owner-scoped and answers
404 for another user's ids. The job stream is a third projection of the run log
(``sse.research_frame``), served by the same follow loop as the chat and agent streams.
"""

from __future__ import annotations

from typing import Iterator, Optional, Tuple

from flask import Blueprint, jsonify, request

from ..errors import BadRequest, Conflict, NotFound
from ..runs.run import Run
from ..sse import JOB_STATUS, comment, job_frame, research_frame
from .auth import current_owner
from .params import body, cursor, page_args
from ..turns.parse import RESEARCH_API
from .parts import ext, turns
from .streaming import sse_response, stream_row

bp = Blueprint("research", __name__)


def _live(owner: str, job_id: str):
    run = ext("runs").get(owner, job_id)
    return run if run is not None and run.mode == "research" else None


def _job(owner: str, job_id: str) -> Tuple[dict, Optional[Run]]:
    """The owner's job row (404 otherwise) and its run while this process still holds it."""
    store = ext("store")
    row = store.research.get(owner, job_id)
    run = _live(owner, job_id)
    if row["status"] == "running" and run is None:
        # Not in this process: the server restarted during the job (its run was marked interrupted).
        try:
            record = store.runs.get(owner, job_id)
        except NotFound:
            record = {"status": "interrupted", "message_id": None, "error": "the job's run is gone"}
        if record["status"] != "running":
            store.research.finish(
                job_id,
                JOB_STATUS.get(record["status"], "error"),
                message_id=record.get("message_id"),
                report=record.get("partial_content") or "",
                sources=[],
                findings=[],
                stats={},
                partial=True,
                error=record.get("error") or record["status"],
            )
            row = store.research.get(owner, job_id)
    return row, run


def _state(row: dict, run) -> dict:
    """Sources, findings, progress and stats: live from the run, else as saved."""
    if run is not None and run.status == "running":
        state = run.context.metadata.get("research") or {}
        return {
            "status": "running",
            "sources": state.get("sources") or [],
            "findings": state.get("findings") or [],
            "progress": state.get("progress") or {"phase": "starting"},
            "stats": state.get("stats") or {},
            "partial": False,
        }
    return {
        "status": row["status"],
        "sources": row["sources"],
        "findings": row["findings"],
        "progress": {"phase": row["status"]},
        "stats": row["stats"],
        "partial": row["partial"],
    }


def _summary(row: dict, run) -> dict:
    state = _state(row, run)
    return {
        "job_id": row["job_id"],
        "session_id": row["session_id"],
        "query": row["query"],
        "status": state["status"],
        "partial": state["partial"],
        "phase": state["progress"].get("phase"),
        "progress": state["progress"],
        "total_sources": len(state["sources"]),
        "total_findings": len(state["findings"]),
        "stats": state["stats"],
        "error": row["error"],
        "message_id": row["message_id"],
        "created_at": row["created_at"],
        "finished_at": row["finished_at"],
    }


@bp.post("/api/research/start")
def start():
    """Start a research job in a new (or the given) session; answers at once with its id."""
    owner = current_owner()
    data = body()
    query = data.get("query")
    if not isinstance(query, str) or not query.strip():
        raise BadRequest("query is required and must be a non-empty string")
    started = turns().start_turn(owner, turns().parse({**data, "message": query}, RESEARCH_API))
    if started.run is not None:
        job_id, status = started.run.run_id, "running" if started.run.status == "running" else None
    else:  # a repeated client_message_id whose job has ended
        job_id, status = (started.row or {}).get("run_id"), None
    if job_id is None:
        raise Conflict("the earlier request with this client_message_id left no job")
    if status is None:
        status = _summary(*_job(owner, job_id))["status"]
    return jsonify({"job_id": job_id, "session_id": started.session_id, "status": status, "query": query}), 202


def _final_only(row: dict) -> Iterator[str]:
    yield comment("connected")
    final = {
        "status": row["status"],
        "final": True,
        "job_id": row["job_id"],
        "session_id": row["session_id"],
        "message_id": row["message_id"],
        "partial": row["partial"],
        "replayed": True,
    }
    if row["error"]:
        final["error"] = row["error"]
    yield job_frame(final)


@bp.get("/api/research/stream/<job_id>")
def stream(job_id: str):
    """The job's SSE stream from the start or after the cursor, live until its final status frame."""
    owner = current_owner()
    after = cursor()
    row, run = _job(owner, job_id)  # 404 for unknown, foreign or deleted jobs
    headers = {"X-Odysseus-Job-Id": job_id}
    headers["X-Odysseus-Session-Id"] = row["session_id"]
    # the job is a run: its memory log, or its durable log inside the replay window (after a restart too)
    response = stream_row(ext("runs"), owner, ext("store").runs.get(owner, job_id), after, research_frame, headers)
    if response is not None:
        return response
    return sse_response(_final_only(row), headers)


@bp.get("/api/research/status/<job_id>")
def status(job_id: str):
    """Where the job is: status, phase, counts (no report text)."""
    return jsonify(_summary(*_job(current_owner(), job_id)))


@bp.post("/api/research/cancel/<job_id>")
def cancel(job_id: str):
    """Cancel a running job; ``cancelled`` says whether it ended cancelled (repeats answer the same)."""
    owner = current_owner()
    row, run = _job(owner, job_id)
    if run is not None and run.status == "running":
        ext("runs").stop_run(owner, job_id, "cancelled")
    row, run = _job(owner, job_id)
    summary = _summary(row, run)
    return jsonify({"cancelled": summary["status"] == "cancelled", "job_id": job_id, "status": summary["status"]})


@bp.get("/api/research/<job_id>")
def result(job_id: str):
    """The job's result: the report (Markdown, numbered citations), sources, findings, stats."""
    owner = current_owner()
    row, run = _job(owner, job_id)
    view = _summary(row, run)
    state = _state(row, run)
    view.update(
        report=run.content if view["status"] == "running" and run is not None else row["report"],
        sources=state["sources"],
        findings=state["findings"],
    )
    return jsonify(view)


@bp.get("/api/research")
def list_jobs():
    """The caller's jobs, newest first; ``q`` searches the questions and reports."""
    owner = current_owner()
    limit, offset = page_args(50, 200)
    q = request.args.get("q", "").strip()
    if len(q) > 200:
        raise BadRequest("q is longer than 200 characters")
    rows = ext("store").research.list(owner, q, limit + 1, offset)
    jobs = [
        _summary(*_job(owner, row["job_id"])) if row["status"] == "running" else _summary(row, None)
        for row in rows[:limit]
    ]
    return jsonify(
        {"jobs": jobs, "limit": limit, "offset": offset, "next_offset": offset + limit if len(rows) > limit else None}
    )


@bp.delete("/api/research/<job_id>")
def delete(job_id: str):
    """Forget a job (cancelling it first when it runs); the chat session it was saved to stays."""
    owner = current_owner()
    _, run = _job(owner, job_id)
    if run is not None and run.status == "running":
        ext("runs").stop_run(owner, job_id, "cancelled")
    ext("store").research.delete(owner, job_id)
    return jsonify({"deleted": True, "job_id": job_id})
