"""The numbered event log of one run: the single source of truth for live delivery and replay.

Invariants:

- ``seq`` numbers are ``base + 1``, ``base + 2``, ... with no gap (``base`` is 0 unless the
  engine continues a session's numbering); an appended event never changes or moves.
- The log is append-only while the run lives and is dropped whole on eviction, so a
  reader that remembers its cursor can never see a gap or a duplicate: it always asks
  for "everything after N".
- Each event is serialised to JSON exactly once, on append; projections and the durable
  copy in SQLite (``odysseus.runs.durable``) reuse that text, so a replay from either is
  byte-identical.
- Caps: a log holds at most ``max_events`` events and ``max_bytes`` payload bytes, and all
  logs together draw on one ``ByteBudget``. Lifecycle events (terminal record, done,
  error, close) are always admitted, so a run can always end properly; any other append
  past a cap raises ``LogFull`` and the engine ends the run with an error the client sees.
"""

from __future__ import annotations

import json
import threading
from typing import List, Optional, Tuple

from ..events import AGENT_TERMINAL, CHAT_TERMINAL, CLOSE, DONE, ERROR, MESSAGE_SAVED, RUN_TIMEOUT, Event

#: Events admitted past the caps so that every run can end with its terminal outcome.
LIFECYCLE = frozenset({CHAT_TERMINAL, AGENT_TERMINAL, DONE, ERROR, CLOSE, MESSAGE_SAVED, RUN_TIMEOUT})

Entry = Tuple[Event, str]
#: One encoder for every append: ``json.dumps`` with options builds a new encoder per call.
encode_payload = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


class LogFull(Exception):
    """A cap was reached; the event was not appended."""


class ByteBudget:
    """Payload bytes held by all logs of one process."""

    def __init__(self, limit: int):
        self.limit = limit
        self.used = 0
        self._lock = threading.Lock()

    def take(self, n: int, force: bool = False) -> bool:
        """Reserve ``n`` bytes; False (nothing reserved) when over the limit unless ``force``."""
        with self._lock:
            if not force and self.used + n > self.limit:
                return False
            self.used += n
            return True

    def give(self, n: int) -> None:
        """Release ``n`` bytes."""
        with self._lock:
            self.used = max(0, self.used - n)


class RunLog:
    """Append-only numbered events with blocking reads for subscribers."""

    def __init__(self, max_events: int, max_bytes: int, budget: Optional[ByteBudget] = None, base: int = 0):
        self.base = base
        self.max_events = max_events
        self.max_bytes = max_bytes
        self.budget = budget
        self.bytes = 0
        self._entries: List[Entry] = []
        self._cond = threading.Condition(threading.RLock())
        self.closed = False
        self.released = False

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def last_seq(self) -> int:
        """The number of the newest event (``base`` while empty)."""
        return self.base + len(self._entries)

    @property
    def last_type(self) -> Optional[str]:
        """Type of the newest event."""
        return self._entries[-1][0].type if self._entries else None

    def append(self, event: Event) -> Entry:
        """Number, serialise and store ``event``; wake every reader. Raises LogFull past a cap."""
        return self._store(event, encode_payload(event.data), numbered=None)

    def append_entry(self, entry: Entry) -> Entry:
        """Store an entry numbered and encoded elsewhere (the durable writer's terminal tail).

        Its number must be the next one: the tail was numbered from this log's length.
        """
        event, payload = entry
        if event.seq != self.last_seq + 1:
            raise ValueError(f"entry {event.seq} does not follow {self.last_seq}")
        return self._store(event, payload, numbered=event)

    def _store(self, event: Event, payload: str, numbered: Optional[Event]) -> Entry:
        size = len(payload) + 16
        forced = event.type in LIFECYCLE
        with self._cond:
            if self.closed or self.released:
                raise LogFull("log is closed")
            if not forced and (len(self._entries) >= self.max_events or self.bytes + size > self.max_bytes):
                raise LogFull("run log cap reached")
            if self.budget is not None and not self.budget.take(size, force=forced):
                raise LogFull("process log budget exhausted")
            entry = (numbered or event.numbered(self.last_seq + 1), payload)
            self._entries.append(entry)
            self.bytes += size
            if event.type == CLOSE:
                self.closed = True
            self._cond.notify_all()
        return entry

    def read_after(self, seq: int) -> List[Entry]:
        """Every entry with a number greater than ``seq``."""
        with self._cond:
            return self._entries[max(0, seq - self.base):]

    def wait_after(self, seq: int, timeout: Optional[float]) -> List[Entry]:
        """Entries after ``seq``; blocks up to ``timeout`` while there are none and the log is open.

        Returns an empty list on timeout, or when the log is closed (or released) with nothing after ``seq``.
        """
        with self._cond:
            if self.last_seq <= seq and not self.closed and not self.released:
                self._cond.wait(timeout)
            return self._entries[max(0, seq - self.base):]

    def release(self) -> int:
        """Drop every entry (eviction); wake readers; return the bytes freed."""
        with self._cond:
            freed, self.bytes = self.bytes, 0
            self._entries = []
            self.released = True
            self._cond.notify_all()
        if self.budget is not None:
            self.budget.give(freed)
        return freed
