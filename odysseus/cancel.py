"""Cooperative cancellation shared by the run engine and provider adapters.

The run engine owns a ``CancelToken`` per run. Code that blocks (a provider's HTTP
read, a tool subprocess, a paced demo stream) registers a callback with
``on_cancel`` that unblocks it, e.g. by shutting down the socket. ``cancel`` runs
each callback exactly once, from the cancelling greenlet or thread.
"""

from __future__ import annotations

import threading
from typing import Callable, List, Optional


class Cancelled(Exception):
    """Raised inside a run when its token has been cancelled."""

    def __init__(self, reason: str = "stopped"):
        super().__init__(reason)
        self.reason = reason


class CancelToken:
    """A one-way flag with callbacks; thread- and greenlet-safe."""

    __slots__ = ("_event", "_lock", "_callbacks", "reason")

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: List[Callable[[], object]] = []  # return values are ignored
        self.reason: Optional[str] = None

    @property
    def cancelled(self) -> bool:
        """True once ``cancel`` has been called."""
        return self._event.is_set()

    def cancel(self, reason: str = "stopped") -> bool:
        """Cancel; return False when it was already cancelled."""
        with self._lock:
            if self._event.is_set():
                return False
            self.reason = reason
            self._event.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            try:
                callback()
            except Exception:  # a closer failing must not stop the others
                pass
        return True

    def on_cancel(self, callback: Callable[[], object]) -> Callable[[], None]:
        """Register ``callback``; run it now if already cancelled. Returns an unregister function."""
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(callback)
                return lambda: self._discard(callback)
        callback()
        return lambda: None

    def _discard(self, callback: Callable[[], object]) -> None:
        with self._lock:
            if callback in self._callbacks:
                self._callbacks.remove(callback)

    def wait(self, timeout: Optional[float]) -> bool:
        """Sleep up to ``timeout`` seconds, waking early on cancel. True when cancelled."""
        return self._event.wait(timeout)

    def raise_if_cancelled(self) -> None:
        """Raise ``Cancelled`` when the token is cancelled."""
        if self._event.is_set():
            raise Cancelled(self.reason or "stopped")


class SettledToken(CancelToken):
    """The token of a run that has settled: whether it was cancelled, and why, decided for good.

    A settled run waits in the replay window with nothing left to unblock, so it swaps its live
    token (an event, a lock and a callback list: about 600 bytes of small objects) for this one
    (``Run.settle``). Cancelling it again changes nothing and answers False, as a second
    ``cancel`` of the live token would; a callback registered now runs at once only when the run
    was cancelled (there is nothing left that would ever cancel it otherwise).
    """

    __slots__ = ("_cancelled",)

    def __init__(self, cancelled: bool, reason: Optional[str]) -> None:
        # no event, lock or callback list (the live token's): nothing will wait on it or cancel it
        self._cancelled = cancelled
        self.reason = reason

    @classmethod
    def of(cls, token: CancelToken) -> "SettledToken":
        """The settled form of ``token`` (its state now; a live token keeps working for whoever holds it)."""
        return cls(token.cancelled, token.reason)

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def cancel(self, reason: str = "stopped") -> bool:
        return False

    def on_cancel(self, callback: Callable[[], object]) -> Callable[[], None]:
        if self._cancelled:
            callback()
        return lambda: None

    def wait(self, timeout: Optional[float]) -> bool:
        """True at once when cancelled; otherwise nothing can cancel it any more: False at once."""
        return self._cancelled

    def raise_if_cancelled(self) -> None:
        if self._cancelled:
            raise Cancelled(self.reason or "stopped")
