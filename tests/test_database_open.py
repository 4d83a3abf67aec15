"""Opening the database while another process holds it locked for a moment (a second worker booting while the
first switches the file to WAL and migrates): the open waits for the lock instead of failing the boot."""

from __future__ import annotations

import sqlite3
import threading
import time

from odysseus.store.database import open_database


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
