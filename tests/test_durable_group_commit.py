"""Group commit of final saves: runs ending together share one transaction, each saved (or failed) on its own.

The writer's native thread is held busy while the saves queue up (as in a burst of runs
finishing at once), then released: the queued saves go in one ``BEGIN IMMEDIATE ... COMMIT``,
each claimed individually, each with its own outcome.
"""

from __future__ import annotations

import sqlite3
import threading
import time

import pytest
from apphelpers import insert_running_run
from waiting import wait_for

from odysseus.config import DEFAULTS
from odysseus.events import CHAT_TERMINAL, CLOSE, DELTA, DONE, MESSAGE_SAVED, Event
from odysseus.runs.durable import DurableLog, FinalSave, read_events
from odysseus.runs.run_log import encode_payload
from odysseus.store import Store, new_id

OWNER = "local"
RUNS = 12


@pytest.fixture
def setup(tmp_path):
    path = str(tmp_path / "odysseus.db")
    store = Store(path)
    log = DurableLog(path, dict(DEFAULTS, EVENT_FLUSH_INTERVAL=3600.0), "test-worker")
    yield store, log
    log.close()


def _running(store: Store, count: int):
    now, runs = time.time(), []
    with store.locked.tx() as db:
        for _ in range(count):
            runs.append(insert_running_run(db, OWNER, "test-worker", now + 60))
    return runs


def _log_deltas(log: DurableLog, run_id: str, count: int) -> None:
    for i in range(count):
        event = Event(DELTA, {"delta": f"{run_id}:{i} "}, i + 1)
        log.enqueue(run_id, (event, encode_payload(event.data)))


def _final(session_id: str, run_id: str, deltas: int) -> FinalSave:
    def tail(message_id):
        return [
            Event(MESSAGE_SAVED, {"message_id": message_id, "session_id": session_id}),
            Event(CHAT_TERMINAL, {"data": {"status": "done", "message_id": message_id}}),
            Event(DONE, {"task_id": run_id}),
            Event(CLOSE, {}),
        ]

    return FinalSave(
        run_id=run_id,
        owner=OWNER,
        session_id=session_id,
        status="done",
        stop_reason="stop",
        error=None,
        content=f"reply of {run_id}",
        thinking="",
        metadata={"run_id": run_id},
        build_tail=tail,
        first_tail_seq=deltas + 1,
    )


def _burst(log: DurableLog, finals, patience: float = 10.0):
    """Hold the native thread, queue every save from its own thread, release; each save's outcome."""
    gate = threading.Event()
    blocker = log._native.submit(gate.wait, 30)
    outcomes = {}

    def save(final):
        try:
            outcomes[final.run_id] = log.save_final(final, patience=patience)
        except Exception as exc:  # noqa: BLE001 - the outcome under test
            outcomes[final.run_id] = exc

    threads = [threading.Thread(target=save, args=(final,)) for final in finals]
    for thread in threads:
        thread.start()
    wait_for(lambda: len(log._finals) == len(finals), 20, what="every save queued")
    gate.set()
    blocker.result(10)
    for thread in threads:
        thread.join(30)
    assert not any(thread.is_alive() for thread in threads)
    return outcomes


def _message_count(store: Store, run_id: str) -> int:
    with store.locked.read() as db:
        return db.execute("select count(*) from messages where run_id = ?", [run_id]).fetchone()[0]


def test_a_burst_of_final_saves_is_one_commit_and_each_run_is_saved_whole(setup):
    store, log = setup
    runs = _running(store, RUNS)
    for _, run_id in runs:
        _log_deltas(log, run_id, 30)
    finals = [_final(session_id, run_id, 30) for session_id, run_id in runs]
    outcomes = _burst(log, finals)
    assert outcomes == {run_id: True for _, run_id in runs}
    assert log.final_commits == 1
    for final in finals:
        assert final.saved and final.message_id is not None
        row = store.runs.get(OWNER, final.run_id)
        assert row["status"] == "done" and row["message_id"] == final.message_id and row["event_count"] == 34
        with store.locked.read() as db:
            events = read_events(db, final.run_id, 0, 1000)
            rows = db.execute("select count(*) from run_events where run_id = ?", [final.run_id]).fetchone()[0]
        assert [seq for seq, _, _ in events] == list(range(1, 35)) and rows == 1  # deltas + tail: one pack
        assert [kind for _, kind, _ in events[-4:]] == [MESSAGE_SAVED, CHAT_TERMINAL, DONE, CLOSE]
        assert _message_count(store, final.run_id) == 1


