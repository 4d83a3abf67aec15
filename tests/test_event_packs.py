"""Packed durable rows: a run's consecutive events in one ``run_events`` row, and every reader unpacking them.

Round trips with hostile text, gaps, the caps, old single-event rows mixed with packs,
resume from every cursor, the tail, overlapping rows, a corrupt row, and the writer
itself (rows per run, a flush retried after a real lock failure, recovery from packs).
"""

from __future__ import annotations

import sqlite3
import time

import pytest
from apphelpers import insert_running_run

from odysseus.config import DEFAULTS
from odysseus.events import CHAT_TERMINAL, CLOSE, DELTA, ERROR, MESSAGE_SAVED, Event
from odysseus.runs.durable import DurableLog, read_events, read_tail
from odysseus.runs.engine import RunEngine
from odysseus.runs.event_packs import INSERT, PACK_CHARS, PACK_EVENTS, pack_rows, read_after, unpack
from odysseus.runs.run_log import encode_payload
from odysseus.store import Store, new_id
from odysseus.store.database import open_database

OWNER = "local"

ODD_TEXTS = [
    "plain",
    "nul \x00 inside",
    "\ufffd where a lone surrogate was repaired",
    '"quoted", \\backslash\\ and {braces}',
    "line one\nline two\r\n\ttab",
    "caf\u00e9 \u2603 \U0001f600 \u2028 \u2029",
    "",
    " ",
]


def _events(run_id: str, texts, first: int = 1):
    return [(run_id, first + i, DELTA, encode_payload({"delta": text})) for i, text in enumerate(texts)]


def _unpacked(db_rows):
    return [(row[0], event) for row in db_rows for event in unpack(*row[1:])]


@pytest.fixture
def db(tmp_path):
    database = open_database(str(tmp_path / "packs.db"))
    yield database.conn
    database.conn.close()


def _write(conn: sqlite3.Connection, rows) -> None:
    conn.executemany(INSERT, pack_rows(rows))
    conn.commit()


def _stored(conn, run_id):
    return conn.execute(
        "select seq, from_seq, type, payload from run_events where run_id = ? order by seq", [run_id]
    ).fetchall()


# ---------------------------------------------------------------- pack / unpack
def test_round_trip_keeps_every_payload_byte_for_byte():
    rows = _events("r1", ODD_TEXTS) + [
        ("r1", len(ODD_TEXTS) + 1, "tool_output", encode_payload({"content": "a\x00b", "n": [1, 2.5, None]})),
        ("r1", len(ODD_TEXTS) + 2, "notice", '{"text":"\\ud800 as escaped JSON text"}'),
    ]
    packed = pack_rows(rows)
    assert len(packed) == 1 and packed[0][1:3] == (len(rows), 1)
    assert [(run_id, *event) for run_id, event in _unpacked(packed)] == rows


def test_a_raw_newline_in_a_payload_or_type_is_written_alone_and_splits_nothing():
    rows = _events("r1", ["a", "b"]) + [("r1", 3, DELTA, '{"delta":"raw\nnewline"}'), ("r1", 4, "odd\ntype", "{}")]
    rows += _events("r1", ["c", "d"], first=5)
    packed = pack_rows(rows)
    assert [(row[1], row[2]) for row in packed] == [(2, 1), (3, None), (4, None), (6, 5)]
    assert [(run_id, *event) for run_id, event in _unpacked(packed)] == rows


def test_gaps_and_runs_start_new_rows_and_keep_each_runs_order():
    rows = _events("a", ["1", "2"]) + _events("b", ["x"]) + _events("a", ["3"], first=3)
    rows += _events("a", ["10", "11"], first=10) + _events("b", ["y", "z"], first=2) + _events("a", ["20"], first=20)
    packed = pack_rows(rows)
    assert [row[:3] for row in packed] == [("a", 3, 1), ("a", 11, 10), ("a", 20, None), ("b", 3, 1)]
    assert [(run_id, *event) for run_id, event in _unpacked(packed) if run_id == "a"] == [
        r for r in rows if r[0] == "a"
    ]


def test_the_event_cap_closes_a_pack():
    rows = _events("r", [str(i) for i in range(2 * PACK_EVENTS + 1)])
    packed = pack_rows(rows)
    assert [(row[2], row[1]) for row in packed] == [
        (1, PACK_EVENTS),
        (PACK_EVENTS + 1, 2 * PACK_EVENTS),
        (None, 2 * PACK_EVENTS + 1),
    ]
    assert [(run_id, *event) for run_id, event in _unpacked(packed)] == rows


