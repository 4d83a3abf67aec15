"""Serving a run's log as an SSE response, with per-connection heartbeats.

The subscriber registers before it replays, then reads "everything after my cursor"
in a loop, so replay and live delivery are one path and no event is skipped or sent
twice. Heartbeats are per connection and never enter the log.
"""

from __future__ import annotations

from typing import Callable, Dict, Iterable, Iterator, Optional

from flask import Response, current_app

from ..events import Event
from ..runs.agent_runs import RunManager
from ..runs.run import Run
from ..sse import comment

Projection = Callable[[Event, str], Optional[str]]

SSE_HEADERS = {
    "Cache-Control": "no-cache",
    "X-Accel-Buffering": "no",
}


def follow_run(manager: RunManager, run: Run, after: int, projection: Projection,
               heartbeat_interval: float) -> Iterator[str]:
    """Yield SSE text: an opening comment, the log after ``after``, live events, heartbeats."""
    manager.subscribe(run)
    try:
        yield comment("connected")
        cursor, beats = after, 0
        while True:
            entries = run.log.wait_after(cursor, heartbeat_interval)
            if entries:
                frames = [projection(event, payload) for event, payload in entries]
                cursor = entries[-1][0].seq
                text = "".join(frame for frame in frames if frame)
                if text:
                    yield text
            elif run.log.closed or run.log.released:
                return
            else:
                beats += 1
                yield comment(f"heartbeat {beats}")
    finally:
        manager.unsubscribe(run)


def project(events: Iterable[Event], projection: Projection) -> Iterator[str]:
    """SSE text for events that are not in a live log (rebuilt or synthetic): the opening comment, then frames."""
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


def run_stream(manager: RunManager, run: Run, after: int, projection: Projection,
               headers: Optional[Dict[str, str]] = None) -> Response:
    """The SSE response following ``run`` from cursor ``after``."""
    interval = float(current_app.config["HEARTBEAT_INTERVAL"])
    return sse_response(follow_run(manager, run, after, projection, interval),
                        {"X-Odysseus-Run-Id": run.run_id, **(headers or {})})
