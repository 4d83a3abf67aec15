"""Which process drives a run or job: ``<boot id>:<pid>``, and whether that process is visibly gone."""

from __future__ import annotations

import os
from typing import Optional


def worker_identity() -> str:
    """``<boot id>:<pid>``: which process on which boot drives a run."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as fh:
            boot = fh.read().strip()
    except OSError:
        boot = "unknown-boot"
    return f"{boot}:{os.getpid()}"


def worker_is_dead(worker: Optional[str], me: str) -> bool:
    """True when ``worker`` ran on this boot and its pid is gone (a crash we can see at once)."""
    if not worker or ":" not in worker:
        return True
    boot, _, pid = worker.rpartition(":")
    my_boot = me.rpartition(":")[0]
    if boot != my_boot or not pid.isdigit():
        return False
    if int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return _is_zombie(int(pid))


def _is_zombie(pid: int) -> bool:
    """A killed process nobody has reaped yet (PID 1 in a container may never reap it) is dead too."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return False
