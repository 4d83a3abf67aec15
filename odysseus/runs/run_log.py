"""The numbered event log of one run: the single source of truth for live delivery and replay.

Invariants:

- ``seq`` numbers are ``base + 1``, ``base + 2``, ... with no gap (``base`` is 0 unless the
  engine continues a session's numbering); an appended event never changes or moves.
- The log is append-only while the run lives and is dropped whole on eviction, so a
  reader that remembers its cursor can never see a gap or a duplicate: it always asks
  for "everything after N".
- Each event is serialised to JSON exactly once, on append; projections and the durable
  copy in SQLite (``odysseus.runs.durable``) reuse that text, so a replay from either is
  byte-identical. A text delta is kept in that one form (``events.StoredDelta``: its ``data``
  is decoded from the text when read), not as a dict holding a second copy of the text.
- A closed log is sealed once its run has settled (``RunLog.seal``): its entries become one
  ``SealedEntries`` (the payload texts joined into one string, plus end offsets and one byte per
  entry naming its type), about a third of the memory and a handful of objects instead of three
  per event; reads rebuild ``StoredEvent`` entries with the same types, ids and payload texts,
  so frames and cursors do not change. Nothing is appended after close, so sealing never races an append.
- Caps: a log holds at most ``max_events`` events and ``max_bytes`` payload bytes, and all
  logs together draw on one ``ByteBudget``. Lifecycle events (terminal record, done,
  error, close) are always admitted, so a run can always end properly; any other append
  past a cap raises ``LogFull`` and the engine ends the run with an error the client sees.
"""

from __future__ import annotations

import json
import threading
from array import array
from bisect import bisect_right
from itertools import accumulate, repeat
from operator import add, attrgetter, is_, itemgetter
from typing import Any, Deque, Dict, Iterator, List, Optional, Sequence, Tuple, Union, overload

from ..events import (
    AGENT_TERMINAL,
    CHAT_TERMINAL,
    CLOSE,
    DELTA,
    DONE,
    ERROR,
    MESSAGE_SAVED,
    RUN_TIMEOUT,
    Event,
    StoredDelta,
    StoredEvent,
)
from .heartbeat import park, wake_parked
from .native import gevent_active

#: Events admitted past the caps so that every run can end with its terminal outcome.
LIFECYCLE = frozenset({CHAT_TERMINAL, AGENT_TERMINAL, DONE, ERROR, CLOSE, MESSAGE_SAVED, RUN_TIMEOUT})

Entry = Tuple[Event, str]

#: a payload this long stays its own string in a sealed log (shared by every read, not copied out)
LARGE_PAYLOAD = 1024


def seq_of(entry: Entry) -> int:
    """The id of a logged entry (every logged Event carries one; only unlogged events have none)."""
    seq = entry[0].seq
    assert seq is not None, "an entry of a run log is always numbered"
    return seq


#: One encoder for every append: ``json.dumps`` with options builds a new encoder per call.
_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
#: the string encoder ``_encode`` itself uses for ``str`` values (ensure_ascii=False): same bytes
_encode_str = json.encoder.encode_basestring


def text_delta_payload(data: Dict[str, Any]) -> Optional[str]:
    """The JSON of a text delta's data, ``{"delta": s}`` or ``{"delta": s, "thinking": true}``; else None.

    Those two shapes (in that key order, as ``events.delta`` builds them) are most of a run's
    events; this string fast path writes exactly what ``_encode`` would, ten times faster.
    """
    size = len(data)
    if size == 1:
        text = data.get("delta")
        if type(text) is str:
            return '{"delta":' + _encode_str(text) + "}"
    elif size == 2 and data.get("thinking") is True:
        text = data.get("delta")
        if type(text) is str and next(iter(data)) == "delta":
            return '{"delta":' + _encode_str(text) + ',"thinking":true}'
    return None


