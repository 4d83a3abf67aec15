"""``RUN_BACKEND=redis``: runs followed, stopped and recovered from any worker, on any box.

What lives where:

- a run is still driven by the worker that started it: memory log, SQLite write-through,
  final save (``runs/engine.py``, ``runs/durable.py``); this backend adds
- its log mirrored to a Redis Stream (``redis_log.py``) that readers on other workers follow;
- its lease in Redis, stop/cancel messages to its worker, the session start lock
  (``redis_control.py``);
- recovery: a run whose worker died (no Redis lease, SQLite lease expired or pid gone) is
  marked ``interrupted`` by whichever live worker gets there first; the events its stream
  has beyond the SQLite copy are written to SQLite first, so the saved partial reply and the
  tail continue exactly where readers were, and the tail is appended to the stream;
- the background-job queue shared by every worker (``redis_jobs.py``).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, ContextManager, Dict, Iterator, List, Mapping, Optional

from ..errors import NotFound
from ..process_identity import worker_is_dead
from .backend import BackendUnavailable, LocalBackend, TailBuilder
from .durable import read_events
from .follow import Projection
from .redis_control import ControlListener, Leases, RedisClient, publish_stop, session_lock
from .redis_log import MirroredRunLog, StreamWriter, entry_of, follow_redis, stream_key
from .run import Run
from .run_log import ByteBudget, RunLog

if TYPE_CHECKING:
    from ..jobs import JobQueue
    from ..store import Store
    from .engine import RunEngine


log = logging.getLogger(__name__)


def connect_redis(url: str) -> RedisClient:
    """A redis-py client for ``url`` (str replies; payload bytes round-trip exactly)."""
    import redis

    if not url:
        raise BackendUnavailable("RUN_BACKEND=redis needs REDIS_URL")
    return redis.Redis.from_url(
        url,
        decode_responses=True,
        encoding_errors="surrogatepass",
        socket_connect_timeout=2,
        socket_timeout=5,
        retry_on_timeout=False,
    )


class RedisBackend(LocalBackend):
    """Runs shared by every worker through one Redis server."""

    name = "redis"

    def __init__(self, config: Mapping[str, Any], worker: str):
        super().__init__(config, worker)
        self.client = connect_redis(config.get("REDIS_URL", ""))
        self.reader_client = self.client
        self.prefix = str(config.get("REDIS_PREFIX") or "odysseus:")
        self.grace = float(config["EVICT_GRACE"])
        self.lease_seconds = float(config.get("RUN_LEASE_SECONDS", 15))
        live_ttl = float(config["RUN_IDLE_TIMEOUT"]) + 2 * self.lease_seconds + self.grace
        self.writer = StreamWriter(self.client, self.prefix, self.grace, live_ttl)
        # the lease of a run goes with its stream entries: taken before its first, dropped after its close
        self.leases = Leases(self.client, self.prefix, worker, self.lease_seconds, queue=self.writer.command)
        self.listener: Optional[ControlListener] = None
        self.engine: Optional["RunEngine"] = None
        self._renewer: Optional[threading.Thread] = None
        self._closing = threading.Event()
        self.recovered = 0
        self.readers = 0  # readers that followed a stream here
        self.handovers = 0  # of those, readers that went on from SQLite (gap, expiry, Redis error)

    # ------------------------------------------------------------ life
    def start(self, engine: "RunEngine") -> None:
        """Start the stream writer, the control listener and the lease renewer."""
        if self.engine is not None:
            return
        self.engine = engine
        self.writer.start()
        self.listener = ControlListener(self.client, self.prefix, self.worker, self._on_stop)
        self.listener.start()
        self._renewer = threading.Thread(target=self._renew_loop, name="redis-leases", daemon=True)
        self._renewer.start()

    def close(self) -> None:
        """Write the queued stream entries, stop listening and renewing."""
        self._closing.set()
        self.writer.close()
        if self.listener is not None:
            self.listener.close()

    def _renew_loop(self) -> None:
        while not self._closing.wait(self.lease_seconds / 3):
            self.leases.renew()

    # ------------------------------------------------------------ the driving worker
    def make_log(self, run_id: str, max_events: int, max_bytes: int, budget: ByteBudget, base: int = 0) -> RunLog:
        """The memory log, mirrored entry by entry to the run's stream (its first event is ``base + 1``)."""
        return MirroredRunLog(run_id, self.writer, max_events, max_bytes, budget, base)

    def session_lock(self, owner: str, session_id: str) -> ContextManager[None]:
        """The session's start lock in Redis, with an expiry."""
        return session_lock(
            self.client, self.prefix, owner, session_id, float(self.config.get("SESSION_LOCK_SECONDS", 30))
        )

    def run_started(self, run: Run) -> None:
        """Lease the run to this worker."""
        self.leases.take(run.run_id)

    def run_finished(self, run: Run) -> None:
        """Give the lease up (the stream's tail is already queued)."""
        self.leases.drop(run.run_id)

    def _on_stop(self, run_id: str, reason: str) -> None:
        """A stop/cancel from another worker for a run this worker drives."""
        engine = self.engine
        run = engine.runs.get(run_id) if engine is not None else None
        if engine is None or run is None or run.status != "running":
            return
        engine._end(run, reason)

    # ------------------------------------------------------------ any worker
    def follow(
        self,
        engine: "RunEngine",
        run_id: str,
        after: int,
        projection: Projection,
        heartbeat_interval: float,
        opened: bool = False,
    ) -> Iterator[str]:
        """Follow the run's stream wherever it is driven (SQLite when Redis cannot serve it)."""
        return follow_redis(self, engine, run_id, after, projection, heartbeat_interval, opened)

    @staticmethod
    def still_running(engine: "RunEngine", run_id: str) -> bool:
        """True while the run's row says running."""
        with engine.store.locked.read() as db:
            row = db.execute("select status from runs where run_id = ?", [run_id]).fetchone()
        return bool(row) and row[0] == "running"

    def reader_left(self, key: str) -> None:
        """A reader saw the close: keep the finished stream ``EVICT_GRACE`` more seconds."""
        try:
            self.client.expire(key, max(1, int(self.grace + 0.999)), xx=True)
        except Exception:  # noqa: BLE001 - the writer's expiry still applies
            pass

    def stop_elsewhere(
        self, engine: "RunEngine", owner: str, run_id: Optional[str], reason: str, session_id: Optional[str] = None
    ) -> bool:
        """Stop a run another worker drives; True once its row says it ended."""
        if not run_id:
            return False
        try:
            row = engine.store.runs.get(owner, run_id)
        except NotFound:
            return False
        if row["status"] != "running" or (session_id is not None and row["session_id"] != session_id):
            return False
        patience = float(self.config["STOP_WAIT"]) + float(self.config.get("FINAL_SAVE_PATIENCE", 20)) + 5
        deadline, next_publish = time.monotonic() + patience, 0.0
        while time.monotonic() < deadline:
            if time.monotonic() >= next_publish:
                next_publish = time.monotonic() + 0.5
                try:
                    worker = self.leases.holder(run_id) or row["worker"]
                    if worker != self.worker:
                        publish_stop(self.client, self.prefix, worker, run_id, reason)
                except Exception as exc:  # noqa: BLE001
                    raise BackendUnavailable(f"the run backend (Redis) is unavailable: {type(exc).__name__}") from None
            time.sleep(0.02)
            if not self.still_running(engine, run_id):
                return True
        return False

    def replace_elsewhere(self, engine: "RunEngine", owner: str, session_id: str) -> bool:
        """Stop the session's running run on another worker with reason ``replaced``."""
        row = engine.store.runs.latest_for_session(owner, session_id)
        if row is None or row["status"] != "running" or row["run_id"] in engine.runs:
            return False
        return self.stop_elsewhere(engine, owner, row["run_id"], "replaced", session_id)

    # ------------------------------------------------------------ recovery
    def _lease_held(self, run_id: str) -> bool:
        """True while a live worker leases the run (a holder visibly dead on this box does not count)."""
        try:
            holder = self.leases.holder(run_id)
        except Exception:  # noqa: BLE001 - Redis down: the SQLite lease alone decides
            return False
        return holder is not None and not worker_is_dead(holder, self.worker)

    def recover(self, engine: "RunEngine", is_local: Callable[[str], bool], build_tail: TailBuilder) -> List[str]:
        """Interrupt runs whose worker is gone, continuing their numbering from the stream."""
        now = time.time()
        remote = [row for row in engine.store.runs.running() if not is_local(row["run_id"])]
        # Redis is asked here, never from the durable writer's native thread (its is_owned check): a
        # connection a native thread used holds a socket of that thread's hub, and the next greenlet
        # the pool gave it to failed with "Cannot switch to a different thread" (a start answered 503).
        # A run that starts after this look has a fresh SQLite lease, which the writer checks too.
        held = {row["run_id"] for row in remote if self._lease_held(row["run_id"])}
        orphans = [
            row
            for row in remote
            if row["run_id"] not in held
            and (
                row.get("lease_until") is None
                or row["lease_until"] < now
                or worker_is_dead(row.get("worker"), self.worker)
            )
        ]
        for row in orphans:
            self._backfill(engine, row["run_id"])
        if orphans:
            engine.durable.flush(timeout=30)
        recovered = engine.durable.recover(lambda run_id: is_local(run_id) or run_id in held, build_tail, timeout=120)
        for run_id in recovered:
            self._append_tail(engine, run_id)
        self.recovered += len(recovered)
        return recovered

    def _backfill(self, engine: "RunEngine", run_id: str) -> None:
        """Queue for SQLite the events the dead worker's stream has (``insert or ignore``: no duplicates)."""
        try:
            items = self.client.xrange(stream_key(self.prefix, run_id), "-", "+")
        except Exception:  # noqa: BLE001 - Redis down: SQLite's copy is all there is
            return
        for entry_id, fields in items:
            engine.durable.enqueue(run_id, entry_of(entry_id, fields))

    def _append_tail(self, engine: "RunEngine", run_id: str) -> None:
        """Append the recovery tail SQLite saved to the run's stream, so its readers see the end."""
        key = stream_key(self.prefix, run_id)
        try:
            last = self.client.xrevrange(key, "+", "-", count=1)
            if not last:
                return  # no stream (Redis restarted): readers are on SQLite already
            after = int(str(last[0][0]).split("-", 1)[0])
            with engine.store.locked.read() as db:
                rows = read_events(db, run_id, after, 1000)
            pipe = self.client.pipeline(transaction=False)
            for seq, kind, payload in rows:
                pipe.xadd(key, {"t": kind, "p": payload}, id=f"{seq}-0")
            pipe.expire(key, max(1, int(self.grace + 0.999)))
            pipe.execute(raise_on_error=False)  # a second recoverer's ids are refused: the tail is written once
        except Exception:  # noqa: BLE001 - readers fall back to SQLite when the stream stays open
            log.exception("appending the recovery tail of %s to Redis failed", run_id)

    # ------------------------------------------------------------ jobs and health
    def job_pool(self, workers: int, run_job: Callable[..., None], store: "Store", engine: "RunEngine") -> "JobQueue":
        """The job queue every worker shares: a Redis Stream with a consumer group, fair per user."""
        from .redis_jobs import RedisJobPool

        return RedisJobPool(
            self.client, self.prefix, workers, run_job, store, self.worker, lambda: engine.draining, self.lease_seconds
        )

    def stats(self) -> Dict[str, Any]:
        """Writer, leases and control channel, for ``/api/health``."""
        try:
            reachable = bool(self.client.ping())
        except Exception:  # noqa: BLE001
            reachable = False
        return {
            "backend": self.name,
            "redis": reachable,
            "stream_written": self.writer.written,
            "stream_batches": self.writer.batches,
            "stream_failures": self.writer.failures,
            "stream_last_error": self.writer.last_error,
            "leases_held": len(self.leases.held),
            "lease_failures": self.leases.failures,
            "control_received": self.listener.received if self.listener else 0,
            "recovered": self.recovered,
            "stream_readers": self.readers,
            "stream_handovers": self.handovers,
        }
