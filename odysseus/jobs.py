"""A bounded pool of background-job workers.

Jobs are persisted (``store.jobs``) before they are queued, so the queue in memory is
only a wake-up list: on start-up every job still ``queued`` in SQLite is queued again,
and jobs a dead process left ``running`` are marked failed (their partial reply was
saved by run recovery). At most ``workers`` jobs run at once.

Fairness between users: a free worker serves the owner with the fewest jobs running here;
among those, the one served least recently (never served first), then the oldest job. So
one user's burst of jobs cannot hold every slot while another user's job waits, and with
one slot (``BACKGROUND_WORKERS=1``) users take turns instead of queueing behind the burst.
Each user's jobs keep their order; with nobody else waiting, one user may use every slot.
(The Redis backend's shared queue applies the first rule across workers, in SQLite.)
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections import deque
from typing import Callable, Deque, Dict, List, Protocol, Tuple

log = logging.getLogger(__name__)


class JobQueue(Protocol):
    """What the background-job service needs of a pool: this module's, or the Redis backend's."""

    def submit(self, job_id: str, owner: str = "") -> None:
        """Queue a persisted job of ``owner``."""
        ...


class JobPool:
    """``workers`` daemon threads (greenlets under gevent) running ``run_job(job_id)``."""

    def __init__(self, workers: int, run_job: Callable[[str], None]):
        self.workers = max(1, workers)
        self.run_job = run_job
        self._threads: List[threading.Thread] = []
        self._lock = threading.Lock()
        self._ready = threading.Condition()  # guards _waiting, _running and _served
        self._waiting: Dict[str, Deque[Tuple[int, str]]] = {}  # owner -> (arrival, job id), oldest first
        self._running: Dict[str, int] = {}  # owner -> jobs this pool is running for them
        self._served: Dict[str, int] = {}  # owner -> when (a _ticks value) a job of theirs last started
        self._ticks = itertools.count()  # one clock for arrivals and starts

    def submit(self, job_id: str, owner: str = "") -> None:
        """Queue a persisted job of ``owner``."""
        self._ensure_workers()
        with self._ready:
            self._waiting.setdefault(owner, deque()).append((next(self._ticks), job_id))
            self._ready.notify()

    def _ensure_workers(self) -> None:
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]
            while len(self._threads) < self.workers:
                thread = threading.Thread(target=self._work, name=f"job-worker-{len(self._threads)}", daemon=True)
                thread.start()
                self._threads.append(thread)

    def _take(self) -> Tuple[str, str]:
        """Under ``_ready``, with jobs waiting: the fairest next job, counted as running for its owner."""
        owner = min(
            self._waiting, key=lambda o: (self._running.get(o, 0), self._served.get(o, -1), self._waiting[o][0][0])
        )
        jobs = self._waiting[owner]
        _arrival, job_id = jobs.popleft()
        if not jobs:
            del self._waiting[owner]
        self._running[owner] = self._running.get(owner, 0) + 1
        self._served[owner] = next(self._ticks)
        return owner, job_id

    def _done(self, owner: str) -> None:
        with self._ready:
            left = self._running[owner] - 1
            if left:
                self._running[owner] = left
                return
            del self._running[owner]
            if owner not in self._waiting:
                del self._served[owner]  # nothing of theirs here: the maps stay as small as the work

    def _work(self) -> None:
        while True:
            with self._ready:
                while not self._waiting:
                    self._ready.wait()
                owner, job_id = self._take()
            try:
                self.run_job(job_id)
            except Exception:  # one failing job must not kill the worker
                log.exception("background job %s failed", job_id)
            finally:
                self._done(owner)
