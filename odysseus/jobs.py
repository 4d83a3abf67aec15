"""A bounded pool of background-job workers.

Jobs are persisted (``store.jobs``) before they are queued, so the queue in memory is
only a wake-up list: on start-up every job still ``queued`` in SQLite is queued again,
and jobs a dead process left ``running`` are marked failed (their partial reply was
saved by run recovery). At most ``workers`` jobs run at once.
"""

from __future__ import annotations

import logging
import queue
import threading
from typing import Callable, List

log = logging.getLogger(__name__)


class JobPool:
    """``workers`` daemon threads (greenlets under gevent) running ``run_job(job_id)``."""

    def __init__(self, workers: int, run_job: Callable[[str], None]):
        self.workers = max(1, workers)
        self.run_job = run_job
        self._queue: "queue.Queue[str]" = queue.Queue()
        self._threads: List[threading.Thread] = []
        self._lock = threading.Lock()

    def submit(self, job_id: str) -> None:
        """Queue a persisted job."""
        self._ensure_workers()
        self._queue.put(job_id)

    def _ensure_workers(self) -> None:
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]
            while len(self._threads) < self.workers:
                thread = threading.Thread(target=self._work, name=f"job-worker-{len(self._threads)}", daemon=True)
                thread.start()
                self._threads.append(thread)

    def _work(self) -> None:
        while True:
            job_id = self._queue.get()
            try:
                self.run_job(job_id)
            except Exception:  # one failing job must not kill the worker
                log.exception("background job %s failed", job_id)
            finally:
                self._queue.task_done()
