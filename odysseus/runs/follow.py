"""Following a run: "what happens when a client resumes" in one place.

A reader gives a cursor (the last id it has) and gets every event after it, then the live
ones, then the end of the stream. Where the events come from:

- **the memory log** while the run is held in this process (``follow_memory``): the reader
  registers before it replays, so the log cannot be evicted under it; replay and live
  delivery are one loop over "everything after my cursor";
- **the durable log** in SQLite (``follow_durable``) when the memory log is gone (evicted
  early under memory pressure, or after a restart or reload) but the replay window has not
  passed: the same ids and the same payload bytes, polled while the run is still being
  written by another process;
- after the window, nothing replays: the routes answer as the spec says (history for the
  chat stream, ``run_missing`` for attach) and a repeated ``client_message_id`` gets the
  saved final state rebuilt from history (``saved_final_state``).

Heartbeats are per connection, never enter the log, and are sent only after
``heartbeat_interval`` seconds of silence on that connection.
"""

from __future__ import annotations

import time
from typing import Callable, Iterable, Iterator, List, Optional

from ..events import CLOSE, DELTA, DONE, ERROR, MESSAGE_SAVED, MODEL_INFO, RUN_STARTED, Event
from ..sse import comment
from .durable import as_entry, read_events
from .run import Run
from .run_log import Entry

Projection = Callable[[Event, Optional[str]], Optional[str]]


def encode(entries: Iterable[Entry], projection: Projection) -> str:
    """The SSE text of ``entries`` in one projection."""
    return "".join(frame for frame in (projection(event, payload) for event, payload in entries) if frame)


def follow_memory(engine, run: Run, after: int, projection: Projection, heartbeat_interval: float,
                  opened: bool = False) -> Iterator[str]:
    """The run's memory log after ``after``, then live events until ``close``; durable if it is released."""
    if not engine.subscribe(run):
        yield from follow_durable(engine.store, run.run_id, after, projection, heartbeat_interval,
                                  engine.durable.interval, opened)
        return
    cursor = after
    try:
        if not opened:
            yield comment("connected")
        beats, quiet_since = 0, time.monotonic()
        while True:
            remaining = heartbeat_interval - (time.monotonic() - quiet_since)
            entries = run.log.wait_after(cursor, max(0.0, remaining))
            if entries:
                cursor = entries[-1][0].seq
                text = encode(entries, projection)
                if text:
                    yield text
                    quiet_since = time.monotonic()
                if entries[-1][0].type == CLOSE:
                    return
            elif run.log.released:
                break  # evicted under us (memory pressure): the durable log has the rest
            elif run.log.closed:
                return
            elif time.monotonic() - quiet_since >= heartbeat_interval:
                beats += 1
                yield comment(f"heartbeat {beats}")
                quiet_since = time.monotonic()
    finally:
        engine.unsubscribe(run)
    yield from follow_durable(engine.store, run.run_id, cursor, projection, heartbeat_interval,
                              engine.durable.interval, opened=True)


def follow_durable(store, run_id: str, after: int, projection: Projection, heartbeat_interval: float,
                   poll: float, opened: bool = False, page: int = 500) -> Iterator[str]:
    """The durable log after ``after``; polls while the run is still being written elsewhere."""
    if not opened:
        yield comment("connected")
    cursor, beats, quiet_since = after, 0, time.monotonic()
    while True:
        with store.locked.read() as db:
            rows = read_events(db, run_id, cursor, page)
        if rows:
            entries = [as_entry(*row) for row in rows]
            cursor = entries[-1][0].seq
            text = encode(entries, projection)
            if text:
                yield text
                quiet_since = time.monotonic()
            if entries[-1][0].type == CLOSE:
                return
            if len(rows) == page:
                continue
        elif not _still_running(store, run_id):
            # a finished run whose tail is not durable (its save is still being retried): nothing more to send
            with store.locked.read() as db:
                if not read_events(db, run_id, cursor, 1):
                    return
            continue
        if time.monotonic() - quiet_since >= heartbeat_interval:
            beats += 1
            yield comment(f"heartbeat {beats}")
            quiet_since = time.monotonic()
        time.sleep(poll)


def _still_running(store, run_id: str) -> bool:
    with store.locked.read() as db:
        row = db.execute("select status from runs where run_id = ?", [run_id]).fetchone()
    return bool(row) and row[0] == "running"


def durable_available(row: Optional[dict]) -> bool:
    """True while a run's durable log is kept (inside the replay window)."""
    return bool(row) and not row.get("events_purged")


def saved_final_state(row: Optional[dict], message: Optional[dict], terminal_type: str) -> List[Event]:
    """A finished run rebuilt from its row and saved reply (for a repeat after the replay window)."""
    if row is None or message is None:
        status = (row or {}).get("status", "unknown")
        return [Event(ERROR, {"error": f"the earlier request ended as {status}", "status": 409}), Event(CLOSE, {})]
    meta = message["metadata"]
    events = [Event(RUN_STARTED, {"run_id": row["run_id"], "session_id": row["session_id"], "model": row["model"],
                                  "replayed": True})]
    if meta.get("model_info"):
        events.append(Event(MODEL_INFO, meta["model_info"]))
    if message["thinking"]:
        events.append(Event(DELTA, {"delta": message["thinking"], "thinking": True}))
    if message["content"]:
        events.append(Event(DELTA, {"delta": message["content"]}))
    events.append(Event(MESSAGE_SAVED, {"message_id": message["id"], "session_id": row["session_id"],
                                        "role": "assistant", "replayed": True}))
    events.append(Event(terminal_type, {"data": {"status": row["status"], "run_id": row["run_id"],
                                                 "message_id": message["id"], "replayed": True}}))
    if row["status"] == "done":
        events.append(Event(DONE, {"task_id": row["run_id"], "thinking": message["thinking"],
                                   "total_time_ms": meta.get("total_time_ms"), "session_id": row["session_id"]}))
    elif row["status"] in ("error", "interrupted"):
        events.append(Event(ERROR, {"error": row.get("error") or row["status"],
                                    "status": (meta.get("error") or {}).get("status") or 502}))
    events.append(Event(CLOSE, {}))
    return events
