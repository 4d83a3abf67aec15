"""A run's log as a Redis Stream, so a reader on any worker follows it.

Invariants:

- The stream of run R is ``<prefix>run:R``; the entry of event ``seq`` has the id
  ``<seq>-0`` and the fields ``t`` (type) and ``p`` (the payload text the memory log
  holds), so a cursor (``Last-Event-ID``) maps to ``XREAD ... <cursor>-0`` and a replay
  from Redis is byte-identical to one from memory or SQLite.
- Only the worker driving the run writes its stream, in seq order, through one
  ``StreamWriter`` per process (pipelined batches off the run's greenlet). The memory log
  in that worker enforces the caps in events and bytes, so the stream never holds more
  than the log admitted; a cap that bites ends the run with an error the client sees.
- The stream expires: while the run is live its TTL covers the idle timeout plus the
  lease (a stream whose worker died and that nobody recovers goes away on its own); after
  ``close`` it is ``EVICT_GRACE``, reset each time a reader leaves.
- A reader trusts the stream only while it is gap-free from its cursor: an entry that
  does not follow the cursor (Redis restarted, an entry was lost), a missing stream, a
  finished run whose stream lacks its tail, or any Redis error sends the reader to the
  durable log in SQLite from the same cursor. So a reader never sees a gap or a
  duplicate, and never hangs on a stream nobody writes.
"""

from __future__ import annotations

import collections
import json
import logging
import threading
import time
from typing import TYPE_CHECKING, Any, Deque, Dict, Iterable, Iterator, List, Optional, Tuple

from ..events import CLOSE, Event
from ..sse import comment
from .follow import Projection, encode, follow_durable
from .heartbeat import END, with_heartbeats
from .redis_control import RedisClient
from .run_log import ByteBudget, Entry, RunLog, seq_of

if TYPE_CHECKING:
    from .engine import RunEngine
    from .redis_backend import RedisBackend

log = logging.getLogger(__name__)

#: entries read per XREAD
PAGE = 500
#: longest one XREAD blocks (below the client's 5 s socket timeout); an idle reader sends one per
#: heartbeat, or one per BLOCK_AT_MOST when heartbeats are further apart
BLOCK_AT_MOST = 4.0
#: how often an idle reader checks that its stream still exists and its run still runs (one EXISTS
#: and one SQLite read): not once per heartbeat; a lost stream or a tail missing from Redis hands
#: the reader to SQLite within this many seconds (Redis errors hand it over at once)
CHECK_EVERY = 5.0


def stream_key(prefix: str, run_id: str) -> str:
    """The Redis key of a run's stream."""
    return f"{prefix}run:{run_id}"


def entry_of(entry_id: str, fields: Dict[str, Any]) -> Entry:
    """A Redis stream entry as a log entry."""
    seq = int(str(entry_id).split("-", 1)[0])
    payload = fields["p"]
    return Event(fields["t"], json.loads(payload), seq), payload


class StreamWriter:
    """Writes logged entries to their runs' streams, in order, in pipelined batches."""

    def __init__(self, client: RedisClient, prefix: str, grace: float, live_ttl: float):
        self.client = client
        self.prefix = prefix
        self.grace = max(1, int(grace + 0.999))
        self.live_ttl = max(self.grace, int(live_ttl + 0.999))
        self._pending: Deque[Tuple[Optional[str], Any]] = collections.deque()
        self._wake = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._closing = False
        self.written = 0
        self.batches = 0  # pipelines sent (each one round trip)
        self.failures = 0
        self.last_error: Optional[str] = None

    def push(self, run_id: str, entry: Entry) -> None:
        """Queue one entry (cheap: called under the run log's lock)."""
        self._pending.append((run_id, entry))
        self._wake.set()

    def command(self, *args: Any) -> None:
        """Queue one Redis command to go in order with the entries, in the next pipeline (no round trip here).

        A lease taken or dropped this way rides with the run's first or last entries: one round
        trip per batch instead of one per command on the run's own greenlet. A command that
        fails counts in ``failures`` like an entry (a lease is renewed by the lease loop anyway).
        """
        self._pending.append((None, args))
        self._wake.set()

    def start(self) -> None:
        """Start the writer loop (a greenlet under gevent)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="redis-stream-writer", daemon=True)
            self._thread.start()

    def close(self, timeout: float = 5.0) -> None:
        """Write what is queued, then stop."""
        deadline = time.monotonic() + timeout
        while self._pending and time.monotonic() < deadline and self._thread is not None:
            self._wake.set()
            time.sleep(0.01)
        self._closing = True
        self._wake.set()

    def _loop(self) -> None:
        while not self._closing:
            self._wake.wait(1.0)
            self._wake.clear()
            while self._pending:
                batch: List[Tuple[Optional[str], Any]] = []
                while self._pending and len(batch) < 1000:
                    batch.append(self._pending.popleft())
                self._write(batch)

    def _write(self, batch: List[Tuple[Optional[str], Any]]) -> None:
        self.batches += 1
        pipe = self.client.pipeline(transaction=False)
        ttl = {}
        entries = 0
        for run_id, item in batch:
            if run_id is None:  # a queued command (lease take/drop), in its place in the order
                pipe.execute_command(*item)
                continue
            event, payload = item
            key = stream_key(self.prefix, run_id)
            # XADD key id t <type> p <payload>, without redis-py's xadd argument checks per entry
            pipe.execute_command("XADD", key, f"{event.seq}-0", "t", event.type, "p", payload)
            ttl[key] = self.grace if event.type == CLOSE else self.live_ttl
            entries += 1
        for key, seconds in ttl.items():
            pipe.expire(key, seconds)
        try:
            results = pipe.execute(raise_on_error=False)
        except Exception as exc:  # noqa: BLE001 - Redis down: readers fall back to SQLite (gap check)
            self.failures += 1
            self.last_error = f"{type(exc).__name__}: {exc}"
            log.warning("writing %d run events to Redis failed: %s", len(batch), exc)
            time.sleep(0.2)
            return
        errors = [r for r in results if isinstance(r, Exception)]
        self.written += entries - len(errors)
        if errors:
            self.failures += len(errors)
            self.last_error = str(errors[0])


class MirroredRunLog(RunLog):
    """A memory run log whose every admitted entry is also queued for the run's Redis Stream."""

    __slots__ = ("run_id", "writer")

    def __init__(
        self,
        run_id: str,
        writer: StreamWriter,
        max_events: int,
        max_bytes: int,
        budget: Optional[ByteBudget] = None,
        base: int = 0,
    ):
        super().__init__(max_events, max_bytes, budget, base)
        self.run_id = run_id
        self.writer = writer

    def _admitted(self, entry: Entry) -> None:
        # [perfstream, issue 22] called atomically with the memory log's append (under its lock,
        # or among greenlets with nothing that can switch): the log and the stream keep one order.
        self.writer.push(self.run_id, entry)


