"""The one heartbeat loop (runs/heartbeat.py): silence -> heartbeat, data resets the clock, END ends it; the park."""

from __future__ import annotations

import threading
import time

import gevent
import pytest
from gevent.thread import allocate_lock

from odysseus.runs.heartbeat import END, Silence, park, wake_parked, with_heartbeats

INTERVAL = 0.2


class Script:
    """A ``wait`` that returns scripted results; records the timeouts it was given and when."""

    def __init__(self, steps):
        self.steps = list(steps)
        self.timeouts = []

    def __call__(self, timeout):
        self.timeouts.append(timeout)
        step = self.steps.pop(0) if self.steps else END
        if callable(step):
            return step(timeout)
        return step


def sleeping(result):
    """A step that sleeps its whole timeout (silence), then returns ``result``."""

    def step(timeout):
        time.sleep(timeout)
        return result

    return step


def timed(gen):
    """Each yielded text with the seconds since the loop started."""
    t0 = time.monotonic()
    return [(text, time.monotonic() - t0) for text in gen]


def test_silence_brings_numbered_heartbeats_each_interval():
    wait = Script([sleeping(()), sleeping(()), sleeping(())])
    out = timed(with_heartbeats(wait, INTERVAL))
    assert [t for t, _ in out] == [": heartbeat 1\n\n", ": heartbeat 2\n\n", ": heartbeat 3\n\n"]
    # never early, and not late by more than a loaded machine's jitter
    for n, (_, at) in enumerate(out, 1):
        assert n * INTERVAL - 0.01 <= at < n * INTERVAL + 1.0
    # the loop asks for exactly what is left of the interval, and ends at END
    assert all(0 < t <= INTERVAL for t in wait.timeouts[:3]) and len(wait.timeouts) == 4


def test_data_resets_the_clock_and_is_sent_whole():
    # data after half an interval: the next heartbeat is one full interval after the data
    wait = Script([lambda t: (time.sleep(t / 2), ["a", "b"])[1], sleeping(()), sleeping(())])
    out = timed(with_heartbeats(wait, INTERVAL))
    assert [t for t, _ in out] == ["a", "b", ": heartbeat 1\n\n", ": heartbeat 2\n\n"]
    sent_at = out[1][1]
    assert out[2][1] - sent_at >= INTERVAL - 0.01
    assert wait.timeouts[1] > INTERVAL * 0.9  # after the data the wait gets (almost) a full interval


def test_a_wake_with_nothing_to_send_neither_beats_early_nor_resets():
    # woken after 40% of the interval with nothing (the cursor is ahead of the log): no heartbeat yet,
    # and the next wait gets only the rest of the interval, so the heartbeat stays on time
    wait = Script([lambda t: (time.sleep(t * 0.4), ())[1], sleeping(())])
    out = timed(with_heartbeats(wait, INTERVAL))
    assert [t for t, _ in out] == [": heartbeat 1\n\n"]
    assert INTERVAL - 0.01 <= out[0][1] < INTERVAL + 1.0
    assert wait.timeouts[1] < INTERVAL * 0.7


def test_end_ends_the_stream_at_once_even_mid_silence():
    wait = Script([["x"], END, ["never"]])
    assert list(with_heartbeats(wait, 30.0)) == ["x"]
    assert len(wait.timeouts) == 2


def test_lazy_pieces_reset_the_clock_per_piece():
    # a reader returns a generator (a replay in pieces): each piece goes out as it is made
    made = []

    def pieces():
        for p in ("p1", "p2", "p3"):
            made.append(p)
            yield p

    gen = with_heartbeats(Script([pieces()]), INTERVAL)
    assert next(gen) == "p1" and made == ["p1"]
    assert list(gen) == ["p2", "p3"]


def test_the_head_goes_out_with_what_is_ready_at_once():
    # [issue 22] the connected comment and the first frames in one write (one wake-up of the client)
    wait = Script([["f1", "f2"], END])
    assert list(with_heartbeats(wait, 30.0, head=": connected\n\n")) == [": connected\n\nf1", "f2"]
    assert wait.timeouts[0] == 0  # asked without waiting