def encode_payload(data: Dict[str, Any]) -> str:
    """An event's payload as JSON, exactly as ``_encode`` writes it; a text delta by a string fast path."""
    payload = text_delta_payload(data)
    return _encode(data) if payload is None else payload


#: event types by code, for sealed logs: a sealed entry's kind is one byte, ``code << 1`` plus 1
#: when it was a ``StoredDelta``. A type gets the next code the first time a log holding it is sealed.
_TYPE_NAMES: List[str] = []
_TYPE_CODES: Dict[str, int] = {}
_TYPE_LOCK = threading.Lock()  # registering a new type (rare); reads take no lock
#: at most this many types get a code (the vocabulary has about sixty): a log holding another stays a list
MAX_TYPE_CODES = 128


class Unsealable(Exception):
    """The entries hold an event type past ``MAX_TYPE_CODES``: the log stays as it is."""


def _codes_of(types: List[str]) -> List[int]:
    """The code of every type in ``types``, registering the new ones; Unsealable when a new one finds no
    code left. A name is in ``_TYPE_NAMES`` before its code is published, so a reader that finds a code
    (another thread, no lock) always finds its name."""
    codes = list(map(_TYPE_CODES.get, types))
    if None not in codes:
        return codes  # type: ignore[return-value]  # every one is known: no None left
    with _TYPE_LOCK:
        for kind in types:
            if kind not in _TYPE_CODES:
                if len(_TYPE_NAMES) >= MAX_TYPE_CODES:
                    raise Unsealable(kind)
                _TYPE_NAMES.append(kind)
                _TYPE_CODES[kind] = len(_TYPE_NAMES) - 1
    return [_TYPE_CODES[kind] for kind in types]


#: a sealed log without large payloads (most) shares this one (never written to)
_NO_LARGE: Dict[int, str] = {}


class SealedEntries(Sequence[Entry]):
    """A closed log's entries in compact form: read like the list they replace, rebuilt on each read.

    Holds the payload texts joined into one string, their end offsets, and one byte per entry for
    its event type and whether it was a ``StoredDelta`` (the projections' fast paths key on that
    class): a tuple of type pointers cost eight bytes per entry more. Entry ``i`` is numbered
    ``base + i + 1`` (a log's ids have no gap), its payload is the same text, and its event a
    ``StoredEvent`` (or ``StoredDelta``) equal to the one logged.
    """

    __slots__ = ("_base", "_kinds", "_text", "_ends", "_large")

    def __init__(self, entries: Sequence[Entry], base: int):
        # map and C builtins throughout: sealing costs a fraction of a microsecond per entry
        events, payloads = list(map(itemgetter(0), entries)), list(map(itemgetter(1), entries))
        lengths = list(map(len, payloads))
        codes = _codes_of(list(map(attrgetter("type"), events)))
        self._base = base
        self._kinds = bytes(map(add, map(add, codes, codes), map(is_, map(type, events), repeat(StoredDelta))))
        large: Dict[int, str] = {}
        if lengths and max(lengths) >= LARGE_PAYLOAD:
            for index, size in enumerate(lengths):
                if size >= LARGE_PAYLOAD:
                    large[index], payloads[index], lengths[index] = payloads[index], "", 0
        self._large = large or _NO_LARGE
        ends = list(accumulate(lengths))
        self._text = "".join(payloads)
        self._ends = array("I" if not ends or ends[-1] < 1 << 32 else "Q", ends)

    def __len__(self) -> int:
        return len(self._kinds)

    def _entry(self, index: int) -> Entry:
        return self.page(index, 1)[0]

    def page(self, start: int, limit: Optional[int], max_chars: Optional[int] = None) -> List[Entry]:
        """Entries ``start``, ``start + 1``, ...: at most ``limit``, and (``max_chars``) no more than
        about that many characters of joined text copied out (at least one entry)."""
        ends, text, kinds, large, names = self._ends, self._text, self._kinds, self._large, _TYPE_NAMES
        stop = len(kinds) if limit is None else min(len(kinds), start + limit)
        if start >= stop:
            return []
        begin = ends[start - 1] if start else 0
        if max_chars is not None:
            stop = max(start + 1, bisect_right(ends, begin + max_chars, start, stop))
        out: List[Entry] = []
        append, of_delta, of_event = out.append, StoredDelta.of, StoredEvent.of
        seq = self._base + start
        for index in range(start, stop):
            end = ends[index]
            payload = text[begin:end] if begin != end or index not in large else large[index]
            begin, seq, kind = end, seq + 1, kinds[index]
            append(((of_delta if kind & 1 else of_event)(names[kind >> 1], seq, payload), payload))
        return out

    @overload
    def __getitem__(self, index: int) -> Entry: ...

    @overload
    def __getitem__(self, index: slice) -> List[Entry]: ...

    def __getitem__(self, index: Union[int, slice]) -> Union[Entry, List[Entry]]:
        if isinstance(index, slice):  # the log's own reads use page()
            return [self._entry(i) for i in range(*index.indices(len(self._kinds)))]
        if index < 0:
            index += len(self._kinds)
        if not 0 <= index < len(self._kinds):
            raise IndexError("sealed entry index out of range")
        return self._entry(index)

    def __iter__(self) -> Iterator[Entry]:
        return (self._entry(i) for i in range(len(self._kinds)))

    def __reversed__(self) -> Iterator[Entry]:
        return (self._entry(i) for i in range(len(self._kinds) - 1, -1, -1))

    @property
    def last_type(self) -> Optional[str]:
        """The newest entry's type, without rebuilding it."""
        return _TYPE_NAMES[self._kinds[-1] >> 1] if self._kinds else None


