"""Serving a run as an SSE response: the Flask side of ``odysseus.runs.follow``.

Which source a reader gets (memory log, durable log, or the saved final state) is the
engine's policy in ``runs/follow.py``; this module picks the run, applies the cursor rules
that need an HTTP status (204 for a reconnect past the end, 429 past
``MAX_STREAMS_PER_USER``), sets the headers proxies need and wraps the generator in a
response whose first frame carries ``retry:`` and whose pieces are metered
(``runs/streams.py``).
"""

from __future__ import annotations

import re
from typing import Dict, Iterable, Iterator, Optional

from flask import Response, current_app

from ..errors import RateLimited
from ..events import CLOSE, RUN_MISSING, Event
from ..runs.engine import RunEngine, Started
from ..runs.follow import MISSING_SEQ, Projection, durable_available, ended_before, follow_memory, saved_final_state
from ..runs.run import Run
from ..runs.streams import StreamSlots, metered
from ..sse import comment
from .auth import current_owner

_ID = re.compile(r"[A-Za-z0-9_-]{1,200}")

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


def _slots() -> StreamSlots:
    slots = current_app.extensions.get("odysseus.stream_slots")
    if slots is None:
        slots = current_app.extensions.setdefault(
            "odysseus.stream_slots", StreamSlots(int(current_app.config["MAX_STREAMS_PER_USER"]))
        )
    return slots


def _too_many() -> RateLimited:
    return RateLimited(
        f"too many open streams for this user (at most {_slots().limit}); close one first", retry_after=3
    )


def check_stream_slot(owner: str) -> None:
    """Refuse (429) before a turn starts when the caller already has ``MAX_STREAMS_PER_USER`` streams open."""
    if _slots().full(owner):
        raise _too_many()


def sse_response(body: Iterator[str], headers: Optional[Dict[str, str]] = None, retry: bool = True) -> Response:
    """A streaming ``text/event-stream`` response with the headers proxies need.

    The stream takes one of the caller's ``MAX_STREAMS_PER_USER`` slots (429 when none is
    free) until it ends or the client leaves; its first frame carries ``retry: SSE_RETRY_MS``
    (``retry=False``: not sent; the OpenAI SDKs turn a data-less block with a field into an
    empty event they cannot parse).
    """
    owner = current_owner()
    slots = _slots()
    if not slots.acquire(owner):
        close = getattr(body, "close", None)
        if close is not None:
            close()
        raise _too_many()
    engine: Optional[RunEngine] = current_app.extensions.get("odysseus.runs")
    prefix = f"retry: {int(current_app.config['SSE_RETRY_MS'])}\n" if retry else ""
    response = Response(
        metered(
            body, engine.budget if engine is not None else None, on_close=lambda: slots.release(owner), prefix=prefix
        ),
        mimetype="text/event-stream",
    )
    response.headers.update(SSE_HEADERS)
    response.headers["Content-Type"] = "text/event-stream; charset=utf-8"
    for key, value in (headers or {}).items():
        response.headers[key] = value
    return response


def no_content(headers: Optional[Dict[str, str]] = None) -> Response:
    """204: the reader has everything this stream will ever send (``EventSource`` stops reconnecting)."""
    response = Response(status=204)
    response.headers["Cache-Control"] = "no-cache"
    for key, value in (headers or {}).items():
        response.headers[key] = value
    return response


def _heartbeat() -> float:
    return float(current_app.config["HEARTBEAT_INTERVAL"])


def run_stream(
    engine: RunEngine, run: Run, after: int, projection: Projection, headers: Optional[Dict[str, str]] = None
) -> Response:
    """The SSE response following the live ``run`` from cursor ``after`` (204 when it ended before it)."""
    headers = {"X-Odysseus-Run-Id": run.run_id, **(headers or {})}
    if after and ended_before(engine, run, None, after, projection):
        return no_content(headers)
    return sse_response(follow_memory(engine, run, after, projection, _heartbeat()), headers)


def durable_stream(
    engine: RunEngine, row: dict, after: int, projection: Projection, headers: Optional[Dict[str, str]] = None
) -> Response:
    """The SSE response replaying (and, if another process still writes it, following) a run from SQLite."""
    headers = {"X-Odysseus-Run-Id": row["run_id"], **(headers or {})}
    if after and ended_before(engine, None, row, after, projection):
        return no_content(headers)
    # [issue 14] the backend picks the source: SQLite (memory backend) or the run's Redis Stream
    return sse_response(engine.backend.follow(engine, row["run_id"], after, projection, _heartbeat()), headers)


def stream_row(
    engine: RunEngine,
    owner: str,
    row: dict,
    after: int,
    projection: Projection,
    headers: Optional[Dict[str, str]] = None,
) -> Optional[Response]:
    """Follow a run known by its row: from memory if held here, else from the durable log; None past the window."""
    run = engine.get(owner, row["run_id"])
    if run is not None and not run.log.released:
        return run_stream(engine, run, after, projection, headers)
    if durable_available(row):
        return durable_stream(engine, row, after, projection, headers)
    return None


def missing_stream(run_id: str, status: Optional[str], projection: Projection, after: int) -> Response:
    """The answer to a run the caller cannot follow: ``run_missing`` then ``close``, the same for an
    unknown id, another user's and an expired one; a reconnect carrying their id back gets 204."""
    # echoed only when it looks like an id (any caller-made id does; other bytes cannot go into a header)
    headers = {"X-Odysseus-Run-Id": run_id} if _ID.fullmatch(run_id) else {}
    if after >= MISSING_SEQ - 1:
        return no_content(headers)
    events = [
        Event(
            RUN_MISSING,
            {"run_id": run_id, "status": status, "detail": "the replay buffer has expired; restore from history"},
            MISSING_SEQ - 1,
        ),
        Event(CLOSE, {}, MISSING_SEQ),
    ]
    return sse_response(project(events, projection), headers)


def stream_started_turn(
    owner: str, started: Started, projection: Projection, terminal_type: str, after: int = 0
) -> Response:
    """Follow a started turn; a repeat of an earlier one is followed from its log (after ``after``, the
    retry's ``Last-Event-ID``), or its saved final state."""
    engine: RunEngine = current_app.extensions["odysseus.runs"]
    headers = {"X-Odysseus-Session-Id": started.session_id}
    if not started.attached:
        after = 0  # a new run: a cursor from an earlier one is below its ids anyway
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