def test_the_head_goes_alone_when_nothing_is_ready_and_the_wait_goes_on():
    wait = Script([(), sleeping(()), END])
    out = timed(with_heartbeats(wait, INTERVAL, head=": connected\n\n"))
    assert [t for t, _ in out] == [": connected\n\n", ": heartbeat 1\n\n"]
    assert out[0][1] < INTERVAL / 2  # the head did not wait for data
    assert wait.timeouts[0] == 0 and wait.timeouts[1] > INTERVAL * 0.9  # the head reset the clock
    # a stream that is over at once still opens with its head
    assert list(with_heartbeats(Script([END]), 30.0, head="h")) == ["h"]


def test_silence_clock():
    clock = Silence(10.0)
    assert clock.beat() is None and 9.0 < clock.remaining() <= 10.0
    clock.since -= 10.0
    assert clock.remaining() == 0.0
    assert clock.beat() == ": heartbeat 1\n\n" and clock.beats == 1 and clock.remaining() > 9.0


# ---------------------------------------------------------------- park (greenlets, as in the server)
def _cond():
    return threading.Condition(allocate_lock())  # a gevent lock: what the monkey-patched server has


def test_park_times_out_and_leaves_no_waiter():
    cond = _cond()
    t0 = time.monotonic()
    woken = park(cond._waiters, 0.1)
    assert woken is False and 0.09 <= time.monotonic() - t0 < 2.0
    assert not cond._waiters


def test_park_is_woken_by_notify_all_and_only_once():
    cond = _cond()
    woke = []

    def reader(i):
        woke.append((i, park(cond._waiters, 5.0)))

    readers = [gevent.spawn(reader, i) for i in range(50)]
    gevent.sleep(0.05)
    assert len(cond._waiters) == 50
    t0 = time.monotonic()
    with cond:
        cond.notify_all()
        cond.notify_all()  # a second notify in the same burst finds nobody (no double wake)
    gevent.joinall(readers, timeout=5)
    assert time.monotonic() - t0 < 2.0
    assert sorted(woke) == [(i, True) for i in range(50)]
    assert not cond._waiters


def test_wake_parked_wakes_each_parked_greenlet_once_without_switching():
    cond = _cond()
    woke = []
    readers = [gevent.spawn(lambda i=i: woke.append((i, park(cond._waiters, 5.0)))) for i in range(50)]
    gevent.sleep(0.05)
    assert len(cond._waiters) == 50
    ran = []
    gevent.spawn(ran.append, 1)  # ready: it would run at any switch inside the wake
    wake_parked(cond._waiters)
    wake_parked(cond._waiters)  # nobody left: no double wake
    assert not ran and not woke and not cond._waiters
    gevent.joinall(readers, timeout=5)
    assert sorted(woke) == [(i, True) for i in range(50)] and ran == [1]


def test_a_killed_parked_greenlet_leaves_no_waiter_and_a_later_notify_is_harmless():
    cond = _cond()
    g = gevent.spawn(park, cond._waiters, 30.0)
    gevent.sleep(0.02)
    assert len(cond._waiters) == 1
    g.kill(block=True, timeout=5)
    assert g.dead and not cond._waiters
    with cond:
        cond.notify_all()
    gevent.sleep(0.02)


def test_notified_and_timed_out_in_the_same_loop_turn_wakes_once():
    cond = _cond()
    results = []
    g = gevent.spawn(lambda: results.append(park(cond._waiters, 0.05)))
    gevent.sleep(0)  # parked
    time.sleep(0.1)  # the timer is due; the notify's wake is queued in the same turn
    with cond:
        cond.notify_all()
    g.join(timeout=5)
    gevent.sleep(0.05)  # a stale wake, if any, would land now
    assert len(results) == 1 and not cond._waiters


@pytest.mark.parametrize("n", [2000])
def test_many_parked_greenlets_each_wake_once_per_timeout(n):
    # thousands of idle followers: each wakes on its own timer, about when it should
    cond = _cond()
    wakes = [0] * n

    def follower(i):
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            park(cond._waiters, 0.25)
            wakes[i] += 1

    gevent.joinall([gevent.spawn(follower, i) for i in range(n)], timeout=30)
    assert min(wakes) >= 2 and max(wakes) <= 5
    assert not cond._waiters