def follow_redis(
    backend: "RedisBackend",
    engine: "RunEngine",
    run_id: str,
    after: int,
    projection: Projection,
    heartbeat_interval: float,
    opened: bool = False,
) -> Iterator[str]:
    """Follow a run driven by any worker from its Redis Stream; SQLite takes over when Redis cannot."""
    if not opened:
        yield comment("connected")
    reader = _StreamReader(backend, engine, run_id, after, projection)
    backend.readers += 1
    try:
        yield from with_heartbeats(reader.wait, heartbeat_interval)
    except GeneratorExit:
        raise
    except Exception as exc:  # noqa: BLE001 - Redis went away mid-read: the durable log has the same events
        log.warning("following run %s from Redis failed (%s); reading SQLite", run_id, exc)
    finally:
        if reader.done:
            backend.reader_left(reader.key)
    if reader.done:
        return
    backend.handovers += 1
    yield from follow_durable(
        engine.store, run_id, reader.cursor, projection, heartbeat_interval, engine.durable.interval, opened=True
    )


class _StreamReader:
    """``wait`` for ``with_heartbeats`` over a run's stream: XREAD after the cursor, ``END`` on close or a gap.

    ``done`` says the close was read; ``END`` without it hands the reader to SQLite.
    """

    def __init__(self, backend: "RedisBackend", engine: "RunEngine", run_id: str, after: int, projection: Projection):
        self.backend, self.engine, self.run_id, self.projection = backend, engine, run_id, projection
        self.client, self.key = backend.reader_client, stream_key(backend.prefix, run_id)
        self.cursor, self.done, self.lost, self.last_check = after, False, False, 0.0  # the first idle wake checks
        try:  # a cursor before this run's first id (0, or one from the session's previous run) means "from the start"
            first = self.client.xrange(self.key, count=1)
            if first:
                start = seq_of(entry_of(*first[0]))
                if self.cursor < start - 1:
                    self.cursor = start - 1
        except Exception:  # noqa: BLE001 - Redis down: the first wait falls back to SQLite
            pass

    def wait(self, timeout: float) -> Optional[Iterable[str]]:
        if self.done or self.lost:
            return END
        deadline = time.monotonic() + timeout
        while True:
            block = max(0.001, min(deadline - time.monotonic(), BLOCK_AT_MOST))
            reply = self.client.xread({self.key: f"{self.cursor}-0"}, count=PAGE, block=int(block * 1000) or 1)
            entries = [entry_of(entry_id, fields) for _, items in (reply or []) for entry_id, fields in items]
            if entries:
                if entries[0][0].seq != self.cursor + 1:
                    self.lost = True  # a gap: a rebuilt stream (Redis restarted) or a recovery tail's jump
                    return END
                self.cursor = seq_of(entries[-1])
                self.done = entries[-1][0].type == CLOSE
                text = encode(entries, self.projection)
                if text or self.done:
                    return [text] if text else END
                continue
            if time.monotonic() - self.last_check >= CHECK_EVERY:
                self.last_check = time.monotonic()
                if not self.client.exists(self.key) or not self.backend.still_running(self.engine, self.run_id):
                    self.lost = True  # expired or lost, or finished without its tail here: SQLite has it
                    return END
            if time.monotonic() >= deadline:
                return ()
