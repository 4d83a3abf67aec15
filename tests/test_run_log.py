"""The run log's numbering, caps and blocking reads."""

from __future__ import annotations

import threading

import pytest

from odysseus.events import CLOSE, Event, delta
from odysseus.runs.run_log import ByteBudget, LogFull, RunLog


def test_numbers_are_consecutive_and_reads_are_exact():
    log = RunLog(100, 10_000)
    for i in range(5):
        log.append(delta(str(i)))
    assert [e.seq for e, _ in log.read_after(0)] == [1, 2, 3, 4, 5]
    assert [e.seq for e, _ in log.read_after(3)] == [4, 5]
    assert log.read_after(5) == []
    assert log.read_after(0)[0][1] == '{"delta":"0"}'


def test_caps_refuse_content_but_admit_lifecycle_events():
    log = RunLog(2, 10_000)
    log.append(delta("a"))
    log.append(delta("b"))
    with pytest.raises(LogFull):
        log.append(delta("c"))
    log.append(Event("error", {"error": "full", "status": 507}))
    log.append(Event(CLOSE, {}))
    assert log.closed and len(log) == 4
    with pytest.raises(LogFull):
        log.append(Event("error", {}))


def test_byte_cap_and_process_budget():
    budget = ByteBudget(100)
    log = RunLog(1000, 10_000, budget)
    log.append(delta("x" * 40))
    with pytest.raises(LogFull):
        log.append(delta("y" * 60))
    assert budget.used == log.bytes
    log.release()
    assert budget.used == 0 and log.released


def test_wait_after_wakes_on_append_and_on_close():
    log = RunLog(100, 10_000)
    got = []

    def reader():
        got.append(log.wait_after(0, 5))

    thread = threading.Thread(target=reader)
    thread.start()
    log.append(delta("hi"))
    thread.join(5)
    assert [e.seq for e, _ in got[0]] == [1]
    log.append(Event(CLOSE, {}))
    assert log.wait_after(2, 5) == []  # closed: returns at once
