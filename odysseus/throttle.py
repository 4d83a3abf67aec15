"""Slowing down password guessing: per-key failure counts with exponential lock-outs.

Keys are ``("user", username)`` and ``("address", ip)``. A key gets ``free - 1`` failures
for nothing; the ``free``-th and every later failure locks it for ``base * 2**(failures - free)``
seconds (capped at ``max_delay``). While a key is locked, attempts are refused without
checking the password, so a locked account cannot be probed at all. A key's count is
forgotten ``forget_after`` seconds after its last failure; a successful sign-in forgets
the account key (not the address key: signing in to your own account must not reset
an address that is guessing other people's passwords).

State lives in this process's memory: it resets on restart and, with several gunicorn
workers, each worker counts on its own (the default is one worker).
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Dict, Iterable, List, Tuple

Key = Tuple[str, str]


class LoginThrottle:
    """Failure counts and lock-outs keyed by account and by client address."""

    def __init__(
        self,
        free: Dict[str, int],
        base_delay: float = 1.0,
        max_delay: float = 900.0,
        forget_after: float = 3600.0,
        max_keys: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.free = dict(free)
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.forget_after = forget_after
        self.max_keys = max_keys
        self.clock = clock
        self._entries: Dict[Key, List[float]] = {}  # key -> [failures, last_failure, locked_until]
        self._lock = threading.Lock()

    @classmethod
    def from_config(cls, config: dict) -> "LoginThrottle":
        """A throttle with the ``LOGIN_*`` settings."""
        return cls(
            {"user": int(config["LOGIN_FREE_FAILURES"]), "address": int(config["LOGIN_FREE_FAILURES_ADDRESS"])},
            float(config["LOGIN_BASE_DELAY"]),
            float(config["LOGIN_MAX_DELAY"]),
            float(config["LOGIN_FORGET_AFTER"]),
        )

    def retry_after(self, keys: Iterable[Key]) -> float:
        """Seconds until every one of ``keys`` may try again (0 when none is locked)."""
        now = self.clock()
        with self._lock:
            waits = [entry[2] - now for entry in (self._entries.get(k) for k in keys) if entry]
        return max([0.0] + waits)

    def failure(self, keys: Iterable[Key]) -> float:
        """Count a failed attempt against each key; returns the longest lock-out it caused."""
        now = self.clock()
        longest = 0.0
        with self._lock:
            for key in keys:
                entry = self._entries.get(key)
                if entry is None or now - entry[1] > self.forget_after:
                    entry = self._entries[key] = [0, now, 0.0]
                entry[0] += 1
                entry[1] = now
                over = int(entry[0]) - self.free.get(key[0], 5)
                if over >= 0:
                    delay = min(self.base_delay * (2 ** min(over, 40)), self.max_delay)
                    entry[2] = now + delay
                    longest = max(longest, delay)
            if len(self._entries) > self.max_keys:
                self._prune(now)
        return longest

    def success(self, key: Key) -> None:
        """Forget ``key``'s failures (called with the account key after a good password)."""
        with self._lock:
            self._entries.pop(key, None)

    def failures(self, key: Key) -> int:
        """How many failures ``key`` has on record (for diagnostics and tests)."""
        with self._lock:
            entry = self._entries.get(key)
            return int(entry[0]) if entry else 0

    def _prune(self, now: float) -> None:
        """Drop forgotten keys, then the least recently failed, to stay under ``max_keys``."""
        for key in [k for k, e in self._entries.items() if now - e[1] > self.forget_after and e[2] <= now]:
            del self._entries[key]
        if len(self._entries) > self.max_keys:
            # unlocked keys go first, so a flood of junk names cannot free a locked account
            oldest = sorted(self._entries, key=lambda k: (self._entries[k][2] > now, self._entries[k][1]))
            for key in oldest[: len(self._entries) - self.max_keys]:
                del self._entries[key]
