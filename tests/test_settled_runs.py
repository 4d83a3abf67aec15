"""A run that has settled keeps only what its readers use while it waits in the replay window.

``Run.settle`` (called by the engine once the run's own worker finalized it and announced its end)
swaps the live cancel token for a ``SettledToken``, drops the turn's context and the usage,
metrics, route and fallback the saved message already carries, and shares one set event and one
lock among all settled runs. What a reader of a finished run sees (status, content, log, stop,
poll) must not change; the memory a held run takes must fall.
"""

from __future__ import annotations

import threading

import pytest
from heldbytes import held_bytes_each
import test_engine_unit
from test_engine_unit import OWNER, spec, turn_of
from waiting import wait_for

from odysseus.cancel import Cancelled, SettledToken
from odysseus.events import CHAT_TERMINAL, CLOSE, METRICS, MODEL_INFO, Event, delta, usage
from odysseus.runs import run_log
from odysseus.runs.engine import RunEngine
from odysseus.runs.run import Run
from odysseus.runs.run_log import RunLog

#: the engine tests' fixture: engines over one SQLite file, closed at teardown
make_engine = test_engine_unit.make_engine


def _types(run: Run) -> list:
    return [event.type for event, _ in run.log.read_after(run.log.base)]


def test_a_finished_run_keeps_what_its_readers_use_and_drops_the_rest(make_engine):
    engine = make_engine()
    started = engine.start(spec(turn_of("a", "b", "c")))
    run = started.run
    assert run.settled.wait(10)
    wait_for(lambda: run.context is None, timeout=10)
    assert run.status == "done" and run.content == "abc" and run.message_id
    assert isinstance(run.cancel, SettledToken) and not run.cancel.cancelled and run.cancel.reason is None
    assert run.model_info is None and run.usage is None and run.metrics is None and run.fallback is None
    assert _types(run)[-1] == CLOSE and run.summary()["status"] == "done"
    assert run.settled.wait(0)  # the shared event is set: a late waiter returns at once
    # stopping a finished run changes nothing, as before
    assert engine.stop_run(OWNER, run.run_id) is run and run.status == "done"
    assert run.cancel.cancel("stopped") is False and not run.cancel.cancelled
    ran = []
    run.cancel.on_cancel(lambda: ran.append(1))
    assert ran == [] and run.cancel.wait(5) is False  # nothing can cancel it now: no wait either
    run.cancel.raise_if_cancelled()


def test_a_stopped_run_settles_with_its_reason(make_engine):
    engine = make_engine()
    gate = threading.Event()
    started = engine.start(spec(turn_of("a", "b", gate=gate)))
    run = started.run
    wait_for(lambda: run.content == "a", timeout=10)
    engine.stop_run(OWNER, run.run_id, "cancelled")
    wait_for(lambda: run.context is None, timeout=10)
    assert run.status == "stopped" and run.stop_reason
    assert run.cancel.cancelled and run.cancel.reason == "cancelled"
    ran = []
    run.cancel.on_cancel(lambda: ran.append(1))
    assert ran == [1] and run.cancel.wait(None) is True
    with pytest.raises(Cancelled):
        run.cancel.raise_if_cancelled()
    saved = [m for m in engine.store.messages.list(OWNER, started.session_id) if m["role"] == "assistant"]
    assert saved[0]["content"] == "a" and saved[0]["metadata"]["stopped"] is True


def _run(log: RunLog) -> Run:
    return Run(
        run_id="run_x",
        session_id="s_x",
        owner=OWNER,
        mode="chat",
        model="demo/odysseus-demo",
        client_message_id=None,
        user_message_id=1,
        log=log,
        terminal_type=CHAT_TERMINAL,
    )


def test_a_run_finalized_from_outside_is_sealed_but_keeps_its_context():
    """Its finalizer (a stop whose worker did not settle in time) may still be announcing its end:
    the receivers of ``run_finished`` read the context, so only the run's own worker settles it."""
    log = RunLog(max_events=100, max_bytes=1 << 20)
    log.append(delta("x"))
    log.append(Event(CLOSE, {}))
    run = _run(log)
    run.finalized = True
    run.settled.set()
    RunEngine._settle(run, finalized_here=False)
    assert run.context is not None and not isinstance(run.cancel, SettledToken)
    RunEngine._settle(run, finalized_here=True)
    assert run.context is None and isinstance(run.cancel, SettledToken)


def test_a_settled_run_holds_a_fraction_of_what_a_finished_one_held():
    def held(settle: bool) -> float:
        def build() -> Run:
            log = RunLog(max_events=1000, max_bytes=1 << 20)
            run = _run(log)
            produced = [Event(MODEL_INFO, {"route": "demo/odysseus-demo", "model": "odysseus-demo"})]
            produced += [delta(f" tok{i}") for i in range(20)]
            produced += [usage(12, 20), Event(METRICS, {"data": {"tokens_per_second": 99.5, "ttft_ms": 3.0}})]
            for event in produced:
                log.append(event)
                run.observe(event)
            log.append(Event(CHAT_TERMINAL, {"status": "done"}))
            log.append(Event(CLOSE, {}))
            run.finalized = True
            run.settled.set()
            RunEngine._settle(run, finalized_here=settle)  # both seal the log
            return run

        return held_bytes_each(build, 200)

    held(True)  # first use: the shared event and lock, the type codes, lazy imports
    settled, finished = held(True), held(False)
    assert settled < finished * 0.4, (settled, finished)  # measured: about 1.8 KB against 6.3 KB


def test_a_log_holding_a_type_past_the_codes_stays_a_list(monkeypatch):
    log = RunLog(max_events=100, max_bytes=1 << 20)
    log.append(delta("x"))
    log.append(Event("a_type_no_log_has_held_before", {"n": 1}))
    log.append(Event(CLOSE, {}))
    monkeypatch.setattr(run_log, "MAX_TYPE_CODES", len(run_log._TYPE_NAMES))
    assert not log.seal() and type(log._entries) is list
    assert [e.type for e, _ in log.read_after(0)][-2:] == ["a_type_no_log_has_held_before", CLOSE]
    monkeypatch.undo()
    assert log.seal() and log.last_type == CLOSE
    assert [e.type for e, _ in log.read_after(0)] == ["delta", "a_type_no_log_has_held_before", CLOSE]
