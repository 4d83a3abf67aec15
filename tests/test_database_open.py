"""Opening the database while another process holds it locked for a moment (a second worker booting while the
first switches the file to WAL and migrates): the open waits for the lock instead of failing the boot."""

from __future__ import annotations

import sqlite3
import threading
import time

from odysseus.store.database import HUB_BUSY_MS, Locked, open_database


def test_an_open_waits_for_a_short_exclusive_lock_instead_of_failing(tmp_path):
    path = str(tmp_path / "odysseus.db")
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("create table t(x)")
    holder.execute("BEGIN EXCLUSIVE")  # what the journal-mode switch holds
    release = threading.Timer(0.3, lambda: holder.execute("COMMIT"))
    release.start()
    began = time.monotonic()
    try:
        db = open_database(path)  # failed at once with "database is locked" (its first PRAGMA)
        assert time.monotonic() - began >= 0.2
        assert db.execute("pragma journal_mode").fetchone()[0] == "wal"
        db.conn.close()
    finally:
        release.join()
        holder.close()


def test_waiting_for_the_write_lock_never_sleeps_inside_sqlite(tmp_path):
    """The hub's BEGIN IMMEDIATE fails at once while another connection writes, and waits between tries in
    Python (gevent's sleep on the server): SQLite's own busy wait (1 + 2 + 5 + 10 ms in C, with the 20 ms
    busy timeout) stopped every greenlet of the worker each time the durable writer committed."""
    path = str(tmp_path / "odysseus.db")
    locked = Locked(open_database(path))
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")  # the durable writer's group commit, for a moment
    release = threading.Timer(0.25, lambda: holder.execute("COMMIT"))
    attempts: list = []
    locked.db.conn.set_trace_callback(
        lambda sql: attempts.append(time.monotonic()) if sql == "BEGIN IMMEDIATE" else None
    )
    release.start()
    try:
        with locked.tx() as db:
            db.execute("create table t(x)")
    finally:
        release.join()
        locked.db.conn.set_trace_callback(None)
        holder.close()
    assert len(attempts) >= 4
    assert attempts[1] - attempts[0] < 0.010  # the first retry after ~1 ms: no busy wait inside SQLite
    assert locked.db.execute("pragma busy_timeout").fetchone()[0] == HUB_BUSY_MS  # restored for other statements
    assert locked.db.execute("select count(*) from t").fetchone()[0] == 0
