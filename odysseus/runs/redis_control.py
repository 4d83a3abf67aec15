"""Steering runs across workers through Redis: session locks, run leases, stop/cancel messages.

- **Session lock** ``<prefix>lock:<owner>:<session>``: ``SET NX PX`` with a random token,
  released only by its holder (compare-and-delete); it expires after
  ``SESSION_LOCK_SECONDS`` so a worker that died holding it blocks nobody for long.
- **Lease** ``<prefix>lease:<run_id>`` = the driving worker's identity, renewed every third
  of ``RUN_LEASE_SECONDS`` while the run is live and deleted when it ends. A run with a
  lease is never recovered; without one, the SQLite lease decides (``durable.recover``).
- **Control** ``<prefix>ctl:<worker>``: a pub/sub channel per worker. A stop or cancel that
  lands on another worker is published there (and re-published until the run's row says it
  ended); the owner cancels the run's token, which closes the provider connection.
"""

from __future__ import annotations

import contextlib
import json
import logging
import secrets
import threading
import time
from typing import Any, Callable, Dict, Iterator, Optional

from .backend import BackendUnavailable

#: a ``redis.Redis`` made by ``redis_backend.connect_redis`` (decode_responses: every reply is a str,
#: which redis-py's own annotations, ``bytes | str``, cannot say)
RedisClient = Any

log = logging.getLogger(__name__)

_RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"


@contextlib.contextmanager
def session_lock(client: RedisClient, prefix: str, owner: str, session_id: str, seconds: float) -> Iterator[None]:
    """Hold the session's start lock across every worker (waits up to ``seconds`` for it)."""
    key = f"{prefix}lock:{owner}:{session_id}"
    token = secrets.token_hex(8)
    deadline = time.monotonic() + seconds
    pause = 0.005
    try:
        while not client.set(key, token, nx=True, px=int(seconds * 1000)):
            if time.monotonic() > deadline:
                raise BackendUnavailable("this session is busy starting another turn; try again")
            time.sleep(pause)
            pause = min(0.05, pause * 2)
    except BackendUnavailable:
        raise
    except Exception as exc:  # noqa: BLE001 - Redis down: refuse the start (nothing stored yet)
        raise BackendUnavailable(f"the run backend (Redis) is unavailable: {type(exc).__name__}") from None
    try:
        yield
    finally:
        with contextlib.suppress(Exception):
            client.eval(_RELEASE, 1, key, token)


class Leases:
    """This worker's leases on the runs it drives, renewed in the background."""

    def __init__(
        self, client: RedisClient, prefix: str, worker: str, seconds: float, queue: Optional[Callable[..., None]] = None
    ):
        self.client = client
        self.prefix = prefix
        self.worker = worker
        self.ms = max(1000, int(seconds * 1000))
        self.held: Dict[str, float] = {}
        self.failures = 0
        # queue(*command): send a command with the stream writer's next pipeline (None: one round trip each)
        self.queue = queue

    def key(self, run_id: str) -> str:
        """The lease key of a run."""
        return f"{self.prefix}lease:{run_id}"

    def take(self, run_id: str) -> None:
        """Lease a run this worker starts driving (a Redis failure is retried by ``renew``)."""
        self.held[run_id] = time.monotonic()
        if self.queue is not None:
            self.queue("SET", self.key(run_id), self.worker, "PX", self.ms)
            return
        with contextlib.suppress(Exception):
            self.client.set(self.key(run_id), self.worker, px=self.ms)

    def drop(self, run_id: str) -> None:
        """The run ended here: give the lease up."""
        self.held.pop(run_id, None)
        if self.queue is not None:
            self.queue("DEL", self.key(run_id))
            return
        with contextlib.suppress(Exception):
            self.client.delete(self.key(run_id))

    def renew(self) -> None:
        """Extend every held lease (called every third of the lease)."""
        if not self.held:
            return
        pipe = self.client.pipeline(transaction=False)
        for run_id in list(self.held):
            pipe.set(self.key(run_id), self.worker, px=self.ms)
        try:
            pipe.execute()
        except Exception:  # noqa: BLE001 - the SQLite lease still protects the run meanwhile
            self.failures += 1

    def holder(self, run_id: str) -> Optional[str]:
        """The worker holding a run's lease, or None."""
        holder: Optional[str] = self.client.get(self.key(run_id))
        return holder


def channel(prefix: str, worker: str) -> str:
    """A worker's control channel."""
    return f"{prefix}ctl:{worker}"


def publish_stop(client: RedisClient, prefix: str, worker: str, run_id: str, reason: str) -> int:
    """Ask ``worker`` to stop ``run_id``; the number of workers that heard it (0 or 1)."""
    return int(client.publish(channel(prefix, worker), json.dumps({"run_id": run_id, "reason": reason})))


class ControlListener:
    """Receives stop/cancel messages for this worker's runs and hands them to ``on_stop``."""

    def __init__(self, client: RedisClient, prefix: str, worker: str, on_stop: Callable[[str, str], None]):
        self.client = client
        self.channel = channel(prefix, worker)
        self.on_stop = on_stop
        self._thread: Optional[threading.Thread] = None
        self._closing = False
        self.received = 0
        self.reconnects = 0
        self.subscribed = threading.Event()

    def start(self) -> None:
        """Listen in the background (a greenlet under gevent); reconnects after Redis restarts."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="redis-control", daemon=True)
            self._thread.start()

    def close(self) -> None:
        """Stop listening."""
        self._closing = True

    def _loop(self) -> None:
        while not self._closing:
            pubsub = self.client.pubsub(ignore_subscribe_messages=True)
            try:
                pubsub.subscribe(self.channel)
                self.subscribed.set()
                while not self._closing:
                    message = pubsub.get_message(timeout=1.0)
                    if message and message.get("type") == "message":
                        self._handle(message.get("data"))
            except Exception as exc:  # noqa: BLE001 - Redis restarted: subscribe again
                self.subscribed.clear()
                self.reconnects += 1
                log.warning("control channel lost (%s); reconnecting", exc)
                time.sleep(0.5)
            finally:
                with contextlib.suppress(Exception):
                    pubsub.close()

    def _handle(self, data: str) -> None:
        try:
            body = json.loads(data)
            run_id, reason = str(body["run_id"]), str(body.get("reason") or "stopped")
        except (TypeError, ValueError, KeyError):
            return
        self.received += 1
        # _end waits for the run to settle: never inside the listener loop
        threading.Thread(target=self.on_stop, args=(run_id, reason), daemon=True).start()
