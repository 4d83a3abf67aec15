"""Packed durable events: a run's consecutive events stored as one ``run_events`` row.

SQLite's cost is per row (about 4 µs to insert one into this table's index, more in the
worker), so the writer stores each run's consecutive pending events of one flush (or of a
final save) as one row. Row shapes (migration ``m140_run_event_packs``):

- **one event**: ``seq`` is its id, ``from_seq`` is null, ``type`` and ``payload`` are the
  event's own. Every row written before packs existed has this shape, and still reads.
- **a pack**: ``seq`` is its LAST event's id and ``from_seq`` its first (consecutive ids,
  at least two events); ``type`` holds the events' types and ``payload`` their exact payload
  texts, each joined by a newline. JSON text never carries a raw newline (the encoders
  escape every control character) and event types are identifiers, but the writer checks
  rather than assumes: an event whose text holds one is written alone.

Because ``seq`` is the last id, ``seq > cursor`` (the primary key's range) finds exactly the
rows that hold an event after the cursor, and ``max(seq)`` is still a run's newest durable
id. A pack holds at most ``PACK_EVENTS`` events and about ``PACK_CHARS`` characters, so a
reader resuming in the middle of one decodes a bounded row. A row is written whole or not
at all (one ``insert``), and readers skip any id at or below the last one they gave, so a
row overlapping another (a write retried after an unknown outcome) never duplicates events.
"""

from __future__ import annotations

from typing import Dict, Generator, Iterable, List, Optional, Tuple

from ..store.database import Executes

#: the most events one packed row holds
PACK_EVENTS = 256
#: a pack is closed before its payload text would pass this many characters (a bigger event is a row alone)
PACK_CHARS = 64 * 1024

Row = Tuple[str, int, str, str]  # run_id, seq, type, payload: one logged event as the writer queues it
DbRow = Tuple[str, int, Optional[int], str, str]  # run_id, seq, from_seq, type, payload: one run_events row
Stored = Tuple[int, str, str]  # seq, type, payload: one event as readers get it

INSERT = "insert or ignore into run_events (run_id, seq, from_seq, type, payload) values (?, ?, ?, ?, ?)"
_AFTER = "select seq, from_seq, type, payload from run_events where run_id = ? and seq > ? order by seq"
_NEWEST = "select seq, from_seq, type, payload from run_events where run_id = ? order by seq desc limit ?"


def pack_rows(rows: Iterable[Row]) -> List[DbRow]:
    """``run_events`` rows for queued events: each run's consecutive ids packed, in their order.

    A gap in a run's ids, the caps, or an event holding a newline starts a new row.
    """
    by_run: Dict[str, List[Row]] = {}
    for row in rows:
        queued = by_run.get(row[0])
        if queued is None:
            by_run[row[0]] = [row]
        else:
            queued.append(row)
    out: List[DbRow] = []
    for run_id, events in by_run.items():
        count = len(events)
        if count == 1:
            _, seq, kind, payload = events[0]
            out.append((run_id, seq, None, kind, payload))
            continue
        # the usual case, checked in C: consecutive ids, under the caps, no newline inside any text
        _, seqs, kinds, payloads = zip(*events, strict=True)
        if count <= PACK_EVENTS and seqs == tuple(range(seqs[0], seqs[0] + count)):
            kind_text, payload_text = "\n".join(kinds), "\n".join(payloads)
            if (
                len(payload_text) <= PACK_CHARS
                and payload_text.count("\n") == count - 1
                and kind_text.count("\n") == count - 1
            ):
                out.append((run_id, seqs[-1], seqs[0], kind_text, payload_text))
                continue
        _pack_slowly(out, run_id, events)
    return out


def _pack_slowly(out: List[DbRow], run_id: str, events: List[Row]) -> None:
    """One run's events cut into rows event by event (gaps, caps, newlines)."""
    chunk: List[Row] = []
    size = 0
    for event in events:
        seq, kind, payload = event[1], event[2], event[3]
        if "\n" in payload or "\n" in kind:
            _emit(out, run_id, chunk)
            chunk, size = [], 0
            out.append((run_id, seq, None, kind, payload))
            continue
        if chunk and (seq != chunk[-1][1] + 1 or len(chunk) >= PACK_EVENTS or size + len(payload) > PACK_CHARS):
            _emit(out, run_id, chunk)
            chunk, size = [], 0
        chunk.append(event)
        size += len(payload) + 1
    _emit(out, run_id, chunk)


def _emit(out: List[DbRow], run_id: str, chunk: List[Row]) -> None:
    if len(chunk) == 1:
        _, seq, kind, payload = chunk[0]
        out.append((run_id, seq, None, kind, payload))
    elif chunk:
        out.append(
            (
                run_id,
                chunk[-1][1],
                chunk[0][1],
                "\n".join([event[2] for event in chunk]),
                "\n".join([event[3] for event in chunk]),
            )
        )


def unpack(seq: int, from_seq: Optional[int], kind: str, payload: str) -> List[Stored]:
    """The events of one ``run_events`` row, oldest first (ValueError for a row that does not add up)."""
    if from_seq is None:
        return [(seq, kind, payload)]
    kinds = kind.split("\n")
    payloads = payload.split("\n")
    count = seq - from_seq + 1
    if len(kinds) != count or len(payloads) != count:
        raise ValueError(f"packed run_events row {from_seq}..{seq} holds {len(kinds)}/{len(payloads)} events")
    return list(zip(range(from_seq, seq + 1), kinds, payloads, strict=True))


def iter_events(db: Executes, run_id: str, after: int, max_rows: Optional[int] = None) -> Generator[Stored, None, None]:
    """A run's durable events after ``after``, in order, each id once (``db``: anything with ``execute``).

    ``max_rows`` bounds the rows read (each holds at least one event after ``after``).
    """
    sql, params = (_AFTER, [run_id, after]) if max_rows is None else (_AFTER + " limit ?", [run_id, after, max_rows])
    rows = db.execute(sql, params)
    cursor = after
    try:
        for seq, from_seq, kind, payload in rows:
            if from_seq is None:
                if seq > cursor:
                    cursor = seq
                    yield seq, kind, payload
                continue
            for event in unpack(seq, from_seq, kind, payload):
                if event[0] > cursor:
                    cursor = event[0]
                    yield event
    finally:
        rows.close()  # a reader that stops early must not keep the statement (and its snapshot) open


def read_after(db: Executes, run_id: str, after: int, limit: int) -> List[Stored]:
    """At most ``limit`` durable events of a run after ``after``, in order."""
    out: List[Stored] = []
    if limit <= 0:
        return out
    events = iter_events(db, run_id, after, max_rows=limit)
    try:
        for event in events:
            out.append(event)
            if len(out) >= limit:
                break
    finally:
        events.close()
    return out


def read_newest(db: Executes, run_id: str, count: int) -> List[Stored]:
    """A run's last ``count`` durable events, newest first."""
    out: List[Stored] = []
    if count <= 0:
        return out
    for row in db.execute(_NEWEST, [run_id, count]).fetchall():
        out.extend(reversed(unpack(*row)))
        if len(out) >= count:
            break
    return out[:count]
