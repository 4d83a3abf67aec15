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


GREENLET_CHECK = r"""
from gevent import monkey
monkey.patch_all()
import time
import gevent
from odysseus.events import CLOSE, Event, delta
from odysseus.runs.run_log import ByteBudget, RunLog

budget = ByteBudget(10 ** 9)
log = RunLog(100_000, 10 ** 9, budget)
assert log._greenlets and budget._lock is None  # the lock-free path is the one measured here
seen, wakes = [], [0]

def reader():
    cursor = 0
    while True:
        entries = log.wait_after(cursor, 5)
        wakes[0] += 1
        seen.extend(e for e, _ in entries)
        cursor = entries[-1][0].seq
        if entries[-1][0].type == CLOSE:
            return

def writer():
    for burst in range(50):
        for i in range(200):  # a burst: no switch inside it
            log.append(delta(f"{burst}-{i}"))
        gevent.sleep(0.001)
    log.append(Event(CLOSE, {}))

started = time.monotonic()
gevent.joinall([gevent.spawn(reader), gevent.spawn(writer)], timeout=30)
assert [e.seq for e in seen] == list(range(1, 10_002)), len(seen)
assert [e.data["delta"] for e in seen[:2]] == ["0-0", "0-1"]
assert wakes[0] <= 60, wakes  # woken about once per burst, not once per event
assert time.monotonic() - started < 20
assert budget.used == log.bytes
log.release()
assert budget.used == 0
print("ok")
"""


NO_SWITCH_CHECK = r"""
from gevent import monkey
monkey.patch_all()
import gevent
from odysseus.events import delta
from odysseus.runs.run_log import RunLog

log = RunLog(1000, 10 ** 6)
got = []
reader = gevent.spawn(lambda: got.append(log.wait_after(0, 5)))
gevent.sleep(0.01)
assert len(log._waiters) == 1  # parked
ran = []
gevent.spawn(ran.append, 1)  # ready: it runs at the appending greenlet's next switch
log.append(delta("hi"))
assert not ran and not got, "waking a parked reader switched greenlets"
assert not log._waiters
reader.join(5)
assert [e.seq for e, _ in got[0]] == [1] and ran == [1]

reader = gevent.spawn(lambda: got.append(log.wait_after(1, 5)))  # an eviction wakes it the same way
gevent.sleep(0.01)
assert len(log._waiters) == 1
gevent.spawn(ran.append, 2)
log.release()
assert ran == [1] and len(got) == 1, "waking a parked reader on release switched greenlets"
reader.join(5)
assert got[1] == [] and ran == [1, 2] and not log._waiters

# a timeout of 0 (the head's look at what is ready) neither parks nor yields to another greenlet
log = RunLog(1000, 10 ** 6)
gevent.spawn(ran.append, 3)
assert log.wait_after(0, 0) == [] and ran == [1, 2] and not log._waiters
log.append(delta("x"))
assert [e.seq for e, _ in log.wait_after(0, 0)] == [1] and ran == [1, 2]
gevent.sleep(0)
assert ran == [1, 2, 3]
print("ok")
"""


def test_under_gevent_waking_a_parked_reader_does_not_switch_greenlets():  # on append and on release
    """A notify under the Condition's gevent lock switched (its ownership check is a failing non-blocking
    acquire, and gevent yields there): one hub round trip per paced token, half a paced reply's worker CPU."""
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-c", NO_SWITCH_CHECK], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-2000:]


def test_under_gevent_appends_take_no_lock_and_readers_wake_once_per_burst():
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-c", GREENLET_CHECK], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-3000:]
