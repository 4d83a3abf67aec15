"""Start-up refusals for set-ups the run backend cannot serve safely, and the default worker count.

With ``RUN_BACKEND=memory`` a run lives in one worker's memory: a second worker (or a
second server on the same data directory) would answer resumes and stops for runs it does
not hold. ``RUN_BACKEND=redis`` shares runs through Redis and allows any number of
workers (default: one per core); it is refused when Redis cannot be reached.

The master claims the data directory with an exclusive ``flock`` that it keeps
through reloads; a second master on the same directory is refused.
"""

from __future__ import annotations

import fcntl
import os
from typing import IO, Optional, Tuple

LOCK_NAME = ".odysseus-server.lock"


def default_workers(config: dict) -> int:
    """``ODYSSEUS_WORKERS`` when set; else every core with the Redis backend, one with the in-process one."""
    raw = os.environ.get("ODYSSEUS_WORKERS", "").strip()
    if raw:
        return max(1, int(raw))
    if config.get("RUN_BACKEND", "memory") == "redis":
        return max(1, os.cpu_count() or 1)
    return 1


def worker_refusal(config: dict, workers: int) -> Optional[str]:
    """Why ``workers`` processes cannot run with this backend, or None."""
    if workers > 1 and config.get("RUN_BACKEND", "memory") == "memory":
        return (
            f"refusing to start {workers} workers with the in-process run backend: a resume or stop could "
            "land on a worker that does not hold the run. Use ODYSSEUS_WORKERS=1 (the default)."
        )
    return None


def redis_refusal(config: dict) -> Optional[str]:
    """Why the server cannot start with this Redis configuration, or None (checked by gunicorn's master)."""
    if config.get("RUN_BACKEND", "memory") != "redis":
        return None
    if not config.get("REDIS_URL"):
        return "RUN_BACKEND=redis needs REDIS_URL (for example redis://127.0.0.1:6379/0)"
    import redis

    try:
        redis.Redis.from_url(config["REDIS_URL"], socket_connect_timeout=2, socket_timeout=2).ping()
    except Exception as exc:  # noqa: BLE001 - any failure is a reason not to start
        return f"refusing to start: cannot reach Redis at REDIS_URL ({type(exc).__name__}: {exc})"
    return None


def claim_data_dir(config: dict) -> Tuple[Optional[IO], Optional[str]]:
    """Hold the data directory's server lock; (None, reason) when another live server holds it."""
    if config.get("RUN_BACKEND", "memory") != "memory":
        return None, None
    data_dir = config["DATA_DIR"]
    os.makedirs(data_dir, exist_ok=True)
    handle = open(os.path.join(data_dir, LOCK_NAME), "a+")
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None, (
            f"refusing to start: another Odysseus server already serves the data directory {data_dir!r} "
            "with the in-process run backend (two processes would both own its runs)"
        )
    handle.seek(0)
    handle.truncate()
    handle.write(str(os.getpid()))
    handle.flush()
    return handle, None
