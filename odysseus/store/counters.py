"""Version counters in the ``settings`` table: a write bumps one, and every worker compares it with
the value it last read to tell that its copy (provider connections, MCP servers) is stale."""

from __future__ import annotations

from typing import Any

from .database import Locked


def read_counter(locked: Locked, key: str) -> int:
    """The counter ``key`` (0 before its first bump)."""
    with locked.read() as db:
        row = db.execute("select value from settings where key = ?", [key]).fetchone()
    return int(row[0]) if row else 0


def bump_counter(db: Any, key: str) -> None:
    """Add one to the counter ``key`` inside the caller's write transaction ``db``."""
    db.execute(
        "insert into settings (key, value) values (?, '1') on conflict(key) do update"
        " set value = cast(cast(value as integer) + 1 as text)",
        [key],
    )
