"""Give the heap that evicted runs freed back to the operating system (glibc's ``malloc_trim``).

A busy replay window holds hundreds of finished runs at once; once they are evicted their
memory is free inside the process, but glibc keeps most of it mapped, so the worker's RSS
stays at that high-water mark. ``HeapTrimmer`` counts the log bytes evictions released and,
when at least ``min_bytes`` have been freed and ``min_interval`` seconds have passed since
the last trim (``IDLE_INTERVAL`` once the engine holds no run at all: the busy period is
over), calls ``malloc_trim(0)`` (about 1-3 ms for a worker's heap; the janitor calls it
after a sweep). An idle trim first runs a full ``gc.collect()``: a finished run's objects sit in
reference cycles that only the oldest generation's rare collections free, and with no run held
the pause stalls no stream. Where the C library has no ``malloc_trim`` (musl, macOS) it does nothing.
Measured effect in docs/benchmarks.md ("memory").

``freeze_startup_heap`` is the collector's side of the same concern: the objects a worker
holds once its app is built (modules, routes, templates, about 55,000) never become garbage,
yet every full collection walks them again; and a stream in flight keeps a few hundred tracked
objects for about a second (its log's entries, its greenlets' frames), so with CPython's default
thresholds they were walked again and again by collections that found next to nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import logging
import time
from typing import Callable, Optional

log = logging.getLogger(__name__)

#: log payload bytes evicted between two trims (a few hundred short runs)
MIN_BYTES = 1 << 20
#: seconds between two trims at the most often while runs are held
MIN_INTERVAL = 30.0
#: ... and once none is (the first sweep after a busy period ends)
IDLE_INTERVAL = 1.0
#: tracked objects allocated (net of those freed) between two youngest-generation collections: ten
#: times CPython's 700. Under 600 paced arrivals (100 streams in flight) the collector's total pause
#: fell from 1.6-1.9 s to about 0.5 s and the worker's CPU by about 11%; the longest pause (now a
#: middle-generation one) from 200-250 ms to 35-60 ms. 20,000 took a little less CPU but paused
#: 115-125 ms at a time (docs/benchmarks.md, "Collector thresholds").
YOUNG_THRESHOLD = 7000
#: middle-generation collections before a full one may run: ten times CPython's 10. A full collection
#: walks every stream in flight (about 240 tracked objects each: greenlets' frames, sockets, the
#: provider's stream readers), 0.9 s with 5,000 held streams, and in this workload it found next to
#: no garbage (0-200 objects: what the app leaves is freed by reference counting); at 10 one came
#: about once a minute under that load and made 1,904 of 5,000 subscribers miss a heartbeat, now about
#: once in ten minutes. The janitor's idle trim still collects fully once nothing is held.
OLD_THRESHOLD = 100


def freeze_startup_heap() -> int:
    """Collect, move every object that survived into the collector's permanent generation, and
    collect the young and the old generation ten times less often (``YOUNG_THRESHOLD``,
    ``OLD_THRESHOLD``).

    Called once per worker after the app is built (gunicorn.conf.py ``post_worker_init``). A full
    collection then walks only what was made since: on this machine 52-62 ms became 10-12 ms
    idle, and under load (several per second with 100 paced streams) each pause is that much
    shorter. Objects made later are collected as before. Returns the number frozen.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, gc.get_threshold()[1], OLD_THRESHOLD)
    return gc.get_freeze_count()


def _libc_trim() -> Optional[Callable[[int], int]]:
    """``malloc_trim`` of the process's C library, or None where there is none."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


class HeapTrimmer:
    """Counts freed log bytes; trims the heap when enough were freed and enough time has passed."""

    def __init__(
        self,
        min_bytes: int = MIN_BYTES,
        min_interval: float = MIN_INTERVAL,
        trim: Optional[Callable[[int], int]] = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.min_bytes, self.min_interval, self.clock = min_bytes, min_interval, clock
        self.trim = trim if trim is not None else _libc_trim()
        self.freed = 0
        self.trims = 0
        self._last = clock()

    def released(self, nbytes: int) -> None:
        """An evicted log released ``nbytes`` of payload."""
        self.freed += nbytes

    def maybe_trim(self, idle: bool = False) -> bool:
        """Trim when due (``idle``: the engine holds no run); True when it did."""
        interval = min(self.min_interval, IDLE_INTERVAL) if idle else self.min_interval
        if self.trim is None or self.freed < self.min_bytes or self.clock() - self._last < interval:
            return False
        self.freed, self._last = 0, self.clock()
        try:
            if idle:
                gc.collect()
            self.trim(0)
        except Exception:  # noqa: BLE001 - giving memory back is never worth a failed sweep
            log.exception("malloc_trim failed")
            return False
        self.trims += 1
        return True
