"""The run engine's housekeeping: eviction of finished logs, the janitor (timeouts, eviction, lease
recovery, purging), recovery of a dead worker's runs, and the shutdown drain. A part of
``RunEngine`` (which mixes it in); the attributes below are the engine's.

Invariants: eviction happens only for a finished run without readers, whose grace has passed
(``_evict_heap`` holds each scheduled eviction; a re-scheduled run's older entry is skipped
because its ``evict_at`` no longer matches); one janitor thread per process; after ``close``
nothing starts the writer or the janitor again.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple, cast

from .heap_trim import HeapTrimmer
from .outcome import recovery_tail
from .run import Run

if TYPE_CHECKING:
    from .backend import LocalBackend
    from .durable import DurableLog
    from .engine import RunEngine
    from .hooks import EngineHooks

log = logging.getLogger(__name__)


class Housekeeping:
    """``RunEngine``'s eviction, janitor, recovery and shutdown (see the module docstring)."""

    config: Dict[str, Any]
    grace: float
    runs: Dict[str, Run]
    by_session: Dict[Tuple[str, str], Run]
    active: int
    draining: bool
    maintenance: List[Callable[[], None]]
    durable: "DurableLog"
    backend: "LocalBackend"  # or its subclass redis_backend.RedisBackend (make_backend)
    hooks: "EngineHooks"
    _lock: Any
    _running: Dict[str, Run]
    _finished: Dict[str, Run]
    _evict_heap: List[Tuple[float, int, Run]]
    _evict_order: "itertools.count[int]"
    _session_locks: Dict[Tuple[str, str], threading.Lock]
    _closing: threading.Event
    _janitor: Optional[threading.Thread]
    _janitor_ended: bool
    _last_recovery: float
    _drain: Optional[threading.Thread]
    _heap: HeapTrimmer

    if TYPE_CHECKING:  # provided by RunEngine

        def _end(self, run: Run, reason: str) -> bool: ...

    def _schedule_evict(self, run: Run, grace: Optional[float] = None) -> None:
        """Keep the finished run's log ``EVICT_GRACE`` seconds more (or ``grace``), then free it (under ``_lock``)."""
        run.evict_at = time.monotonic() + (self.grace if grace is None else grace)
        heapq.heappush(self._evict_heap, (run.evict_at, next(self._evict_order), run))

    def _evict(self, run: Run) -> None:
        with self._lock:
            if run.subscribers:
                return
            self.runs.pop(run.run_id, None)
            self._finished.pop(run.run_id, None)
            key = (run.owner, run.session_id)
            if self.by_session.get(key) is run:
                del self.by_session[key]
                self._session_locks.pop(key, None)
            self._heap.released(run.log.bytes)
            run.log.release()

    def _evict_idle(self, free_bytes: int) -> None:
        """Free the oldest finished logs without readers until ``free_bytes`` are released.

        Walks the finished runs in the order they finished (no sort) and stops as soon as enough
        is free: only the logs it frees and the ones with readers are visited (caller holds ``_lock``).
        """
        victims = []
        for run in self._finished.values():  # oldest first; evicted after the walk (it mutates the dict)
            if free_bytes <= 0:
                break
            if run.subscribers == 0:
                free_bytes -= run.log.bytes
                victims.append(run)
        for run in victims:
            self._evict(run)

    # ---------------------------------------------------------------- janitor
    def start_background(self) -> None:
        """Start the janitor and the durable writer (at boot: recovery of a dead worker's runs must not wait)."""
        self._ensure_janitor()

    def _ensure_janitor(self) -> None:
        """Start the writer and the janitor unless the janitor runs (called by every turn start).

        [issue 22] Whether it runs is the janitor's own flag, not ``Thread.is_alive()``: under
        gevent that asks a live thread's lock with a non-blocking acquire that fails, and a failed
        acquire yields to every ready greenlet, a hub round trip in the middle of every start.
        """
        if self._closing.is_set():
            return  # closed: nothing may start the writer or the janitor again
        if self._janitor is None or self._janitor_ended:
            self.durable.start()
            self.backend.start(cast("RunEngine", self))  # [issue 14]
            self._janitor_ended = False
            self._janitor = threading.Thread(target=self._run_janitor, name="run-janitor", daemon=True)
            self._janitor.start()

    def _run_janitor(self) -> None:
        try:
            self._janitor_loop()
        finally:
            self._janitor_ended = True  # the next start starts another

    def _janitor_interval(self) -> float:
        limits = [0.5, self.grace / 4, float(self.config["RUN_IDLE_TIMEOUT"]) / 4]
        return max(0.02, min(limits))

    def _janitor_loop(self) -> None:
        """Watchdog, evictor, recovery of expired leases and purging: one loop for the whole process."""
        while not self._closing.wait(self._janitor_interval()):
            try:
                self.sweep()
                if time.monotonic() - self._last_recovery > self.durable.lease_seconds / 2:
                    self._last_recovery = time.monotonic()
                    self.recover_interrupted()
                    self.durable.purge()
                    self.durable.checkpoint()  # the WAL stays small when only the request path writes
                    for task in list(self.maintenance):
                        task()
            except Exception as exc:
                if self._closing.is_set() or "shutdown" in str(exc):
                    return  # the writer closed under the last sweep (or the interpreter is exiting): nothing to report
                log.exception("run janitor sweep failed")

    def sweep(self) -> None:
        """End runs past their limits and evict logs whose grace has passed."""
        now = time.monotonic()
        wall, idle = float(self.config["RUN_WALL_TIMEOUT"]), float(self.config["RUN_IDLE_TIMEOUT"])
        with self._lock:
            running = list(self._running.values())  # at most MAX_ACTIVE_RUNS, however many are held
        for run in running:
            if run.status == "running" and not run.cancel.cancelled:
                if now - run.started_monotonic > wall:
                    threading.Thread(target=self._end, args=(run, "timeout:wall"), daemon=True).start()
                elif now - run.last_event_monotonic > idle:
                    threading.Thread(target=self._end, args=(run, "timeout:idle"), daemon=True).start()
        with self._lock:  # only the runs whose grace has passed: the heap's due entries
            heap = self._evict_heap
            while heap and heap[0][0] <= now:
                evict_at, _, run = heapq.heappop(heap)
                if run.evict_at == evict_at and run.subscribers == 0 and self.runs.get(run.run_id) is run:
                    self._evict(run)
            quiet = not self._running and not self._finished
        self._heap.maybe_trim(idle=quiet)  # hand what the evicted logs freed back to the OS (heap_trim.py)

    # ---------------------------------------------------------------- recovery and shutdown
    def recover_interrupted(self) -> List[str]:
        """Mark ``interrupted`` the runs whose driving worker is gone (expired lease or dead pid), once each."""
        engine = cast("RunEngine", self)  # Housekeeping is only ever RunEngine's base
        return self.backend.recover(engine, lambda run_id: run_id in self.runs, recovery_tail)  # [issue 14]

    def begin_shutdown(self, grace: Optional[float] = None) -> threading.Thread:
        """Drain: refuse new turns, give running runs ``grace`` seconds, then end them ``interrupted``."""
        if self._drain is not None:
            return self._drain
        self.draining = True
        grace = float(self.config.get("SHUTDOWN_GRACE", 20)) if grace is None else grace

        def drain() -> None:
            deadline = time.monotonic() + grace
            while self.active and time.monotonic() < deadline:
                time.sleep(0.05)
            ending = [run for run in list(self._running.values()) if run.status == "running"]
            for run in ending:
                run.cancel.cancel("shutdown")
            for run in ending:
                self._end(run, "shutdown")
            with contextlib.suppress(Exception):
                self.durable.flush(timeout=10)

        thread = threading.Thread(target=drain, name="run-drain", daemon=True)
        thread.start()
        self._drain = thread
        return thread

    def finish_shutdown(self, timeout: float) -> None:
        """Drain (if not already) and wait until every run is saved and the durable log flushed."""
        self.begin_shutdown().join(timeout)
        self.close()

    def close(self) -> None:
        """Stop the janitor, flush the durable log and close its connection (tests and shutdown)."""
        self._closing.set()
        if self._janitor is not None and self._janitor is not threading.current_thread():
            self._janitor.join(5)
        self.backend.close()  # [issue 14]
        self.durable.close()
        self.hooks.closed.send()  # e.g. the MCP broker and its servers
