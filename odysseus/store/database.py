"""Opening the SQLite file: WAL mode, migrations, one connection guarded by a lock.

Greenlets do not switch inside sqlite3 calls, and with real threads the lock
serialises access, so one connection per process is enough and keeps writes ordered.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from contextlib import contextmanager
from typing import Iterator

from sqlite_utils import Database

from .migrations import migrate


def open_database(path: str) -> Database:
    """Open (creating) the database at ``path`` with WAL and all migrations applied."""
    if path != ":memory:":
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    conn = sqlite3.connect(path, check_same_thread=False, timeout=30)
    db = Database(conn)
    if path != ":memory:":
        db.enable_wal()
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA foreign_keys=ON")
    migrate(db)
    return db


class Locked:
    """A Database with the lock every repository takes around its statements."""

    def __init__(self, db: Database):
        self.db = db
        self.lock = threading.RLock()

    @contextmanager
    def tx(self) -> Iterator[Database]:
        """Hold the lock and run inside one transaction."""
        with self.lock:
            with self.db.conn:
                yield self.db

    @contextmanager
    def read(self) -> Iterator[Database]:
        """Hold the lock for reads."""
        with self.lock:
            yield self.db
