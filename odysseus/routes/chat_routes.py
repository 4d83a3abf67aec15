"""/api/chat_stream and its companions: stream_status, resume, stop (spec: chat-stream-events.md)."""

from __future__ import annotations

from typing import Iterator, List

from flask import Blueprint, current_app, jsonify, request

from ..cancel import CancelToken
from ..chat_turn import model_messages
from ..errors import NotFound
from ..events import CHAT_TERMINAL, DONE, ERROR, Event
from ..llm.base import ChatRequest
from ..llm.llm_core import Candidate, stream_route
from ..preferences import apply_user_defaults
from ..sse import chat_frame, comment
from .auth import current_owner
from .branch_routes import plan_branch
from ..runs.views import run_view
from .params import body, cursor, json_or_empty
from .research_mode import apply_use_research
from .streaming import check_stream_slot, run_stream, sse_response, stream_row, stream_started_turn
from .turn_start import ext, parse_turn_request, start_turn

bp = Blueprint("chat", __name__)


@bp.post("/api/chat_stream")
def chat_stream():
    """Start a turn (or attach to the one a repeated ``client_message_id`` started) and stream it."""
    owner = current_owner()
    check_stream_slot(owner)  # 429 before anything starts
    data = body()
    plan = plan_branch(owner, data)  # regenerate_of / edit_of (branch_routes.py); None for a plain send
    req = apply_use_research(parse_turn_request(data))  # use_research: true -> a research job
    req["branch"] = plan
    apply_user_defaults(req, ext("store"), owner)  # the user's system prompt and temperature (settings screen)
    if req["mode"] == "compare":
        candidates = ext("router").resolve(req["model"])
        if req["session_id"]:
            ext("store").sessions.get(owner, req["session_id"])
        return _compare_stream(candidates, req, owner)
    # a retry (same client_message_id) with Last-Event-ID attaches after that cursor
    return stream_started_turn(owner, start_turn(owner, req), chat_frame, CHAT_TERMINAL, after=cursor())


def _compare_stream(candidates: List[Candidate], req: dict, owner: str):
    """Compare mode: stream one model directly; nothing is detached or stored."""
    store = ext("store")
    newest = int(current_app.config["HISTORY_CONTEXT_MESSAGES"])
    history = store.messages.recent(owner, req["session_id"], newest) if req["session_id"] else []
    messages = model_messages(history) + [{"role": "user", "content": req["message"]}]
    request_ = ChatRequest(model=candidates[0].model, messages=messages, temperature=req["temperature"])
    cancel = CancelToken()

    def generate() -> Iterator[str]:
        yield comment("connected")
        try:
            for event in stream_route(candidates, request_, cancel):
                frame = chat_frame(event)
                if frame:
                    yield frame
            done = chat_frame(Event(DONE, {}))
            if done:
                yield done
        except Exception as exc:  # noqa: BLE001 - every failure becomes the stream's error event
            status = getattr(exc, "status", 500)
            message = getattr(exc, "message", "Internal error")
            error = chat_frame(Event(ERROR, {"error": message, "status": status}))
            if error:
                yield error
        finally:
            cancel.cancel("client_gone")  # closes the provider connection when the client leaves

    return sse_response(generate())


@bp.get("/api/chat/stream_status/<session_id>")
def stream_status(session_id: str):
    """The caller's newest run on the session: status, ids, counters (never text)."""
    owner = current_owner()
    store, engine = ext("store"), ext("runs")
    store.sessions.get(owner, session_id)
    run = engine.for_session(owner, session_id)
    row = store.runs.latest_for_session(owner, session_id)
    if run is not None and (row is None or row["run_id"] != run.run_id):
        row = store.runs.get(owner, run.run_id)
    if row is None:
        raise NotFound("this session has no run")
    return jsonify(run_view(row, run if run is not None and run.run_id == row["run_id"] else None))


@bp.get("/api/chat/resume/<session_id>")
def resume(session_id: str):
    """Replay the session's run from the start or after the cursor, then follow it live."""
    owner = current_owner()
    after = cursor()
    store, engine = ext("store"), ext("runs")
    store.sessions.get(owner, session_id)
    headers = {"X-Odysseus-Session-Id": session_id}
    run = engine.for_session(owner, session_id)
    if run is not None and not run.log.released:
        return run_stream(engine, run, after, chat_frame, headers)
    row = store.runs.latest_for_session(owner, session_id)
    response = stream_row(engine, owner, row, after, chat_frame, headers) if row else None
    if response is None:
        raise NotFound("no resumable run for this session; read its history instead")
    return response


@bp.post("/api/chat/stop/<session_id>")
def stop(session_id: str):
    """Stop the session's run when ``X-Odysseus-Run-Id`` names it exactly."""
    owner = current_owner()
    ext("store").sessions.get(owner, session_id)
    run_id = request.headers.get("X-Odysseus-Run-Id")
    if not run_id:
        run_id = json_or_empty().get("run_id")
    stopped = ext("runs").stop(owner, session_id, run_id if isinstance(run_id, str) else None)
    return jsonify({"stopped": stopped})