_SEALED_CONDITION: Optional[threading.Condition] = None


def _sealed_condition() -> threading.Condition:
    """The one Condition all sealed logs share (made on first use: after gevent's patch, when serving)."""
    global _SEALED_CONDITION
    if _SEALED_CONDITION is None:
        _SEALED_CONDITION = threading.Condition(threading.Lock())
    return _SEALED_CONDITION


class LogFull(Exception):
    """A cap was reached; the event was not appended."""


def greenlets_only() -> bool:
    """True under gevent's monkey patch: the threads that touch run logs are greenlets of ONE OS thread.

    The server runs so (wsgi.py patches first). The native threads it has (SQLite writer, Redis
    writer) only read their own queues, never a log or the budget. A greenlet switches only where
    it blocks, so a section with no blocking call cannot interleave with another greenlet's.
    """
    return gevent_active()


class ByteBudget:
    """Payload bytes held by all logs of one process."""

    def __init__(self, limit: int):
        self.limit = limit
        self.used = 0
        # no lock among greenlets (see greenlets_only): take and give never block, so they are atomic
        self._lock = None if greenlets_only() else threading.Lock()

    def take(self, n: int, force: bool = False) -> bool:
        """Reserve ``n`` bytes; False (nothing reserved) when over the limit unless ``force``."""
        if self._lock is None:
            return self._take(n, force)
        with self._lock:
            return self._take(n, force)

    def _take(self, n: int, force: bool) -> bool:
        if not force and self.used + n > self.limit:
            return False
        self.used += n
        return True

    def give(self, n: int) -> None:
        """Release ``n`` bytes."""
        if self._lock is None:
            self.used = max(0, self.used - n)
            return
        with self._lock:
            self.used = max(0, self.used - n)


