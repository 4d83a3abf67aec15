"""Start-up refusals for set-ups the in-process run backend cannot serve safely.

With ``RUN_BACKEND=memory`` a run lives in one worker's memory: a second worker (or a
second server on the same data directory) would answer resumes and stops for runs it does
not hold. The master claims the data directory with an exclusive ``flock`` that it keeps
through reloads; a second master on the same directory is refused.
"""

from __future__ import annotations

import fcntl
import os
from typing import IO, Optional, Tuple

LOCK_NAME = ".odysseus-server.lock"


def worker_refusal(config: dict, workers: int) -> Optional[str]:
    """Why ``workers`` processes cannot run with this backend, or None."""
    if workers > 1 and config.get("RUN_BACKEND", "memory") == "memory":
        return (f"refusing to start {workers} workers with the in-process run backend: a resume or stop could "
                "land on a worker that does not hold the run. Use ODYSSEUS_WORKERS=1 (the default).")
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
        return None, (f"refusing to start: another Odysseus server already serves the data directory {data_dir!r} "
                      "with the in-process run backend (two processes would both own its runs)")
    handle.seek(0)
    handle.truncate()
    handle.write(str(os.getpid()))
    handle.flush()
    return handle, None
