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
``heartbeat_interval`` seconds of silence on that connection (also while the reader's
cursor is ahead of the log: appends it does not get are not "noise" that resets or
triggers them).

Cursor rules (docs/protocol.md, "Cursor and resume"):

- ids increase across the runs of a session, so a cursor kept from the previous run is
  below this run's first id and simply means "from the start of this run";
- a reconnect to an ended run whose cursor is at or past the last frame its projection
  sends (``ended_before``) gets 204 from the routes, so ``EventSource`` stops reconnecting;
- a run the caller cannot follow (unknown, another user's, expired) is answered with
  ``run_missing`` and ``close`` under the ids ``MISSING_SEQ - 1`` and ``MISSING_SEQ``;
  a reconnect carrying that id back gets 204.

Replays are written in bounded pieces (``encode_pieces``: at most ``PIECE_BYTES`` per
yield, the first one small), read from the memory log ``PAGE`` entries at a time, so a
reader that does not read holds one piece in this process, never the run, and a resume's
first event goes out at once whatever the log's length.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, Iterator, List, Optional

from ..events import CLOSE, DELTA, DONE, ERROR, MESSAGE_SAVED, MODEL_INFO, RUN_STARTED, START, Event
from ..sse import comment
from .durable import as_entry, read_events, read_tail
from .heartbeat import END, with_heartbeats
from .run import Run
from .run_log import Entry, seq_of

if TYPE_CHECKING:
    from ..store import Store
    from .engine import RunEngine

Projection = Callable[[Event, Optional[str]], Optional[str]]

#: the most SSE text one yield carries (the server writes it before the generator resumes)
PIECE_BYTES = 64 * 1024
#: the first piece of a replay: small, so the first event does not wait for 64 KiB of frames
FIRST_PIECE_BYTES = 4 * 1024
#: entries taken from the memory log per read (a 100,000-event replay is never copied whole)
PAGE = 2000
#: ids of the ``run_missing`` and ``close`` frames of a run the caller cannot follow: above any run's ids
MISSING_SEQ = 2**53 - 1


def encode(entries: Iterable[Entry], projection: Projection) -> str:
    """The SSE text of ``entries`` in one projection."""
    return "".join(frame for frame in (projection(event, payload) for event, payload in entries) if frame)


def encode_pieces(
    entries: Iterable[Entry], projection: Projection, limit: int = PIECE_BYTES, first: Optional[int] = None
) -> Iterator[str]:
    """The SSE text of ``entries`` in pieces of about ``limit`` characters (a bigger frame is cut in slices).

    ``first``: a smaller bound for the first piece (the reader sees its first event sooner).
    SSE frames may be split across writes anywhere, so the client sees the same bytes as one string.
    """
    parts: List[str] = []
    size = 0
    bound = first or limit
    for event, payload in entries:
        frame = projection(event, payload)
        if not frame:
            continue
        parts.append(frame)
        size += len(frame)
        if size >= bound:
            text = "".join(parts)
            parts, size, bound = [], 0, limit
            for start in range(0, len(text), limit):
                yield text[start : start + limit]
    if parts:
        yield "".join(parts)


def last_sent_seq(newest_first: Iterable[Entry], projection: Projection) -> Optional[int]:
    """The id of the last entry ``projection`` sends, scanning ``newest_first`` (entries from the end), or None."""
    for event, payload in newest_first:
        if projection(event, payload):
            return event.seq
    return None


def ended_before(
    engine: "RunEngine", run: Optional[Run], row: Optional[Dict[str, Any]], after: int, projection: Projection
) -> bool:
    """True when the run has ended and ``after`` is at or past the last frame this projection sends.

    From the memory log while ``run`` holds it, else from the run's durable tail.
    """
    if run is not None and not run.log.released:
        if not run.log.closed:
            return False
        last = last_sent_seq(run.log.newest_first(), projection)
        return last is not None and after >= last
    if row is None or row.get("status") == "running":
        return False
    with engine.store.locked.read() as db:
        tail = read_tail(db, row["run_id"], 8)
    if not tail or tail[0][1] != CLOSE:
        return False
    last = last_sent_seq([as_entry(*r) for r in tail], projection)  # tail: newest first
    return last is not None and after >= last


def follow_memory(
    engine: "RunEngine", run: Run, after: int, projection: Projection, heartbeat_interval: float, opened: bool = False
) -> Iterator[str]:
    """The run's memory log after ``after``, then live events until ``close``; durable if it is released."""
    if not engine.subscribe(run):
        yield from follow_durable(
            engine.store, run.run_id, after, projection, heartbeat_interval, engine.durable.interval, opened
        )
        return
    reader = _MemoryReader(run, after, projection)
    try:
        yield from with_heartbeats(reader.wait, heartbeat_interval, head="" if opened else comment("connected"))
    finally:
        engine.unsubscribe(run)
    if reader.released:
        yield from follow_durable(
            engine.store,
            run.run_id,
            reader.cursor,
            projection,
            heartbeat_interval,
            engine.durable.interval,
            opened=True,
        )


class _MemoryReader:
    """``wait`` for ``with_heartbeats`` over a memory log: its next page after the cursor, in pieces."""

    __slots__ = ("run", "cursor", "projection", "first", "done", "released")

    def __init__(self, run: Run, after: int, projection: Projection):
        self.run = run
        self.cursor = after
        self.projection = projection
        self.first: Optional[int] = FIRST_PIECE_BYTES
        self.done = False  # the close was read: after its pieces, the stream ends
        self.released = False  # evicted under us (memory pressure): the durable log has the rest

    def wait(self, timeout: float) -> Optional[Iterable[str]]:
        if self.done:
            return END
        log = self.run.log
        entries = log.wait_after(self.cursor, timeout, PAGE, max_chars=self.first or PIECE_BYTES)
        if entries:
            self.cursor = seq_of(entries[-1])
            self.done = entries[-1][0].type == CLOSE
            pieces = encode_pieces(entries, self.projection, first=self.first)
            self.first = None
            return pieces
        if log.released:
            self.released = True
            return END
        if log.closed:
            return END
        return ()


def follow_durable(
    store: "Store",
    run_id: str,
    after: int,
    projection: Projection,
    heartbeat_interval: float,
    poll: float,
    opened: bool = False,
    page: int = 100,
) -> Iterator[str]:
    """The durable log after ``after``; polls while the run is still being written elsewhere."""
    reader = _DurableReader(store, run_id, after, projection, poll, page)
    yield from with_heartbeats(reader.wait, heartbeat_interval, head="" if opened else comment("connected"))


class _DurableReader:
    """``wait`` for ``with_heartbeats`` over the durable log: pages after the cursor, polled every ``poll`` s."""

    def __init__(self, store: "Store", run_id: str, after: int, projection: Projection, poll: float, page: int):
        self.store, self.run_id, self.cursor, self.projection = store, run_id, after, projection
        self.poll, self.page = poll, page
        self.first: Optional[int] = FIRST_PIECE_BYTES
        self.done = False  # the close was read
        self.behind = False  # the last read reached the end of what is written

    def wait(self, timeout: float) -> Optional[Iterable[str]]:
        if self.done:
            return END
        store, run_id = self.store, self.run_id
        deadline = time.monotonic() + timeout
        while True:
            if self.behind:  # the last read found the end of what is written: a poll before the next
                left = deadline - time.monotonic()
                if left <= 0:
                    return ()
                time.sleep(min(self.poll, left))
            with store.locked.read() as db:
                rows = read_events(db, run_id, self.cursor, self.page)
            if rows:
                entries = [as_entry(*row) for row in rows]
                self.cursor = seq_of(entries[-1])
                self.done = entries[-1][0].type == CLOSE
                self.behind = len(rows) < self.page
                pieces = list(encode_pieces(entries, self.projection, first=self.first))
                self.first = None
                if pieces or self.done:
                    return pieces
                continue
            self.behind = True
            if not _still_running(store, run_id):
                # a finished run whose tail is not durable (its save is still being retried): nothing more to send
                with store.locked.read() as db:
                    if not read_events(db, run_id, self.cursor, 1):
                        return END
                self.behind = False


def _still_running(store: "Store", run_id: str) -> bool:
    with store.locked.read() as db:
        row = db.execute("select status from runs where run_id = ?", [run_id]).fetchone()
    return bool(row) and row[0] == "running"


def durable_available(row: Optional[Dict[str, Any]]) -> bool:
    """True while a run's durable log is kept (inside the replay window)."""
    return row is not None and bool(row) and not row.get("events_purged")


def saved_final_state(
    row: Optional[Dict[str, Any]], message: Optional[Dict[str, Any]], terminal_type: str
) -> List[Event]:
    """A finished run rebuilt from its row and saved reply (for a repeat after the replay window)."""
    if row is None or message is None:
        status = (row or {}).get("status", "unknown")
        return [Event(ERROR, {"error": f"the earlier request ended as {status}", "status": 409}), Event(CLOSE, {})]
    meta = message["metadata"]
    events = [
        Event(
            RUN_STARTED,
            {"run_id": row["run_id"], "session_id": row["session_id"], "model": row["model"], "replayed": True},
        ),
        Event(START, {"task_id": row["run_id"], "model": row["model"]}),
    ]
    if meta.get("model_info"):
        events.append(Event(MODEL_INFO, meta["model_info"]))
    if message["thinking"]:
        events.append(Event(DELTA, {"delta": message["thinking"], "thinking": True}))
    if message["content"]:
        events.append(Event(DELTA, {"delta": message["content"]}))
    events.append(
        Event(
            MESSAGE_SAVED,
            {"message_id": message["id"], "session_id": row["session_id"], "role": "assistant", "replayed": True},
        )
    )
    events.append(
        Event(
            terminal_type,
            {"data": {"status": row["status"], "run_id": row["run_id"], "message_id": message["id"], "replayed": True}},
        )
    )
    if row["status"] == "done":
        events.append(
            Event(
                DONE,
                {
                    "task_id": row["run_id"],
                    "thinking": message["thinking"],
                    "total_time_ms": meta.get("total_time_ms"),
                    "session_id": row["session_id"],
                },
            )
        )
    elif row["status"] in ("error", "interrupted"):
        events.append(
            Event(
                ERROR,
                {"error": row.get("error") or row["status"], "status": (meta.get("error") or {}).get("status") or 502},
            )
        )
    events.append(Event(CLOSE, {}))
    return events
