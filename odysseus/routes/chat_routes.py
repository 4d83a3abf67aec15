"""/api/chat_stream and its companions: stream_status, resume, stop (spec: chat-stream-events.md)."""

from __future__ import annotations

from typing import Iterator

from flask import Blueprint, jsonify, request

from ..errors import NotFound
from ..events import CHAT_TERMINAL, Event
from ..runs.views import run_view
from ..sse import chat_frame, comment
from ..turns.compare import start_compare
from ..turns.parse import CHAT_STREAM
from .auth import current_owner
from .params import body, cursor, json_or_empty
from .parts import ext, turns
from .streaming import check_stream_slot, run_stream, sse_response, stream_row, stream_started_turn

bp = Blueprint("chat", __name__)


@bp.post("/api/chat_stream")
def chat_stream():
    """Start a turn (or attach to the one a repeated ``client_message_id`` started) and stream it."""
    owner = current_owner()
    check_stream_slot(owner)  # 429 before anything starts
    # regenerate_of / edit_of, use_research: true (a research job), the owner's defaults: turns/parse.py
    turn = turns().parse(body(), CHAT_STREAM)
    if turn.mode == "compare":  # one model straight from the provider; its reply saved once (turns/compare.py)
        pane = start_compare(turns(), owner, turn)
        try:
            return sse_response(_frames(pane.events), pane.headers)
        except Exception:
            pane.discard()  # refused before it streamed (429): a retry opens the reply again
            raise
    # a retry (same client_message_id) with Last-Event-ID attaches after that cursor
    return stream_started_turn(owner, turns().start_turn(owner, turn), chat_frame, CHAT_TERMINAL, after=cursor())


def _frames(events: Iterator[Event]) -> Iterator[str]:
    """A compare stream's frames; when the client leaves, closing the events closes the provider."""
    yield comment("connected")
    try:
        for event in events:
            frame = chat_frame(event)
            if frame:
                yield frame
    finally:
        close = getattr(events, "close", None)
        if close is not None:
            close()


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
