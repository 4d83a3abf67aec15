"""Where runs live beyond this process: the small interface between the engine and its backends.

The engine (``runs/engine.py``) always drives a run in the worker that started it, with its
memory log and the durable SQLite write-through. A backend adds what several workers need:

- ``make_log``: the run's log (the Redis backend mirrors every entry to a Redis Stream);
- ``session_lock``: starts on one session serialised across workers;
- ``follow``: a reader of a run this worker does not hold;
- ``stop_elsewhere`` / ``replace_elsewhere``: stop a run another worker drives;
- ``recover``: mark runs of a dead worker ``interrupted``, once;
- ``job_pool``: the background-job queue;
- ``run_started`` / ``run_finished``: leases.

``LocalBackend`` is the in-process default (``RUN_BACKEND=memory``, one worker): nothing is
shared, other workers do not exist, readers of a run not in memory read the durable log.
``RedisBackend`` (``runs/redis_backend.py``) is the one for several workers and boxes.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Callable, ContextManager, Dict, Iterator, List, Mapping, Optional

from ..errors import CapacityError, OdysseusError
from ..events import Event
from .follow import Projection, follow_durable
from .run import Run
from .run_log import ByteBudget, RunLog

if TYPE_CHECKING:
    from ..jobs import JobQueue
    from ..store import Store
    from .engine import RunEngine

#: the final events of a run recovered as interrupted, from its runs row and saved message id
TailBuilder = Callable[[Dict[str, Any], Optional[int]], List[Event]]


class LocalBackend:
    """Everything in this process: the behaviour of ``RUN_BACKEND=memory``."""

    name = "memory"

    def __init__(self, config: Mapping[str, Any], worker: str):
        self.config = config
        self.worker = worker

    def start(self, engine: "RunEngine") -> None:
        """Start background work (nothing here)."""

    def close(self) -> None:
        """Stop background work (nothing here)."""

    def make_log(self, run_id: str, max_events: int, max_bytes: int, budget: ByteBudget, base: int = 0) -> RunLog:
        """A new run's log (its first event is ``base + 1``)."""
        return RunLog(max_events, max_bytes, budget, base)

    def session_lock(self, owner: str, session_id: str) -> ContextManager[None]:
        """No other worker exists: the engine's own lock suffices."""
        return contextlib.nullcontext()

    def run_started(self, run: Run) -> None:
        """A run started here (the durable writer already renews its SQLite lease)."""

    def run_finished(self, run: Run) -> None:
        """A run ended here."""

    def follow(
        self,
        engine: "RunEngine",
        run_id: str,
        after: int,
        projection: Projection,
        heartbeat_interval: float,
        opened: bool = False,
    ) -> Iterator[str]:
        """A run this worker does not hold in memory: its durable log."""
        return follow_durable(
            engine.store, run_id, after, projection, heartbeat_interval, engine.durable.interval, opened
        )

    def stop_elsewhere(
        self, engine: "RunEngine", owner: str, run_id: Optional[str], reason: str, session_id: Optional[str] = None
    ) -> bool:
        """No other worker can hold the run."""
        return False

    def replace_elsewhere(self, engine: "RunEngine", owner: str, session_id: str) -> bool:
        """No other worker can hold the session's run."""
        return False

    def recover(self, engine: "RunEngine", is_local: Callable[[str], bool], build_tail: TailBuilder) -> List[str]:
        """Mark runs whose worker is gone ``interrupted`` (expired SQLite lease or dead pid)."""
        return engine.durable.recover(is_local, build_tail, timeout=120)

    def job_pool(self, workers: int, run_job: Callable[..., None], store: "Store", engine: "RunEngine") -> "JobQueue":
        """The background-job queue of this process."""
        from ..jobs import JobPool

        return JobPool(workers, run_job)

    def stats(self) -> Dict[str, Any]:
        """For ``/api/health``."""
        return {"backend": self.name}


class BackendUnavailable(CapacityError):
    """The shared run backend (Redis) cannot be reached: 503 with Retry-After, nothing is stored."""


def make_backend(config: Mapping[str, Any], worker: str) -> LocalBackend:
    """The backend ``RUN_BACKEND`` names."""
    kind = config.get("RUN_BACKEND", "memory")
    if kind == "memory":
        return LocalBackend(config, worker)
    if kind == "redis":
        from .redis_backend import RedisBackend

        return RedisBackend(config, worker)
    raise OdysseusError(f"unknown RUN_BACKEND {kind!r}; expected memory or redis")
