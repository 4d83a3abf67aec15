"""The WAL is checkpointed by the durable writer's native thread, not by a commit on the request path (issue 22).

SQLite checkpoints on whichever connection's commit takes the WAL past ``wal_autocheckpoint`` pages; on
the request-path connection that commit runs on the gevent hub and copies thousands of pages while
every stream waits. The request path's mark is a far backstop; the writer keeps SQLite's default, and
the janitor's periodic PASSIVE checkpoint (on the writer's thread) covers a server that writes no turns.
"""

from __future__ import annotations

import sqlite3

from waiting import wait_for

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


def test_the_janitors_checkpoint_keeps_the_wal_small_when_only_the_request_path_writes(tmp_path):
    """No turns: the writer's own commits never cross its mark, so the janitor's PASSIVE checkpoint must."""
    from odysseus.config import DEFAULTS
    from odysseus.runs.durable import DurableLog

    path = str(tmp_path / "odysseus.db")
    store = Store(path)
    durable = DurableLog(path, dict(DEFAULTS), "w1")
    try:
        session = store.sessions.create("u")
        for i in range(60):  # past SQLite's 1000-page mark, all on the request path
            store.messages.add("u", session["id"], "user", f"{i} " + "x" * 100_000)
        frames, done = durable.checkpoint()
        assert frames > 1000 and done == frames  # every frame copied back: nothing reads an old snapshot
        store.messages.add("u", session["id"], "user", "after")  # the next commit starts the WAL over
        assert wal_frames(path) < 100
        assert store.messages.recent("u", session["id"], 1)[0]["content"] == "after"
    finally:
        durable.close()
        store.close()


def test_the_janitor_checkpoints_with_its_lease_cycle(tmp_path):
    from apphelpers import close_app

    from odysseus import create_app

    app = create_app({"DATA_DIR": str(tmp_path), "AUTH": "none", "RUN_LEASE_SECONDS": 0.4})
    engine = app.extensions["odysseus.runs"]
    calls = []
    checkpoint = engine.durable.checkpoint
    engine.durable.checkpoint = lambda: calls.append(1) or checkpoint()
    try:
        engine.start_background()
        wait_for(lambda: len(calls) >= 2, 10, what="two janitor checkpoints")
    finally:
        close_app(app)