class RunLog:
    """Append-only numbered events with blocking reads for subscribers."""

    # no instance dict: the replay window holds hundreds of finished runs' logs (a dict of these
    # twelve attributes is about 650 bytes of each)
    __slots__ = (
        "base",
        "max_events",
        "max_bytes",
        "budget",
        "bytes",
        "_entries",
        "_cond",
        "_waiters",
        "_greenlets",
        "_mirrored",
        "closed",
        "released",
    )

    def __init__(self, max_events: int, max_bytes: int, budget: Optional[ByteBudget] = None, base: int = 0):
        self.base = base
        self.max_events = max_events
        self.max_bytes = max_bytes
        self.budget = budget
        self.bytes = 0
        self._entries: Union[List[Entry], SealedEntries] = []
        # A plain lock (not reentrant: cheaper per append); subclasses extend ``_admitted``, never re-lock.
        self._cond = threading.Condition(threading.Lock())
        #: the Condition's own list of blocked readers (never None where ``_greenlets`` is set)
        self._waiters: Optional[Deque[Any]] = getattr(self._cond, "_waiters", None)
        self._greenlets = greenlets_only() and self._waiters is not None
        self._mirrored = type(self)._admitted is not RunLog._admitted  # a subclass queues each entry
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
        entries = self._entries
        if entries.__class__ is SealedEntries:
            return entries.last_type
        return entries[-1][0].type if entries else None

    def append(self, event: Event) -> Entry:
        """Number, serialise and store ``event``; wake every reader. Raises LogFull past a cap.

        A text delta is kept in one form, its payload text: the logged event is a
        ``StoredDelta`` (its ``data`` decoded from that text when read), not a second copy.
        """
        payload = text_delta_payload(event.data) if event.type == DELTA else None
        stored = payload is not None
        if payload is None:
            payload = _encode(event.data)
        if not self._greenlets:
            return self._store(event, payload, numbered=None, stored=stored)
        # the per-token path among greenlets: _store's lock-free branch, one call less (see _store)
        entry = self._admit(event, payload, None, stored)
        if self._waiters:
            wake_parked(self._waiters)
        return entry

    def append_entry(self, entry: Entry) -> Entry:
        """Store an entry numbered and encoded elsewhere (the durable writer's terminal tail).

        Its number must be the next one: the tail was numbered from this log's length.
        """
        event, payload = entry
        if event.seq != self.last_seq + 1:
            raise ValueError(f"entry {event.seq} does not follow {self.last_seq}")
        return self._store(event, payload, numbered=event, stored=False)

    def _store(self, event: Event, payload: str, numbered: Optional[Event], stored: bool) -> Entry:
        if self._greenlets:
            # Invariant: one writer greenlet per run, and nothing in _admit blocks, so no other
            # greenlet (a reader checking before it waits, a finalizer) can run in the middle of
            # it: the append needs no lock. Parked readers are woken, and only
            # when there are any (a reader woken by this burst's first append is off the list
            # until it waits again, and then it has read everything: one wake per burst). The wake
            # needs no lock either (wake_parked).
            entry = self._admit(event, payload, numbered, stored)
            if self._waiters:
                wake_parked(self._waiters)
            return entry
        with self._cond:
            entry = self._admit(event, payload, numbered, stored)
            if self._waiters is None or self._waiters:
                self._cond.notify_all()
        return entry

    def _admit(self, event: Event, payload: str, numbered: Optional[Event], stored: bool) -> Entry:
        size = len(payload) + 16
        forced = event.type in LIFECYCLE
        if self.closed or self.released:
            raise LogFull("log is closed")
        if not forced and (len(self._entries) >= self.max_events or self.bytes + size > self.max_bytes):
            raise LogFull("run log cap reached")
        budget = self.budget
        if budget is not None:
            if budget._lock is None:  # among greenlets: ByteBudget._take, inline (no two calls per event)
                if not forced and budget.used + size > budget.limit:
                    raise LogFull("process log budget exhausted")
                budget.used += size
            elif not budget.take(size, force=forced):
                raise LogFull("process log budget exhausted")
        entries: List[Entry] = self._entries  # type: ignore[assignment]  # a list until sealed, and sealed only once closed
        if numbered is None:
            seq = self.base + len(entries) + 1
            numbered = StoredDelta.of(DELTA, seq, payload) if stored else event.numbered(seq)
        entry = (numbered, payload)
        entries.append(entry)
        self.bytes += size
        if event.type == CLOSE:
            self.closed = True
        if self._mirrored:
            self._admitted(entry)
        return entry

    def _admitted(self, entry: Entry) -> None:
        """Called for each entry just stored, atomically with the append (a mirror queues it here)."""

    def read_after(self, seq: int, limit: Optional[int] = None) -> List[Entry]:
        """Entries with a number greater than ``seq``: all of them, or the first ``limit``."""
        with self._cond:
            return self._page(max(0, seq - self.base), limit, None)

    def newest_first(self) -> Iterator[Entry]:
        """The entries from the newest back (no copy: the list only grows while it is iterated)."""
        return reversed(self._entries)

    def wait_after(
        self, seq: int, timeout: Optional[float], limit: Optional[int] = None, max_chars: Optional[int] = None
    ) -> List[Entry]:
        """Entries after ``seq`` (at most ``limit``); blocks up to ``timeout`` while there are none and the log is open.

        Returns an empty list on timeout, or when the log is closed (or released) with nothing after ``seq``;
        a ``timeout`` of 0 never waits (nor yields to other greenlets).
        ``max_chars`` bounds a sealed log's page by the text its read copies (``SealedEntries.page``);
        an open log's page shares its strings and is bounded by ``limit`` alone.
        """
        start = max(0, seq - self.base)
        if self._greenlets:
            # [heartbeat, issue 22] greenlets of one thread (see _store): nothing here can switch
            # between the check and parking, so no lock; a parked reader costs one loop timer, not
            # Condition.wait's new lock and gevent.Timeout (an idle follower waits once a heartbeat)
            waiters = self._waiters
            if timeout != 0 and self.last_seq <= seq and not self.closed and not self.released and waiters is not None:
                park(waiters, timeout)
            return self._page(start, limit, max_chars)
        with self._cond:
            if timeout != 0 and self.last_seq <= seq and not self.closed and not self.released:
                self._cond.wait(timeout)
            return self._page(start, limit, max_chars)

    def _page(self, start: int, limit: Optional[int], max_chars: Optional[int]) -> List[Entry]:
        """Entries from index ``start``: the open list's slice, or a sealed log's page (see ``wait_after``)."""
        entries = self._entries
        if entries.__class__ is SealedEntries:
            return entries.page(start, limit, max_chars)
        return entries[start:] if limit is None else entries[start : start + limit]

    def seal(self) -> bool:
        """Keep a closed log's entries in compact form (``SealedEntries``); True when it did.

        The engine calls this once the run has settled. Only a closed log is sealed (nothing can
        be appended to it any more), once, and only when its ids run ``base + 1 ...`` without a
        gap, as ``SealedEntries`` rebuilds them.
        """
        with self._cond:
            entries = self._entries
            if not self.closed or self.released or entries.__class__ is not list or not entries:
                return False
            if entries[0][0].seq != self.base + 1 or entries[-1][0].seq != self.base + len(entries):
                return False
            try:
                self._entries = SealedEntries(entries, self.base)
            except Unsealable:
                return False
            # Its own Condition (a lock and a 600-byte deque) is not needed any more: a closed log
            # has no waiter (the close woke them all and nobody waits on a closed log), so every
            # sealed log shares one, which readers only ever take briefly.
            self._cond = _sealed_condition()
            self._waiters = getattr(self._cond, "_waiters", None)
        return True

    def release(self) -> int:
        """Drop every entry (eviction); wake readers; return the bytes freed."""
        with self._cond:
            freed, self.bytes = self.bytes, 0
            self._entries = []
            self.released = True
            if self._greenlets and self._waiters is not None:  # notify_all's check would switch (wake_parked)
                wake_parked(self._waiters)
            else:
                self._cond.notify_all()
        if self.budget is not None:
            self.budget.give(freed)
        return freed
