"""The run engine in process with scripted turns: capacity, budget eviction, failed finalize,
lease expiry and recovery, subscribe versus evict, and the one start transaction (traced).

These run the threading path (no gevent monkey patch in pytest); test_engine_gevent.py runs
the same engine under gevent in a subprocess, where the hub must never wait on SQLite.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
import time

import pytest
from apphelpers import insert_running_run
from waiting import wait_for

from odysseus.config import DEFAULTS
from odysseus.errors import CapacityError
from odysseus.events import CHAT_TERMINAL, CLOSE, DELTA, DONE, ERROR, MESSAGE_SAVED, StoredDelta, delta
from odysseus.process_identity import worker_identity
from odysseus.runs.engine import RunEngine, StartSpec
from odysseus.runs.durable import as_entry, read_events
from odysseus.runs.follow import encode, follow_durable, follow_memory
from odysseus.runs.run_log import SealedEntries, encode_payload
from odysseus.sse import chat_frame
from odysseus.store import Store, new_id

OWNER = "local"


@pytest.fixture
def make_engine(tmp_path):
    """Engines over one SQLite file (several engines = several processes' writers); closed at teardown."""
    made = []

    def make(**over):
        config = dict(
            DEFAULTS, DATA_DIR=str(tmp_path), EVENT_FLUSH_INTERVAL=0.05, STOP_WAIT=2.0, FINAL_SAVE_PATIENCE=2.0
        )
        config.update(over)
        engine = RunEngine(Store(str(tmp_path / "odysseus.db")), config)
        made.append(engine)
        return engine

    yield make
    for engine in made:
        engine.close()


def turn_of(*texts, gate: threading.Event = None, started: threading.Event = None):
    """A scripted turn: yields ``texts`` as deltas (after ``gate`` is set, when given)."""

    def make_turn(history):
        def turn(ctx):
            if started is not None:
                started.set()
            for index, text in enumerate(texts):
                if gate is not None and index == 1:
                    while not gate.wait(0.02):
                        if ctx.cancel.cancelled:
                            return
                yield delta(text)

        return turn

    return make_turn


def spec(make_turn, session_id=None, message="hello", **over) -> StartSpec:
    return StartSpec(
        owner=OWNER,
        session_id=session_id,
        mode="chat",
        model="demo/odysseus-demo",
        make_turn=make_turn,
        message=message,
        **over,
    )


def counts(store: Store) -> dict:
    with store.locked.read() as db:
        return {t: db.execute(f"select count(*) from {t}").fetchone()[0] for t in ("sessions", "messages", "runs")}


def assistant_messages(store: Store, session_id: str) -> list:
    return [m for m in store.messages.list(OWNER, session_id) if m["role"] == "assistant"]


def types(run) -> list:
    return [event.type for event, _ in run.log.read_after(run.log.base)]


# ---------------------------------------------------------------- capacity
def test_capacity_refuses_before_anything_is_stored_and_the_slot_comes_back(make_engine):
    engine = make_engine(MAX_ACTIVE_RUNS=1)
    gate = threading.Event()
    first = engine.start(spec(turn_of("a", "b", gate=gate)))
    assert engine.active_count() == 1
    before = counts(engine.store)
    with pytest.raises(CapacityError):
        engine.start(spec(turn_of("x"), client_message_id="cm-second"))
    with pytest.raises(CapacityError):  # an existing session: still nothing stored
        engine.start(spec(turn_of("x"), session_id=new_id("s_")))
    assert counts(engine.store) == before
    assert engine.store.messages.session_of_client_id(OWNER, "cm-second") is None
    assert len(engine.runs) == 1
    gate.set()
    assert first.run.settled.wait(10)
    assert engine.active_count() == 0
    again = engine.start(spec(turn_of("x", "y"), client_message_id="cm-second"))
    assert again.run.settled.wait(10) and again.run.status == "done"
    assert assistant_messages(engine.store, again.session_id)[0]["content"] == "xy"


def test_a_refused_send_leaves_the_sessions_running_run_alone(make_engine):
    """A 503 stores nothing and stops nothing: another session's run holds the only slot."""
    engine = make_engine(MAX_ACTIVE_RUNS=2)
    gate = threading.Event()
    mine = engine.start(spec(turn_of("a", "b", gate=gate)))
    other = engine.start(spec(turn_of("c", gate=gate)))
    assert engine.active_count() == 2
    # replacing mine would free its slot: the send is allowed and replaces it
    with pytest.raises(CapacityError):
        engine.start(spec(turn_of("x"), session_id=new_id("s_")))  # a third session: no slot
    assert mine.run.status == "running" and other.run.status == "running"
    replaced = engine.start(spec(turn_of("y"), session_id=mine.session_id))
    assert mine.run.settled.wait(10) and mine.run.stop_reason == "replaced"
    assert replaced.run.settled.wait(10) and replaced.run.status == "done"
    gate.set()
    assert other.run.settled.wait(10)


def test_capacity_is_checked_before_the_running_run_is_replaced(make_engine):
    engine = make_engine(MAX_ACTIVE_RUNS=1)
    gate = threading.Event()
    first = engine.start(spec(turn_of("a", "b", gate=gate)))
    engine.budget.limit = engine.budget.used  # full, and a running run cannot be evicted
    before = counts(engine.store)
    with pytest.raises(CapacityError):
        engine.start(spec(turn_of("x"), session_id=first.session_id))
    assert first.run.status == "running" and counts(engine.store) == before
    engine.budget.limit = 1 << 30
    gate.set()
    assert first.run.settled.wait(10) and first.run.status == "done"


# ---------------------------------------------------------------- memory budget
def _finished(engine, *texts):
    started = engine.start(spec(turn_of(*texts)))
    assert started.run.settled.wait(10)
    return started.run


def test_budget_evicts_the_oldest_idle_finished_run_to_make_room(make_engine):
    engine = make_engine(EVICT_GRACE=180.0)
    old, newer = _finished(engine, "x" * 800), _finished(engine, "y" * 800)
    engine.budget.limit = engine.budget.used  # full: the next start must free something
    fresh = engine.start(spec(turn_of("z")))
    assert old.log.released and old.run_id not in engine.runs
    assert not newer.log.released and newer.run_id in engine.runs
    assert fresh.run.settled.wait(10) and fresh.run.status == "done"
    # eviction frees memory only: the evicted run stays saved
    assert engine.store.runs.get(OWNER, old.run_id)["status"] == "done"


def test_a_run_whose_run_started_does_not_fit_is_never_registered(make_engine):
    engine = make_engine()
    engine.budget.limit = engine.budget.used + 20  # below the budget, yet run_started (~150 bytes) cannot fit
    before = counts(engine.store)
    with pytest.raises(CapacityError):
        engine.start(spec(turn_of("x")))
    assert counts(engine.store) == before and engine.runs == {} and engine.active_count() == 0
    assert engine.budget.used == 0


def test_a_subscribed_reader_keeps_its_log_from_eviction(make_engine):
    engine = make_engine(EVICT_GRACE=180.0)
    run = _finished(engine, "x" * 800)
    assert engine.subscribe(run)
    engine.budget.limit = engine.budget.used
    with pytest.raises(CapacityError):  # the only finished log has a reader: nothing can be freed
        engine.start(spec(turn_of("z")))
    assert not run.log.released
    run.evict_at = time.monotonic() - 1
    engine.sweep()
    assert not run.log.released  # nor by the janitor
    engine.unsubscribe(run)
    fresh = engine.start(spec(turn_of("z")))
    assert run.log.released and fresh.run.settled.wait(10)


def test_subscribe_refuses_a_released_log_and_follow_falls_back_to_the_durable_copy(make_engine):
    engine = make_engine(EVICT_GRACE=180.0)
    run = _finished(engine, "one ", "two ", "three")
    live = "".join(follow_memory(engine, run, 0, chat_frame, 30.0, opened=True))
    engine.durable.flush()
    engine._evict(run)
    assert run.log.released and not engine.subscribe(run)
    assert run.subscribers == 0
    after = "".join(follow_memory(engine, run, 0, chat_frame, 30.0, opened=True))
    assert after == live  # same ids, same bytes, from SQLite
    tail = "".join(follow_durable(engine.store, run.run_id, 3, chat_frame, 30.0, 0.05, opened=True))
    assert live.endswith(tail) and tail.startswith("id: 4\n")


# ---------------------------------------------------------------- failed finalize
def test_a_final_save_that_raises_ends_the_run_as_error_in_memory_and_in_the_database(make_engine, monkeypatch):
    engine = make_engine()

    def broken(conn, final):
        raise ValueError("simulated bug in the final save")

    monkeypatch.setattr(engine.durable, "_finish_row", broken)
    started = engine.start(spec(turn_of("partial ", "text")))
    assert started.run.settled.wait(10)
    run = started.run
    assert run.status == "error" and engine.active_count() == 0
    assert types(run)[-3:] == [CHAT_TERMINAL, ERROR, CLOSE]
    assert run.log.closed
    row = engine.store.runs.get(OWNER, run.run_id)
    assert row["status"] == "error" and row["error"] == "could not save the reply"
    assert assistant_messages(engine.store, run.session_id) == []
    # the durable log ends the same way, so a resume after eviction or restart sees the same end
    engine.durable.flush()
    with engine.store.locked.read() as db:
        kinds = [r[1] for r in read_events(db, run.run_id, 0, 10_000)]
    assert kinds[-3:] == [CHAT_TERMINAL, ERROR, CLOSE] and kinds.count(DELTA) == 2
    # and recovery leaves it alone (it is not running)
    assert engine.recover_interrupted() == []


# ---------------------------------------------------------------- leases and recovery
def _orphan(store: Store, worker: str, lease_until: float, deltas=("left ", "behind")) -> tuple:
    """A run row left ``running`` by another process, with its durable deltas."""
    with store.locked.tx() as db:
        session_id, run_id = insert_running_run(db, OWNER, worker, lease_until, model="demo/odysseus-demo")
        rows = [(run_id, 1, "run_started", encode_payload({"run_id": run_id}))]
        rows += [(run_id, i + 2, DELTA, encode_payload({"delta": text})) for i, text in enumerate(deltas)]
        db.conn.executemany("insert into run_events (run_id, seq, type, payload) values (?, ?, ?, ?)", rows)
    return session_id, run_id


@pytest.fixture
def live_pid():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc.pid
    proc.kill()
    proc.wait(5)


def test_recovery_takes_expired_or_dead_runs_once_and_leaves_live_leases(make_engine, live_pid):
    engine = make_engine()
    boot = worker_identity().rpartition(":")[0]
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait(5)
    expired = _orphan(engine.store, "other-boot:4242", time.time() - 5)
    expired_live_pid = _orphan(engine.store, f"{boot}:{live_pid}", time.time() - 5)
    fresh_live = _orphan(engine.store, f"{boot}:{live_pid}", time.time() + 60)
    fresh_other_boot = _orphan(engine.store, "other-boot:4242", time.time() + 60)
    fresh_dead = _orphan(engine.store, f"{boot}:{dead.pid}", time.time() + 60)

    recovered = set(engine.recover_interrupted())
    assert recovered == {expired[1], expired_live_pid[1], fresh_dead[1]}
    for session_id, run_id in (expired, expired_live_pid, fresh_dead):
        row = engine.store.runs.get(OWNER, run_id)
        assert row["status"] == "interrupted" and row["lease_until"] is None
        saved = assistant_messages(engine.store, session_id)
        assert [m["content"] for m in saved] == ["left behind"] and saved[0]["metadata"]["interrupted"] is True
        assert row["message_id"] == saved[0]["id"]
    for session_id, run_id in (fresh_live, fresh_other_boot):
        assert engine.store.runs.get(OWNER, run_id)["status"] == "running"
        assert assistant_messages(engine.store, session_id) == []

    # again, from this engine and from a second writer on the same file: nothing more is saved
    assert engine.recover_interrupted() == []
    other = make_engine()
    assert other.recover_interrupted() == []
    for session_id, _ in (expired, expired_live_pid, fresh_dead):
        assert len(assistant_messages(engine.store, session_id)) == 1
    # the recovered durable log ends in the terminal record, numbered past every id the dead worker
    # could have sent (its log cap), so no id a client saw is reused for another event
    with engine.store.locked.read() as db:
        tail = [(seq, kind) for seq, kind, _ in read_events(db, expired[1], 0, 10_000)]
    assert [t for _, t in tail] == ["run_started", DELTA, DELTA, MESSAGE_SAVED, CHAT_TERMINAL, ERROR, CLOSE]
    seqs = [s for s, _ in tail]
    assert (
        seqs[:3] == [1, 2, 3] and seqs[3] > DEFAULTS["RUN_MAX_EVENTS"] and seqs[3:] == list(range(seqs[3], seqs[3] + 4))
    )
    assert engine.store.runs.get(OWNER, expired[1])["event_count"] == len(tail)


def test_two_writers_racing_for_one_run_save_one_reply(make_engine):
    """A live run whose lease another process judged expired: the later final save changes nothing."""
    engine, other = make_engine(), make_engine()
    gate = threading.Event()
    started = engine.start(spec(turn_of("first ", "second", gate=gate)))
    run = started.run
    wait_for(lambda: run.content == "first ", 10, what="first delta")
    engine.durable.flush()
    with engine.store.locked.tx() as db:  # as if this worker had stalled past its lease
        db.execute(
            "update runs set lease_until = ?, worker = 'other-boot:1' where run_id = ?", [time.time() - 1, run.run_id]
        )
    assert other.recover_interrupted() == [run.run_id]
    gate.set()
    assert run.settled.wait(10)
    saved = assistant_messages(engine.store, run.session_id)
    assert len(saved) == 1 and saved[0]["content"] == "first " and saved[0]["metadata"]["interrupted"] is True
    assert run.message_id == saved[0]["id"]  # the live run's tail names the one saved reply
    assert engine.store.runs.get(OWNER, run.run_id)["status"] == "interrupted"


# ---------------------------------------------------------------- the start transaction
def test_one_start_is_one_transaction(make_engine):
    engine = make_engine()
    engine.start_background()
    statements = []
    engine.store.locked.trace(statements.append)
    try:
        started = engine.start(spec(turn_of("hi"), client_message_id="cm-traced"))
    finally:
        engine.store.locked.trace(None)
    assert started.run.settled.wait(10)
    # "-- ..." lines are statements run by triggers and virtual tables (the messages FTS index), and
    # SQLite reports a statement again while its triggers run: keep each top-level statement once
    norm = []
    for statement in statements:
        text = " ".join(statement.split()).lower()
        if not text.startswith("--") and (not norm or norm[-1] != text):
            norm.append(text)
    begin = norm.index("begin immediate")
    commit = next(i for i in range(begin, len(norm)) if norm[i] == "commit")
    inside = norm[begin + 1 : commit]
    kinds = [s.split(" (")[0] for s in inside if s.startswith("insert")]
    assert kinds == ["insert into sessions", "insert into messages", "insert into runs"], inside
    assert not [s for s in inside if s in ("commit", "rollback") or s.startswith(("begin", "release", "savepoint"))]
    # nothing else wrote on the request-path connection during the start
    writes = [s for s in norm if s.startswith(("insert", "update", "delete"))]
    assert len(writes) == len([s for s in inside if s.startswith(("insert", "update", "delete"))])
    assert norm.count("begin immediate") == 1 and norm.count("commit") == 1


def test_a_start_failing_inside_the_transaction_leaves_nothing_and_the_approval_unused(make_engine):
    engine = make_engine()
    store = engine.store
    session_id = new_id("s_")
    now = time.time()
    with store.locked.tx() as db:
        db.execute(
            "insert into sessions (id, owner, title, created_at, updated_at) values (?, ?, 't', ?, ?)",
            [session_id, OWNER, now, now],
        )
    store.approvals.create(
        approval_id="apr_t",
        owner=OWNER,
        session_id=session_id,
        run_id="run_x",
        call={"name": "shell"},
        call_hash="h",
        state={},
        ttl=600,
    )

    def consume_then_fail(db):
        assert store.approvals.consume_with(db, "apr_t", OWNER, "approve", time.time())
        raise sqlite3.IntegrityError("simulated failure after consuming the approval")

    for creating in (True, False):
        before = counts(store)
        with pytest.raises(sqlite3.IntegrityError):
            engine.start(
                spec(
                    turn_of("x"),
                    session_id=None if creating else session_id,
                    client_message_id="cm-fail",
                    in_transaction=[consume_then_fail],
                )
            )
        assert counts(store) == before
        assert store.approvals.get("apr_t")["used_at"] is None
        assert engine.active_count() == 0 and engine.runs == {} and engine.budget.used == 0
    # the same answer then starts normally and consumes the approval exactly once
    ok = engine.start(
        spec(
            turn_of("x"),
            session_id=session_id,
            client_message_id="cm-fail",
            in_transaction=[lambda db: store.approvals.consume_with(db, "apr_t", OWNER, "approve", time.time())],
        )
    )
    assert ok.run.settled.wait(10) and ok.run.status == "done"
    assert store.approvals.get("apr_t")["used_at"] is not None
    assert types(ok.run)[-2:] == [DONE, CLOSE]


def test_a_start_whose_turn_builder_raises_leaves_nothing_stored_in_memory(make_engine):
    engine = make_engine()

    def bad_builder(history):
        raise RuntimeError("the mode could not build its turn")

    with pytest.raises(RuntimeError):
        engine.start(spec(bad_builder))
    # the start transaction had committed; the run row must not stay 'running' with no worker
    with engine.store.locked.read() as db:
        running = db.execute("select count(*) from runs where status = 'running'").fetchone()[0]
    assert running == 0 and engine.active_count() == 0 and engine.runs == {}


def test_encode_matches_memory_log_payloads(make_engine):
    """The durable rows carry the memory log's payload text exactly (byte-identical replays)."""
    engine = make_engine()
    run = _finished(engine, "caf\u00e9 ", "\u2603 ", '"quoted"\n')
    engine.durable.flush()
    with engine.store.locked.read() as db:
        rows = read_events(db, run.run_id, 0, 10_000)
    memory = [(e.seq, e.type, p) for e, p in run.log.read_after(run.log.base)]
    assert rows == memory
    assert encode([as_entry(*row[0:3]) for row in rows], chat_frame) == encode(run.log.read_after(0), chat_frame)


def test_a_finished_run_keeps_its_reply_as_one_string_and_its_log_sealed(make_engine):
    engine = make_engine(EVICT_GRACE=180.0)
    run = _finished(engine, "caf\u00e9 ", "\u2603 ", '"quoted"\n')
    wait_for(lambda: len(run.content_parts) == 1 and type(run.log._entries) is SealedEntries, timeout=10, interval=0.01)
    engine.durable.flush()
    with engine.store.locked.read() as db:  # the sealed memory log replays exactly what SQLite holds
        assert read_events(db, run.run_id, 0, 10_000) == [(e.seq, e.type, p) for e, p in run.log.read_after(0)]
    assert run.content == 'caf\u00e9 \u2603 "quoted"\n'
    deltas = [e for e, _ in run.log.read_after(run.log.base) if e.type == DELTA]
    assert [type(e) for e in deltas] == [StoredDelta] * 3
    assert [e.data["delta"] for e in deltas] == ["caf\u00e9 ", "\u2603 ", '"quoted"\n']