def test_the_size_cap_closes_a_pack_and_a_huge_event_is_a_row_alone():
    overhead = len(encode_payload({"delta": ""}))
    near = "x" * (PACK_CHARS // 2 - overhead - 1)  # two of these fit exactly, with the joining newline
    huge = "\u2603" * (PACK_CHARS * 2)
    rows = _events("r", [near, near, "small", huge, "after", "after2"])
    packed = pack_rows(rows)
    assert sum(len(p) for p in (rows[0][3], rows[1][3])) + 2 <= PACK_CHARS
    assert [(row[2], row[1]) for row in packed] == [(1, 2), (None, 3), (None, 4), (5, 6)]
    assert all(len(row[4]) <= PACK_CHARS for row in packed if row[2] is not None)
    assert [(run_id, *event) for run_id, event in _unpacked(packed)] == rows


def test_a_row_that_does_not_add_up_is_refused():
    with pytest.raises(ValueError):
        unpack(5, 3, "delta\ndelta", '{"delta":"a"}\n{"delta":"b"}')  # claims three events, holds two


# ---------------------------------------------------------------- readers over SQLite
def _mixed_log(conn) -> list:
    """A run with old single rows (as written before packs), packs of several sizes, and the terminal tail."""
    run_id = "run_mixed"
    events = _events(run_id, [f"t{i} {ODD_TEXTS[i % len(ODD_TEXTS)]}" for i in range(600)])
    old, rest = events[:7], events[7:]
    conn.executemany("insert into run_events (run_id, seq, type, payload) values (?, ?, ?, ?)", old)
    for start in range(0, len(rest), 97):  # flush-sized batches, some above the event cap
        _write(conn, rest[start : start + 97] if start < 300 else rest[start : start + 400])
    tail_first = len(events) + 1
    tail = [
        (run_id, tail_first, MESSAGE_SAVED, encode_payload({"message_id": 3})),
        (run_id, tail_first + 1, CHAT_TERMINAL, encode_payload({"data": {"status": "done"}})),
        (run_id, tail_first + 2, CLOSE, "{}"),
    ]
    _write(conn, tail)
    return [row[1:] for row in events + tail]


def test_read_events_from_every_cursor_equals_the_unpacked_log(db):
    expected = _mixed_log(db)
    rows = _stored(db, "run_mixed")
    assert sum(1 for row in rows if row[1] is None) == 7 and len(rows) < 30
    for cursor in range(-1, len(expected) + 3):
        after = [event for event in expected if event[0] > cursor]
        assert read_events(db, "run_mixed", cursor, 10_000) == after, cursor
    # a page limit cuts inside a pack and the next page goes on from there, whatever the page size
    for page in (1, 7, 100, 256, 257, 500):
        got, cursor = [], 0
        for _ in range(len(expected) + 1):
            batch = read_events(db, "run_mixed", cursor, page)
            if not batch:
                break
            assert len(batch) <= page
            got += batch
            cursor = batch[-1][0]
        assert got == expected, page


def test_read_tail_is_the_newest_events_across_rows(db):
    expected = _mixed_log(db)
    for count in (1, 3, 4, 8, 300):
        assert read_tail(db, "run_mixed", count) == list(reversed(expected))[:count]
    assert read_tail(db, "no such run", 8) == [] and read_events(db, "no such run", 0) == []


def test_overlapping_rows_never_give_an_event_twice(db):
    """A write retried after an unknown outcome may store a row overlapping one already there."""
    events = _events("r", ["a", "b", "c", "d", "e"])
    _write(db, events[:3])
    _write(db, events[1:5])
    assert read_after(db, "r", 0, 100) == [row[1:] for row in events]
    _write(db, events[:3])  # the same pack again: ignored (same key), nothing lost
    assert len(_stored(db, "r")) == 2


def test_another_runs_rows_are_never_read(db):
    _write(db, _events("mine", ["1", "2", "3"]) + _events("theirs", ["x", "y", "z", "w"]))
    assert [e[2] for e in read_events(db, "mine", 0)] == [encode_payload({"delta": t}) for t in "123"]
    assert len(read_tail(db, "mine", 8)) == 3


# ---------------------------------------------------------------- the writer
def _durable(tmp_path) -> DurableLog:
    path = str(tmp_path / "packs.db")
    open_database(path).conn.close()
    return DurableLog(path, dict(DEFAULTS, EVENT_FLUSH_INTERVAL=30.0), "test-worker")


def test_a_200_event_run_is_a_few_rows_and_reads_back_exactly(tmp_path):
    log = _durable(tmp_path)
    try:
        run_id = new_id("run_")
        entries = [(Event(DELTA, {"delta": f"w{i} "}, i + 1), encode_payload({"delta": f"w{i} "})) for i in range(200)]
        for entry in entries[:120]:
            log.enqueue(run_id, entry)
        log.flush(timeout=10)
        for entry in entries[120:]:
            log.enqueue(run_id, entry)
        log.flush(timeout=10)
        conn = sqlite3.connect(log.path)
        rows = conn.execute("select count(*) from run_events where run_id = ?", [run_id]).fetchone()[0]
        assert rows == 2  # one per flush (each under the event cap), not 200
        assert read_events(conn, run_id, 0, 1000) == [(e.seq, e.type, p) for e, p in entries]
        assert conn.execute("select max(seq) from run_events where run_id = ?", [run_id]).fetchone()[0] == 200
        conn.close()
    finally:
        log.close()


def test_a_flush_that_fails_on_a_held_lock_is_retried_without_loss_or_duplicates(tmp_path):
    log = _durable(tmp_path)
    try:
        run_id = new_id("run_")
        entries = [(Event(DELTA, {"delta": str(i)}, i + 1), encode_payload({"delta": str(i)})) for i in range(50)]
        for entry in entries[:30]:
            log.enqueue(run_id, entry)
        holder = sqlite3.connect(log.path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # another process holds the write lock past the writer's busy wait
        with pytest.raises(sqlite3.OperationalError):
            log.flush(timeout=30)
        assert log.stats()["pending_events"] == 30 and log.failures == 1
        holder.execute("ROLLBACK")
        holder.close()
        for entry in entries[30:]:
            log.enqueue(run_id, entry)
        log.flush(timeout=10)
        conn = sqlite3.connect(log.path)
        assert read_events(conn, run_id, 0, 1000) == [(e.seq, e.type, p) for e, p in entries]
        assert conn.execute("select count(*) from run_events").fetchone()[0] == 1  # retried + new: one pack
        conn.close()
        assert log.stats()["pending_events"] == 0
    finally:
        log.close()


def test_recovery_reads_a_crashed_runs_packed_events(tmp_path):
    """A run left running by a dead worker whose durable events are packs (and one old single row)."""
    store = Store(str(tmp_path / "odysseus.db"))
    engine = RunEngine(store, dict(DEFAULTS, DATA_DIR=str(tmp_path), EVENT_FLUSH_INTERVAL=0.05))
    try:
        words = [f"w{i} " for i in range(300)]
        with store.locked.tx() as db:
            session_id, run_id = insert_running_run(
                db, OWNER, "other-boot:4242", time.time() - 5, model="demo/odysseus-demo"
            )
            db.conn.execute(
                "insert into run_events (run_id, seq, type, payload) values (?, 1, 'run_started', ?)",
                [run_id, encode_payload({"run_id": run_id})],
            )
            db.conn.executemany(INSERT, pack_rows(_events(run_id, words, first=2)))
        assert engine.recover_interrupted() == [run_id]
        saved = [m for m in store.messages.list(OWNER, session_id) if m["role"] == "assistant"]
        assert [m["content"] for m in saved] == ["".join(words)]
        with store.locked.read() as db:
            events = read_events(db, run_id, 0, 10_000)
            tail = read_tail(db, run_id, 4)
        assert [kind for _, kind, _ in events[-4:]] == [MESSAGE_SAVED, CHAT_TERMINAL, ERROR, CLOSE]
        assert [seq for seq, _, _ in events[:301]] == list(range(1, 302))
        assert events[301][0] > DEFAULTS["RUN_MAX_EVENTS"]
        assert tail == list(reversed(events[-4:]))
        assert store.runs.get(OWNER, run_id)["event_count"] == len(events)
    finally:
        engine.close()


def test_a_lone_surrogate_is_stored_repaired_and_does_not_stall_other_runs(tmp_path):
    """UTF-8 cannot store a lone surrogate: that payload is written with U+FFFD, every other event exactly."""
    log = _durable(tmp_path)
    try:
        clean = [(Event(DELTA, {"delta": f"c{i}"}, i + 1), encode_payload({"delta": f"c{i}"})) for i in range(5)]
        odd = [
            (Event(DELTA, {"delta": "a"}, 1), encode_payload({"delta": "a"})),
            (Event("notice", {"text": "x\ud800y"}, 2), encode_payload({"text": "x\ud800y"})),
            (Event(DELTA, {"delta": "pair \ud83d\ude00"}, 3), encode_payload({"delta": "pair \ud83d\ude00"})),
        ]
        for index in range(5):
            log.enqueue("clean", clean[index])
            if index < len(odd):
                log.enqueue("odd", odd[index])
        log.flush(timeout=10)
        assert log.stats()["pending_events"] == 0
        conn = sqlite3.connect(log.path)
        assert read_events(conn, "clean", 0) == [(e.seq, e.type, p) for e, p in clean]
        assert read_events(conn, "odd", 0) == [
            (1, DELTA, '{"delta":"a"}'),
            (2, "notice", '{"text":"x\ufffdy"}'),
            (3, DELTA, '{"delta":"pair \U0001f600"}'),
        ]
        conn.close()
    finally:
        log.close()


def test_a_writer_whose_database_cannot_open_loses_no_queued_event(tmp_path):
    (tmp_path / "odysseus.db").mkdir()  # a directory where the database should be: it cannot open
    path = str(tmp_path / "odysseus.db")
    log = DurableLog(path, dict(DEFAULTS, EVENT_FLUSH_INTERVAL=30.0), "test-worker")
    try:
        entries = [(Event(DELTA, {"delta": str(i)}, i + 1), encode_payload({"delta": str(i)})) for i in range(20)]
        for entry in entries[:10]:
            log.enqueue("r", entry)
        with pytest.raises(sqlite3.OperationalError):
            log.flush(timeout=10)
        assert log.stats()["pending_events"] == 10
        (tmp_path / "odysseus.db").rmdir()
        open_database(path).conn.close()
        for entry in entries[10:]:
            log.enqueue("r", entry)
        log.flush(timeout=10)
        conn = sqlite3.connect(path)
        assert read_events(conn, "r", 0) == [(e.seq, e.type, p) for e, p in entries]
        conn.close()
    finally:
        log.close()
