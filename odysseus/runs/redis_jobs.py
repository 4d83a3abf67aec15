"""The background-job queue every worker shares: one Redis Stream read through a consumer group.

Invariants:

- A job is persisted in SQLite (``store.jobs``) before its id is added to the stream
  ``<prefix>jobs``; the stream is only the order of wake-ups. Each worker runs
  ``BACKGROUND_WORKERS`` readers in the consumer group ``workers``; a reader takes one
  entry, acknowledges it, claims the job atomically in SQLite (so a duplicate entry, or two
  workers, never run one job twice) and hands the claimed job to ``run_job``.
- Fairness between users (max-min): the claim is refused while the job's owner has more jobs
  running than some other user with jobs waiting (``store.jobs.claim_fairly``: the check and
  the claim are one write, so two readers free at the same moment cannot both pass it), and
  the reader puts the entry back at the end of the stream; one user's burst cannot hold every
  slot while another user's job waits. With nobody else waiting, one user may use every slot.
- Nothing is lost when a worker dies between taking an entry and claiming the job: a
  sweeper re-adds jobs that stay queued while the stream has nothing undelivered.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Callable, List

from ..store.jobs import CLAIMED, NOT_YET
from .redis_control import RedisClient

if TYPE_CHECKING:
    from ..store import Store

log = logging.getLogger(__name__)

GROUP = "workers"
#: the stream is trimmed (approximately) to this many entries; jobs themselves live in SQLite
MAX_ENTRIES = 10_000


class RedisJobPool:
    """``workers`` readers of the shared job stream in this process."""

    def __init__(
        self,
        client: RedisClient,
        prefix: str,
        workers: int,
        run_job: Callable[[str, bool], None],
        store: "Store",
        worker: str,
        draining: Callable[[], bool],
        lease_seconds: float,
    ):
        self.client = client
        self.stream = f"{prefix}jobs"
        self.workers = max(1, workers)
        self.run_job = run_job
        self.store = store
        self.consumer = worker
        self.draining = draining
        self.lease_seconds = lease_seconds
        self.sweep_every = max(1.0, 2 * lease_seconds)
        self._threads: List[threading.Thread] = []
        self._lock = threading.Lock()
        self._group_ready = False
        self.deferred = 0
        self._ensure_workers()  # every worker reads the shared queue, not only the one a job was posted to

    def submit(self, job_id: str, owner: str = "") -> None:
        """Queue a persisted job for whichever worker is free first (a Redis failure: the sweeper re-adds it).

        ``owner`` is not needed here: the claim (``claim_fairly``) reads owners from SQLite.
        """
        self._ensure_workers()
        try:
            self.client.xadd(self.stream, {"job": job_id}, maxlen=MAX_ENTRIES, approximate=True)
        except Exception as exc:  # noqa: BLE001 - the job is in SQLite; the sweeper queues it again
            log.warning("queueing job %s in Redis failed: %s", job_id, exc)

    def _ensure_workers(self) -> None:
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]
            if not self._threads:
                sweeper = threading.Thread(target=self._sweep_loop, name="job-sweeper", daemon=True)
                sweeper.start()
                self._threads.append(sweeper)
            while len(self._threads) < self.workers + 1:
                thread = threading.Thread(target=self._work, name=f"job-reader-{len(self._threads)}", daemon=True)
                thread.start()
                self._threads.append(thread)

    def _ensure_group(self) -> None:
        if self._group_ready:
            return
        try:
            self.client.xgroup_create(self.stream, GROUP, id="0", mkstream=True)
        except Exception as exc:  # noqa: BLE001 - BUSYGROUP: another worker created it
            if "BUSYGROUP" not in str(exc):
                raise
        self._group_ready = True

    def _work(self) -> None:
        while True:
            if self.draining():
                time.sleep(0.5)
                continue
            try:
                self._ensure_group()
                reply = self.client.xreadgroup(GROUP, self.consumer, {self.stream: ">"}, count=1, block=2000)
            except Exception as exc:  # noqa: BLE001 - Redis restarted (NOGROUP) or down: retry
                self._group_ready = False
                log.debug("reading the job stream failed: %s", exc)
                time.sleep(0.5)
                continue
            for _, items in reply or []:
                for entry_id, fields in items:
                    try:
                        self._take(entry_id, fields.get("job", ""))
                    except Exception:  # one failing job must not stop the reader
                        log.exception("background job entry %s failed", entry_id)

    def _take(self, entry_id: str, job_id: str) -> None:
        self.client.xack(self.stream, GROUP, entry_id)
        if not job_id or self.draining():
            return  # draining: left queued for the sweeper
        # GONE (cancelled, done, or a duplicate entry of a job another reader took) needs nothing more
        taken = self.store.jobs.claim_fairly(job_id, self.consumer, self.lease_seconds)
        if taken == NOT_YET:
            self.deferred += 1
            self.client.xadd(self.stream, {"job": job_id}, maxlen=MAX_ENTRIES, approximate=True)
            time.sleep(0.02)
        elif taken == CLAIMED:
            self.run_job(job_id, True)

    def _sweep_loop(self) -> None:
        while True:
            time.sleep(self.sweep_every)
            try:
                self.sweep()
            except Exception as exc:  # noqa: BLE001 - Redis down: next time
                log.debug("job sweep failed: %s", exc)

    def sweep(self) -> int:
        """Re-add jobs still queued long after the stream delivered everything (an entry was lost)."""
        groups = self.client.xinfo_groups(self.stream)
        group = next((g for g in groups if g.get("name") == GROUP), None)
        if group is None or (group.get("lag") or 0) > 0 or (group.get("pending") or 0) > 0:
            return 0
        cutoff = time.time() - 2 * self.sweep_every
        lost = [job["job_id"] for job in self.store.jobs.queued() if (job.get("updated_at") or 0) < cutoff]
        for job_id in lost:
            self.client.xadd(self.stream, {"job": job_id}, maxlen=MAX_ENTRIES, approximate=True)
        return len(lost)
