"""Serving a run as an SSE response: the Flask side of ``odysseus.runs.follow``.

Which source a reader gets (memory log, durable log, or the saved final state) is the
engine's policy in ``runs/follow.py``; this module only picks the run, sets the headers
proxies need and wraps the generator in a response.
"""

from __future__ import annotations

from typing import Dict, Iterable, Iterator, Optional

from flask import Response, current_app

from ..events import Event
from ..runs.engine import RunEngine, Started
from ..runs.follow import Projection, durable_available, follow_memory, saved_final_state
from ..runs.run import Run
from ..sse import comment

SSE_HEADERS = {
    "Cache-Control": "no-cache",
    "X-Accel-Buffering": "no",
}


def project(events: Iterable[Event], projection: Projection) -> Iterator[str]:
    """SSE text for events that are not in a log (synthetic): the opening comment, then frames."""
    yield comment("connected")
    for event in events:
        frame = projection(event, None)
        if frame:
            yield frame


def sse_response(body: Iterator[str], headers: Optional[Dict[str, str]] = None) -> Response:
    """A streaming ``text/event-stream`` response with the headers proxies need."""
    response = Response(body, mimetype="text/event-stream")
    response.headers.update(SSE_HEADERS)
    response.headers["Content-Type"] = "text/event-stream; charset=utf-8"
    for key, value in (headers or {}).items():
        response.headers[key] = value
    return response


def _heartbeat() -> float:
    return float(current_app.config["HEARTBEAT_INTERVAL"])


def run_stream(engine: RunEngine, run: Run, after: int, projection: Projection,
               headers: Optional[Dict[str, str]] = None) -> Response:
    """The SSE response following the live ``run`` from cursor ``after``."""
    return sse_response(follow_memory(engine, run, after, projection, _heartbeat()),
                        {"X-Odysseus-Run-Id": run.run_id, **(headers or {})})


def durable_stream(engine: RunEngine, row: dict, after: int, projection: Projection,
                   headers: Optional[Dict[str, str]] = None) -> Response:
    """The SSE response replaying (and, if another process still writes it, following) a run from SQLite."""
    # [issue 14] the backend picks the source: SQLite (memory backend) or the run's Redis Stream
    return sse_response(engine.backend.follow(engine, row["run_id"], after, projection, _heartbeat()),
                        {"X-Odysseus-Run-Id": row["run_id"], **(headers or {})})


def stream_row(engine: RunEngine, owner: str, row: dict, after: int, projection: Projection,
               headers: Optional[Dict[str, str]] = None) -> Optional[Response]:
    """Follow a run known by its row: from memory if held here, else from the durable log; None past the window."""
    run = engine.get(owner, row["run_id"])
    if run is not None and not run.log.released:
        return run_stream(engine, run, after, projection, headers)
    if durable_available(row):
        return durable_stream(engine, row, after, projection, headers)
    return None


def stream_started_turn(owner: str, started: Started, projection: Projection, terminal_type: str,
                        after: int = 0) -> Response:
    """Follow a started turn; a repeat of an earlier one is followed from its log, or its saved final state."""
    engine: RunEngine = current_app.extensions["odysseus.runs"]
    headers = {"X-Odysseus-Session-Id": started.session_id}
    if started.run is not None:
        return run_stream(engine, started.run, after, projection, headers)
    row = started.row
    if row is not None:
        response = stream_row(engine, owner, row, after, projection, headers)
        if response is not None:
            return response
        headers["X-Odysseus-Run-Id"] = row["run_id"]
    store = current_app.extensions["odysseus.store"]
    message = store.messages.get(owner, row["message_id"]) if row and row.get("message_id") else None
    # the body is read after the view returned (no app context): everything it needs is passed in
    return sse_response(project(saved_final_state(row, message, terminal_type), projection), headers)