def test_one_failing_save_in_a_group_fails_alone(setup, monkeypatch):
    store, log = setup
    runs = _running(store, RUNS)
    finals = [_final(session_id, run_id, 0) for session_id, run_id in runs]
    doomed = finals[RUNS // 2].run_id
    finish = log._finish_row

    def sometimes_broken(conn, final):
        tail = finish(conn, final)  # its statements ran: the savepoint must undo them
        if final.run_id == doomed:
            raise ValueError("simulated bug in one final save")
        return tail

    monkeypatch.setattr(log, "_finish_row", sometimes_broken)
    outcomes = _burst(log, finals)
    assert isinstance(outcomes.pop(doomed), ValueError)
    assert set(outcomes.values()) == {True} and len(outcomes) == RUNS - 1
    assert log.final_commits == 1
    assert store.runs.get(OWNER, doomed)["status"] == "running" and _message_count(store, doomed) == 0
    with store.locked.read() as db:
        assert read_events(db, doomed, 0, 100) == []
    for run_id in outcomes:
        assert store.runs.get(OWNER, run_id)["status"] == "done" and _message_count(store, run_id) == 1


def test_a_run_another_writer_finished_is_not_saved_twice_in_a_group(setup):
    store, log = setup
    runs = _running(store, 4)
    with store.locked.tx() as db:
        db.execute("update runs set status = 'interrupted' where run_id = ?", [runs[0][1]])
    finals = [_final(session_id, run_id, 0) for session_id, run_id in runs]
    assert _burst(log, finals) == {run_id: True for _, run_id in runs}
    assert not finals[0].saved and all(final.saved for final in finals[1:])
    assert _message_count(store, runs[0][1]) == 0 and store.runs.get(OWNER, runs[0][1])["status"] == "interrupted"


def test_a_group_whose_commit_cannot_start_is_retried_until_it_lands(setup):
    """Another process holds the write lock past the writer's busy wait: every save of the group retries."""
    store, log = setup
    runs = _running(store, 6)
    for _, run_id in runs:
        _log_deltas(log, run_id, 5)
    finals = [_final(session_id, run_id, 5) for session_id, run_id in runs]
    holder = sqlite3.connect(log.path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    threading.Timer(1.5, lambda: holder.execute("ROLLBACK")).start()
    try:
        outcomes = _burst(log, finals, patience=20.0)
    finally:
        time.sleep(0.1)
        holder.close()
    assert outcomes == {run_id: True for _, run_id in runs}
    assert log.failures >= 1
    for final in finals:
        assert final.saved and _message_count(store, final.run_id) == 1
        with store.locked.read() as db:
            assert [seq for seq, _, _ in read_events(db, final.run_id, 0, 100)] == list(range(1, 10))


def test_no_save_of_a_group_is_reported_saved_when_the_database_cannot_open(tmp_path):
    (tmp_path / "odysseus.db").mkdir()  # a directory where the database should be
    log = DurableLog(str(tmp_path / "odysseus.db"), dict(DEFAULTS, EVENT_FLUSH_INTERVAL=3600.0), "test-worker")
    try:
        finals = [_final(new_id("s_"), new_id("run_"), 0) for _ in range(5)]
        outcomes = _burst(log, finals, patience=0.5)
        assert outcomes == {final.run_id: False for final in finals}
        assert not any(final.saved for final in finals) and log.final_commits == 0
    finally:
        log.close()


def test_a_reply_with_lone_surrogates_is_saved_repaired_not_failed(setup):
    """Provider text is repaired at the adapter; a reply assembled elsewhere may still carry a lone half."""
    store, log = setup
    (session_id, run_id), (other_session, other_run) = _running(store, 2)
    final = _final(session_id, run_id, 0)
    final.content, final.thinking = "tool said \ud800 here", "think \udfff"
    final.metadata = {"note": "meta \ud83d"}
    clean = _final(other_session, other_run, 0)  # saved in the same group: the bad one must not take it down
    assert _burst(log, [final, clean]) == {run_id: True, other_run: True}
    with store.locked.read() as db:
        content, thinking, metadata = db.execute(
            "select content, thinking, metadata from messages where run_id = ?", [run_id]
        ).fetchone()
    assert content == "tool said \ufffd here" and thinking == "think \ufffd"
    assert '"meta \\ud83d"' in metadata  # JSON keeps the escape; reading it back gives the same value
    assert store.runs.get(OWNER, run_id)["status"] == "done" and _message_count(store, other_run) == 1


# ---------------------------------------------------------------- final saves on the hub's connection (issue 40)
def test_a_final_save_on_the_hub_connection_takes_the_pending_events_in_its_transaction(setup):
    store, log = setup
    log.use_hub(store.locked)
    (session_id, run_id), (other_session, other_run) = _running(store, 2)
    _log_deltas(log, run_id, 5)
    _log_deltas(log, other_run, 3)  # another run's pending events go in the same commit, in order
    final = _final(session_id, run_id, 5)
    assert log.save_final(final, patience=5.0) is True
    assert log.hub_finals == 1 and log.final_commits == 1 and log.stats()["pending_events"] == 0
    row = store.runs.get(OWNER, run_id)
    assert row["status"] == "done" and row["message_id"] == final.message_id and _message_count(store, run_id) == 1
    with store.locked.read() as db:
        events = read_events(db, run_id, 0, 100)
        others = read_events(db, other_run, 0, 100)
    assert [seq for seq, _, _ in events] == list(range(1, 10))  # 5 deltas, then the 4-event tail
    assert [kind for _, kind, _ in events[-4:]] == [MESSAGE_SAVED, CHAT_TERMINAL, DONE, CLOSE]
    assert [seq for seq, _, _ in others] == [1, 2, 3]


def test_a_final_save_goes_to_the_writer_while_it_holds_rows_mid_commit(setup):
    store, log = setup
    log.use_hub(store.locked)
    [(session_id, run_id)] = _running(store, 1)
    _log_deltas(log, run_id, 4)
    log._taking.acquire()  # as the native thread does from taking rows to their commit
    outcome = {}
    try:
        saver = threading.Thread(target=lambda: outcome.update(saved=log.save_final(_final(session_id, run_id, 4), 5)))
        saver.start()
        wait_for(lambda: log.finals_waiting == 1, 5, what="the save under way")
        time.sleep(0.2)  # measurement: long enough for a hub save to have committed, had it gone ahead
        assert log.hub_finals == 0 and store.runs.get(OWNER, run_id)["status"] == "running"
        assert [row[1] for row in log._pending] == [1, 2, 3, 4]  # not taken: the writer takes them with the save
    finally:
        log._taking.release()
    saver.join(10)
    assert outcome == {"saved": True} and log.hub_finals == 0 and log.final_commits == 1
    with store.locked.read() as db:
        assert [seq for seq, _, _ in read_events(db, run_id, 0, 100)] == list(range(1, 9))


def test_a_failed_final_save_on_the_hub_puts_the_events_back_in_order(setup, monkeypatch):
    store, log = setup
    log.use_hub(store.locked)
    [(session_id, run_id)] = _running(store, 1)
    _log_deltas(log, run_id, 3)
    calls = []

    def refuse(conn, final):
        calls.append(final.run_id)
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(log, "_finish_row", refuse)
    assert log.save_final(_final(session_id, run_id, 3), patience=0.05) is False
    assert calls and [row[1] for row in log._pending] == [1, 2, 3]  # still queued, in order
    assert store.runs.get(OWNER, run_id)["status"] == "running"
    monkeypatch.undo()
    log.flush()
    with store.locked.read() as db:
        assert [seq for seq, _, _ in read_events(db, run_id, 0, 100)] == [1, 2, 3]


def test_a_final_save_on_the_hub_waits_for_an_outside_lock_no_longer_than_its_patience(setup, tmp_path):
    store, log = setup
    log.use_hub(store.locked)
    [(session_id, run_id)] = _running(store, 1)
    _log_deltas(log, run_id, 2)
    outside = sqlite3.connect(str(tmp_path / "odysseus.db"), isolation_level=None)
    outside.execute("BEGIN IMMEDIATE")
    try:
        t0 = time.monotonic()
        assert log.save_final(_final(session_id, run_id, 2), patience=0.3) is False
        took = time.monotonic() - t0
        assert took < 2.0, took  # not the request path's 30 s write wait
        assert [row[1] for row in log._pending] == [1, 2] and log.failures >= 1
    finally:
        outside.execute("ROLLBACK")
        outside.close()
    assert log.save_final(_final(session_id, run_id, 2), patience=5.0) is True
    with store.locked.read() as db:
        assert [seq for seq, _, _ in read_events(db, run_id, 0, 100)] == [1, 2, 3, 4, 5, 6]


def test_a_flush_that_failed_just_before_the_hub_took_the_lock_keeps_the_save_off_the_hub(setup):
    """The writer fills ``_retry`` only while it holds ``_taking``: the hub must read it after taking the
    lock, or a tail could commit ahead of its run's earlier events left waiting for a retry."""
    store, log = setup
    log.use_hub(store.locked)
    [(session_id, run_id)] = _running(store, 1)
    _log_deltas(log, run_id, 3)
    failed_rows = [log._pending.popleft() for _ in range(2)]  # seq 1-2: a native flush took them and failed

    class FailsJustBefore:
        """The lock, with the native thread's failed flush landing between the hub's check and its acquire."""

        def __init__(self, lock):
            self.lock = lock

        def acquire(self, blocking=True):
            if not blocking:
                with self.lock:
                    log._retry = failed_rows + log._retry
            return self.lock.acquire(blocking)

        def release(self):
            self.lock.release()

        __enter__ = acquire

        def __exit__(self, *exc):
            self.release()

    log._taking = FailsJustBefore(log._taking)
    assert log.save_final(_final(session_id, run_id, 3), patience=5.0) is True
    assert log.hub_finals == 0 and log.final_commits == 1  # the writer saved it, retry rows first
    with store.locked.read() as db:
        assert [seq for seq, _, _ in read_events(db, run_id, 0, 100)] == list(range(1, 8))
