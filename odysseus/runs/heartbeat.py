"""The one silence/heartbeat loop every follower runs, and the cheap park an idle follower sleeps in.

A follower (memory log, durable log, Redis Stream) is reduced to a ``wait(timeout)``
function: it waits at most ``timeout`` seconds for what comes after its cursor and returns
the SSE text to send (possibly nothing), or ``END`` when the stream is over.
``with_heartbeats`` drives it and owns the clock:

- ``timeout`` is what is left of ``interval`` since the connection last sent something, so
  an idle follower wakes once per heartbeat and at no other time (no polling of its own);
- every piece of text sent resets the clock (after the server wrote it: a generator resumes
  only then); a wake that sends nothing (the cursor is ahead of the log, a projection that
  sends no frame for those events) neither resets it nor sends a heartbeat early;
- after ``interval`` seconds of silence the comment ``heartbeat N`` goes out (N counts from
  1 per connection); heartbeats never enter a log.

``park`` is how a follower of a memory log sleeps under gevent: a greenlet parked in the
log's ``threading.Condition`` waiter list with one loop timer, no lock taken. ``Condition.wait``
costs a new lock, a ``gevent.Timeout`` and a thrown exception per wait (about 46 µs a wake
with 5,000 of them in a micro-benchmark, against about 9 µs here), and an idle follower
waits once per heartbeat.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Deque, Iterable, Iterator, Optional

from ..sse import comment

#: what ``wait`` returns when the stream has ended (nothing more to send, no more heartbeats)
END = None

Wait = Callable[[float], Optional[Iterable[str]]]


class Silence:
    """A connection's heartbeat clock: how long it has been quiet, and the next heartbeat's number."""

    __slots__ = ("interval", "beats", "since")

    def __init__(self, interval: float):
        self.interval = interval
        self.beats = 0
        self.since = time.monotonic()

    def remaining(self) -> float:
        """Seconds until a heartbeat is due (0 when it is)."""
        return max(0.0, self.interval - (time.monotonic() - self.since))

    def heard(self) -> None:
        """Something was sent: the silence starts again."""
        self.since = time.monotonic()

    def beat(self) -> Optional[str]:
        """The next heartbeat comment when ``interval`` has passed in silence (and restart the clock), else None."""
        if time.monotonic() - self.since < self.interval:
            return None
        self.beats += 1
        self.since = time.monotonic()
        return comment(f"heartbeat {self.beats}")


def with_heartbeats(wait: Wait, interval: float, head: str = "") -> Iterator[str]:
    """Yield what ``wait`` returns, with a heartbeat after each ``interval`` of silence, until it returns ``END``.

    ``head`` (the ``connected`` comment) goes out first, in one piece with what ``wait`` has at once
    (``wait(0)``): the response head, the comment and the first frames then reach the client in one
    write (and wake it once) instead of two. When nothing is ready it goes alone, without waiting.
    """
    clock = Silence(interval)
    if head:
        texts = wait(0)
        pieces = iter(() if texts is END else texts)
        yield head + next(pieces, "")
        clock.heard()
        if texts is END:
            return
        for text in pieces:
            yield text
            clock.heard()
    while True:
        texts = wait(clock.remaining())
        if texts is END:
            return
        sent = False
        for text in texts:
            yield text
            clock.heard()
            sent = True
        if not sent:
            beat = clock.beat()
            if beat is not None:
                yield beat


class _Parked:
    """One parked greenlet in a Condition's waiter list; ``Condition.notify`` calls ``release``."""

    __slots__ = ("_loop", "_waiter", "_callback")

    def __init__(self, loop: Any, waiter: Any) -> None:  # gevent's loop and Waiter (gevent ships no types)
        self._loop = loop
        self._waiter = waiter
        self._callback: Any = None

    def release(self) -> None:
        # called by the notifying greenlet (never the hub): the wake goes through the loop
        if self._callback is None:
            self._callback = self._loop.run_callback(self._waiter.switch, True)


def park(waiters: Deque[Any], timeout: Optional[float]) -> bool:
    """Sleep in a ``threading.Condition``'s waiter list until ``notify`` or ``timeout``; True when notified.

    ``waiters`` is the Condition's ``_waiters`` (the list ``notify`` walks, calling ``release``).
    Only under gevent, where the greenlets that touch the Condition share one thread and nothing
    switches between the caller's check and this call (``run_log.greenlets_only``): the lock is
    not needed to park, and the notifier holds it as ``Condition.notify`` requires.
    """
    from gevent.hub import Waiter, get_hub

    hub = get_hub()
    waiter = Waiter(hub)
    parked = _Parked(hub.loop, waiter)
    waiters.append(parked)
    timer = hub.loop.timer(timeout) if timeout is not None else None
    try:
        if timer is not None:
            timer.start(waiter.switch, False)
        return bool(waiter.get())
    finally:
        if timer is not None:
            timer.close()
        if parked._callback is not None:
            parked._callback.stop()  # notified (``notify`` took it off the list); a timer that also fired is moot
        else:
            try:
                waiters.remove(parked)
            except ValueError:
                pass


def wake_parked(waiters: Deque[Any]) -> None:
    """Wake every greenlet parked in ``waiters`` (a Condition's ``_waiters``), as ``notify_all`` would.

    Under gevent only (see ``park``): the greenlets that park and wake share one thread and a wake
    never switches (``_Parked.release`` schedules the switch), so the Condition's lock, and
    ``notify_all``'s ownership check, are not needed. That check is a non-blocking acquire that
    fails, and gevent yields to every ready greenlet inside it: a hub round trip per logged token,
    about half of a paced reply's worker CPU (issue 22).
    """
    while waiters:
        waiter = waiters.popleft()
        try:
            waiter.release()
        except RuntimeError:  # a Condition.wait waiter's lock already released (a timeout)
            pass
