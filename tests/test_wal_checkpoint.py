"""The WAL is checkpointed by the durable writer's native thread, not by a commit on the request path (issue 22).

SQLite checkpoints on whichever connection's commit takes the WAL past ``wal_autocheckpoint`` pages; on
the request-path connection that commit runs on the gevent hub and copies thousands of pages while
every stream waits. The request path's mark is a far backstop; the writer keeps SQLite's default.
"""

from __future__ import annotations

import sqlite3

from odysseus.store import Store
from odysseus.store.database import HUB_WAL_AUTOCHECKPOINT, connect


def wal_frames(path: str) -> int:
    """Frames in the WAL now (a passive checkpoint from a fresh connection reports them)."""
    conn = sqlite3.connect(path)
    try:
        return conn.execute("pragma wal_checkpoint(PASSIVE)").fetchone()[1]
    finally:
        conn.close()


def test_request_path_commits_leave_the_checkpoint_to_the_writer(tmp_path):
    path = str(tmp_path / "odysseus.db")
    store = Store(path)
    try:
        hub = store.locked.db.conn
        assert hub.execute("pragma wal_autocheckpoint").fetchone()[0] == HUB_WAL_AUTOCHECKPOINT > 1000
        session = store.sessions.create("u")
        for i in range(60):  # ~60 commits of ~25 pages each: past SQLite's 1000-page mark
            store.messages.add("u", session["id"], "user", f"{i} " + "x" * 100_000)
        frames = wal_frames(path)  # had a hub commit checkpointed, the WAL would have restarted below 1000
        assert frames > 1000, frames
        writer = connect(path, busy_ms=1000)  # what the durable writer opens: SQLite's default mark
        try:
            assert writer.execute("pragma wal_autocheckpoint").fetchone()[0] == 1000
        finally:
            writer.close()
        assert [m["content"][:3] for m in store.messages.recent("u", session["id"], 2)] == ["58 ", "59 "]
    finally:
        store.close()
