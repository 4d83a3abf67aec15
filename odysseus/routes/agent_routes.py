"""The agent API (spec: agent-stream-and-detached-runs.md): a second projection of the same runs.

``/api/agent/chat/stream`` and ``/attach`` encode the run log with named SSE events;
``/runs`` and ``/cancel`` read and steer the same run engine as ``/api/chat_stream``.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from flask import Blueprint, jsonify, request

from ..errors import BadRequest, NotFound
from ..events import AGENT_TERMINAL
from ..runs.outcome import pause_fields
from ..runs.views import run_view
from ..sse import agent_frame
from ..turns.parse import AGENT_API
from ..turns.request import TurnRequest
from .auth import current_owner
from .params import body, cursor, page_args
from .parts import ext, turns
from .streaming import check_stream_slot, missing_stream, stream_row, stream_started_turn

bp = Blueprint("agent_api", __name__)


def _agent_request() -> TurnRequest:
    """An agent-API body: agent mode (or research with ``use_research``), routed to an agent or profile
    (``turns/routing.py``), then the owner's defaults (the agent's own prompt and temperature win)."""
    return turns().parse(body(), AGENT_API)


@bp.post("/api/agent/chat/stream")
def agent_stream():
    """Start an agent turn and stream it with named events."""
    owner = current_owner()
    check_stream_slot(owner)  # 429 before anything starts
    after = cursor()  # a retry (same client_message_id) with Last-Event-ID attaches after that cursor
    return stream_started_turn(
        owner, turns().start_turn(owner, _agent_request()), agent_frame, AGENT_TERMINAL, after=after
    )


@bp.post("/api/agent/chat")
def agent_chat():
    """The same turn without streaming: wait for it to settle and return the result."""
    owner = current_owner()
    started = turns().start_turn(owner, _agent_request())
    view, message = turns().settle(owner, started)
    result = {
        "session_id": started.session_id,
        "run_id": view["run_id"],
        "task_id": view["run_id"],
        "status": view["status"],
        "stop_reason": view["stop_reason"],
        "model": view["model"],
        "message_id": view.get("message_id"),
        "content": message["content"] if message else "",
        "thinking": message["thinking"] if message else "",
        "total_time_ms": (message or {}).get("metadata", {}).get("total_time_ms"),
    }
    if view["status"] == "done":
        result.update(pause_fields(_completion_of(message)))  # paused (and for which approval), or complete
    if view.get("error"):
        result["error"] = view["error"]
    return jsonify(result), 200


def _completion_of(message: Optional[dict]) -> Dict[str, Any]:
    """How an agent turn ended, from its saved reply (metadata.agent), as its terminal record says it."""
    agent = ((message or {}).get("metadata") or {}).get("agent") or {}
    waiting = agent.get("awaiting_approval") or {}
    if waiting.get("approval_id"):
        return {"completion": "awaiting_approval", "approval_id": waiting["approval_id"]}
    guard = (agent.get("guard") or {}).get("type")
    return {"completion": guard or "complete"} if agent else {}


@bp.get("/api/agent/chat/stream/attach")
def attach():
    """Replay a run's events from the start or after the cursor, then follow it live.

    A run the caller cannot follow (unknown, another user's, past its window) gets the same
    ``run_missing`` + ``close`` (never a 404, which ``EventSource`` cannot see).
    """
    owner = current_owner()
    run_id = request.args.get("run_id", "").strip()
    if not run_id:
        raise BadRequest("run_id is required")
    after = cursor()
    try:
        row = ext("store").runs.get(owner, run_id)
    except NotFound:  # unknown or another user's: answered exactly like an expired run of unknown status
        row = None
    response = stream_row(ext("runs"), owner, row, after, agent_frame) if row is not None else None
    if response is not None:
        return response
    return missing_stream(run_id, None, agent_frame, after)


@bp.get("/api/agent/chat/runs")
def list_runs():
    """The caller's detached runs, newest first, paginated."""
    owner = current_owner()
    limit, offset = page_args(50, 200)
    engine = ext("runs")
    rows = ext("store").runs.list(owner, limit + 1, offset)
    more = len(rows) > limit
    runs = [run_view(row, engine.get(owner, row["run_id"])) for row in rows[:limit]]
    return jsonify({"runs": runs, "limit": limit, "offset": offset, "next_offset": offset + limit if more else None})


@bp.post("/api/agent/chat/runs/<run_id>/cancel")
def cancel_run(run_id: str):
    """Cooperatively cancel a run; a repeat or a finished run answers with the final state."""
    owner = current_owner()
    store, engine = ext("store"), ext("runs")
    row = store.runs.get(owner, run_id)  # 404 for unknown or foreign ids
    run = engine.get(owner, run_id)
    requested = False
    if run is not None and run.status == "running":
        requested = run.cancel.cancelled is False
        engine.stop_run(owner, run_id, "cancelled")
    elif run is None and row["status"] == "running":  # driven by another worker (RUN_BACKEND=redis)
        requested = engine.backend.stop_elsewhere(engine, owner, run_id, "cancelled")
    row = store.runs.get(owner, run_id)
    view = run_view(row, engine.get(owner, run_id))
    view["cancel_requested"] = requested
    return jsonify(view)
