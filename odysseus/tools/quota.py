"""The code tools' disk quota: how large one call's /workspace may be, and what "workspace full" says.

Three limits (config keys): ``WORKSPACE_MAX_BYTES`` and ``WORKSPACE_MAX_FILES`` per session
workspace, and ``WORKSPACE_USER_MAX_BYTES`` for all of one user's session workspaces together.
Before a call, ``plan`` measures the user's *other* workspaces on the host (``measure`` below,
the same count the sandbox uses: ``workspace_child.charge``) and this one; the call gets

    limit = min(WORKSPACE_MAX_BYTES, WORKSPACE_USER_MAX_BYTES - the other workspaces)

and a tmpfs of ``limit`` (or this workspace's current size when that is larger, so an over-full
workspace can still be loaded and cleaned up) plus one block, so a write past the limit gets
ENOSPC. ``workspace_child`` saves the result only within ``limit`` and ``WORKSPACE_MAX_FILES``.

The walks run off the gevent hub (``runs.native.offload``) and are bounded: every entry counts at
least 4 KiB, and a walk stops once it has counted past what it needs, so it visits at most
``WORKSPACE_USER_MAX_BYTES / 4 KiB`` entries per workspace (and the sum stops past that too).
Sizes of other workspaces are cached for ``CACHE_SECONDS``; a saved call updates its own entry.
Calls of one user running at the same time are each checked against the sizes measured before
they started, so together they can overshoot the per-user total by at most one workspace's
limit per extra concurrent call.
"""

from __future__ import annotations

import os
import stat
import time
from dataclasses import dataclass
from typing import Dict, Tuple

from ..runs.native import offload
from .workspace_child import BLOCK, MAX_DEPTH, Full, Tally, measure

#: how long a measured size of another workspace is trusted
CACHE_SECONDS = 10.0
MiB = 1024 * 1024

#: (workspace path, stop) -> (measured at, bytes counted, at most stop + one entry)
_SIZES: Dict[Tuple[str, int], Tuple[float, int]] = {}


@dataclass(frozen=True)
class WorkspaceQuota:
    """The configured limits."""

    max_bytes: int = 256 * MiB
    max_files: int = 10_000
    user_max_bytes: int = 1024 * MiB

    @classmethod
    def from_config(cls, config: dict) -> "WorkspaceQuota":
        """The limits from the app config (the defaults above when a key is missing)."""
        return cls(
            max_bytes=max(0, int(config.get("WORKSPACE_MAX_BYTES", cls.max_bytes))),
            max_files=max(0, int(config.get("WORKSPACE_MAX_FILES", cls.max_files))),
            user_max_bytes=max(0, int(config.get("WORKSPACE_USER_MAX_BYTES", cls.user_max_bytes))),
        )


@dataclass(frozen=True)
class QuotaPlan:
    """One call's limits: what it may save, how large its tmpfs is, and why the limit is what it is."""

    limit_bytes: int
    mount_bytes: int
    #: the bytes the user's other workspaces hold (counted up to the per-user total)
    others_bytes: int
    #: True when the per-user total, not the per-workspace limit, is the tighter one
    by_user: bool


def measure_bytes(path: str, stop: int) -> int:
    """What the directory ``path`` counts against the quota; the walk ends once past ``stop``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return 0
    tally = Tally(max_bytes=stop)
    try:
        measure(fd, tally)
    except Full:
        pass
    except OSError:
        pass  # a directory removed while we walked it (its session deleted) counts what was seen
    finally:
        os.close(fd)
    return tally.bytes


def _cached_bytes(path: str, stop: int, now: float) -> int:
    hit = _SIZES.get((path, stop))
    if hit is not None and now - hit[0] < CACHE_SECONDS:
        return hit[1]
    size = measure_bytes(path, stop)
    _SIZES[(path, stop)] = (now, size)
    return size


def others_bytes(owner_dir: str, session: str, stop: int) -> int:
    """What the owner's workspaces other than ``session`` hold together, counted until past ``stop``."""
    total, now = 0, time.monotonic()
    try:
        names = sorted(os.listdir(owner_dir))
    except OSError:
        return 0
    for name in names:
        if name == session or total > stop:
            continue
        path = os.path.join(owner_dir, name)
        try:
            if not stat.S_ISDIR(os.lstat(path).st_mode):
                continue
        except OSError:
            continue
        total += _cached_bytes(path, stop, now)
    return total


def _plan(quota: WorkspaceQuota, workspace: str) -> QuotaPlan:
    owner_dir, session = os.path.split(workspace.rstrip(os.sep))
    others = others_bytes(owner_dir, session, quota.user_max_bytes)
    room = max(0, quota.user_max_bytes - others)
    limit = min(quota.max_bytes, room)
    current = measure_bytes(workspace, quota.max_bytes)
    mount = max(limit, min(current, quota.max_bytes)) + BLOCK
    return QuotaPlan(limit, mount, min(others, quota.user_max_bytes), room < quota.max_bytes)


def plan(quota: WorkspaceQuota, workspace: str) -> QuotaPlan:
    """The limits of one call in the session workspace ``workspace`` (walks in a thread, off the hub)."""
    return offload(_plan, quota, workspace)


def saved(workspace: str, quota: WorkspaceQuota, size: int) -> None:
    """A call saved ``workspace`` at ``size`` bytes: the next plan of another session need not walk it."""
    _SIZES[(workspace.rstrip(os.sep), quota.user_max_bytes)] = (time.monotonic(), size)


def human(size: int) -> str:
    """``size`` bytes for a person: 512 KiB, 2 MiB, 1.5 GiB."""
    for unit, scale in (("GiB", 1024**3), ("MiB", MiB), ("KiB", 1024)):
        if size >= scale:
            value = size / scale
            return f"{value:.0f} {unit}" if value == int(value) or value >= 100 else f"{value:.1f} {unit}"
    return f"{size} bytes"


def full_message(report: dict, quota: WorkspaceQuota, limits: QuotaPlan) -> str:
    """The error of a call past its quota: ``workspace full: <what> (limit ...)``, and what was not done."""
    kind, loading = report.get("full"), report.get("phase") == "load"
    if limits.by_user:
        limit = (
            f"limit {human(quota.user_max_bytes)} for all your workspaces together, "
            f"{human(limits.others_bytes)} of it in your other chats"
        )
    else:
        limit = f"limit {human(quota.max_bytes)} per workspace"
    size = limits.limit_bytes if not loading else max(limits.limit_bytes, limits.mount_bytes - BLOCK)
    if kind == "files":
        what, limit = f"more than {quota.max_files} files and folders", f"limit {quota.max_files}"
    elif kind == "depth":
        what, limit = "folders nested too deep", f"limit {MAX_DEPTH} levels"
    elif kind == "space":
        what = "no space left"
    else:
        what = f"more than {human(size)}"
    if loading:
        return f"workspace full: this chat's workspace already holds {what} ({limit}); the command was not run"
    if kind == "space":
        return f"workspace full: no space left in /workspace ({limit}); nothing this call wrote was saved"
    return f"workspace full: /workspace would hold {what} ({limit}); nothing this call wrote was saved"
