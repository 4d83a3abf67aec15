"""Opening the SQLite file: WAL mode, migrations, and the transaction discipline every repository uses.

Invariants:

- ``Locked.tx()`` is ONE real transaction: an explicit ``BEGIN IMMEDIATE`` ... ``COMMIT`` on
  the connection (sqlite-utils' own writes nest inside it as savepoints, and its
  ``execute()`` does not commit while a transaction is open). Everything written inside the
  block is committed together or rolled back together.
- The gevent hub never sits in SQLite's busy wait for the write lock: ``BEGIN IMMEDIATE`` is
  tried with a busy timeout of 0 and retried with a cooperative sleep between attempts while
  another connection (the durable writer, another process) holds the write lock, and the
  ``Locked`` lock is let go during each sleep, so the other greenlets' reads go on meanwhile. A
  write inside an HTTP request waits at most ``REQUEST_WRITE_WAIT`` (``limit_write_wait``) and then
  raises ``DatabaseBusy`` (a 503 with ``Retry-After``); other writers wait ``WRITE_LOCK_WAIT``. The
  request-path connection's short busy timeout (``HUB_BUSY_MS``) is left for its other
  statements. Reads in
  WAL mode never wait for writers. Bulk writes (the run event log) use their own
  connection on a native thread (``odysseus.runs.durable``), which is also where the WAL is
  checkpointed: by its commits, and by the janitor's PASSIVE checkpoint every few seconds when only
  the request path writes (the request-path connection's automatic checkpoint is only a far backstop).
- Several processes may open one file at once: migrations run under an exclusive lock, so
  one process migrates and the others wait for it and then find nothing to do.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Callable, Iterator, List, Optional, Protocol, Sequence

from sqlite_utils import Database

from ..errors import DatabaseBusy
from .migrations import migrate

#: busy timeout of the request-path connection: the longest the hub can sit in one SQLite call
HUB_BUSY_MS = 20
#: how long a request-path write keeps retrying a lock another process holds
WRITE_LOCK_WAIT = 30.0
#: [startpath, issue 22] WAL pages after which a request-path commit checkpoints. The durable writer's
#: connection (a native thread) keeps SQLite's 1000 and commits every turn, so it is the one that
#: checkpoints; a commit on the hub did it whenever it happened to cross the mark (a stall of several
#: ms for every stream). This is only the backstop for a server whose writer stays idle.
HUB_WAL_AUTOCHECKPOINT = 20000


class Executes(Protocol):
    """What a reader of rows needs: a sqlite3 connection, a sqlite-utils ``Database`` or a wrapper."""

    def execute(self, sql: str, parameters: Any = ..., /) -> sqlite3.Cursor:
        """Run one statement and return its cursor."""
        ...


#: how long a write may wait for the lock in this greenlet (None: the Locked's own ``write_wait``)
_WRITE_WAIT: ContextVar[Optional[float]] = ContextVar("odysseus_write_wait", default=None)


def limit_write_wait(seconds: Optional[float]) -> None:
    """Let this greenlet's writes wait at most ``seconds`` for an outside lock (an HTTP request's, so a
    locked database answers a quick 503 instead of holding the request); None: the default again.

    A greenlet spawned later (a run, a job) starts with its own empty context, so it keeps the default."""
    _WRITE_WAIT.set(seconds)


@contextmanager
def write_wait_at_most(seconds: float) -> Iterator[None]:
    """Inside the block, this greenlet's writes wait at most ``seconds`` for an outside lock (then as before)."""
    token = _WRITE_WAIT.set(seconds)
    try:
        yield
    finally:
        _WRITE_WAIT.reset(token)


def connect(path: str, busy_ms: int) -> sqlite3.Connection:
    """A connection with our pragmas (WAL, NORMAL sync, foreign keys) and the given busy timeout."""
    if path != ":memory:":
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    conn = sqlite3.connect(path, check_same_thread=False, timeout=busy_ms / 1000)
    try:
        conn.execute(f"PRAGMA busy_timeout={int(busy_ms)}")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
    except BaseException:
        conn.close()
        raise
    return conn


def try_begin_immediate(conn: sqlite3.Connection) -> bool:
    """One ``BEGIN IMMEDIATE`` attempt with no busy wait: True when this connection now holds the write lock."""
    conn.execute("PRAGMA busy_timeout=0")
    try:
        conn.execute("BEGIN IMMEDIATE")
        return True
    except sqlite3.OperationalError as exc:
        if "locked" not in str(exc) and "busy" not in str(exc):
            raise
        return False


def begin_immediate(conn: sqlite3.Connection, wait: float, sleep=time.sleep, busy_ms: Optional[int] = None) -> None:
    """``BEGIN IMMEDIATE``, retried (sleeping cooperatively) while another writer holds the lock.

    With ``busy_ms`` (the connection's own busy timeout) each attempt is made with a busy timeout of
    0, then ``busy_ms`` is restored: SQLite's busy handler sleeps in C (1, 2, 5, 10 ms...), which on
    the gevent hub stopped every stream for up to 18 ms each time the durable writer was committing.
    The pauses between attempts are ``sleep``'s (gevent's, under the monkey patch), from 1 ms.
    """
    deadline = time.monotonic() + wait
    pause = 0.001 if busy_ms is not None else 0.005
    if busy_ms is not None:
        conn.execute("PRAGMA busy_timeout=0")
    try:
        while True:
            try:
                conn.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise
                if time.monotonic() >= deadline:
                    raise DatabaseBusy("the database stayed locked by another process") from exc
                sleep(pause)
                pause = min(pause * 2, 0.05)
    finally:
        if busy_ms is not None:
            conn.execute(f"PRAGMA busy_timeout={int(busy_ms)}")


def select_rows(db, sql: str, params: Sequence = ()) -> List[dict]:
    """The rows of one plain SELECT as dicts (column name -> value), like sqlite-utils' ``rows_where``.

    For the request path: ``db["table"]`` and ``rows_where`` each ask ``sqlite_master`` first
    (is it a view? does the table exist?), two extra statements per read; this runs only ``sql``.
    """
    cursor = db.execute(sql, list(params))
    columns = [d[0] for d in cursor.description]
    return [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]


def open_database(path: str) -> Database:
    """Open (creating) the database at ``path`` with WAL and all migrations applied."""
    # a second worker booting while the first switches the file to WAL finds it locked for a moment
    conn = _with_lock_retry(lambda: connect(path, busy_ms=HUB_BUSY_MS))
    conn.execute(f"PRAGMA wal_autocheckpoint={HUB_WAL_AUTOCHECKPOINT}")
    db = Database(conn)
    if path != ":memory:":
        _with_lock_retry(lambda: db.enable_wal())
    _migrate_exclusively(conn, db)
    return db


def _with_lock_retry(fn, wait: float = WRITE_LOCK_WAIT):
    deadline = time.monotonic() + wait
    while True:
        try:
            return fn()
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.05)


def _migrate_exclusively(conn: sqlite3.Connection, db: Database) -> None:
    """Apply migrations holding the write lock, so concurrent first boots cannot race."""
    begin_immediate(conn, WRITE_LOCK_WAIT)
    try:
        migrate(db)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


class Locked:
    """A Database with the lock every repository takes around its statements."""

    def __init__(self, db: Database, write_wait: float = WRITE_LOCK_WAIT, busy_ms: int = HUB_BUSY_MS):
        self.db = db
        self.busy_ms = busy_ms  # the connection's busy timeout, restored after each BEGIN (begin_immediate)
        self.lock = threading.RLock()
        self.write_wait = write_wait
        self._depth = 0

    @contextmanager
    def tx(self) -> Iterator[Database]:
        """Hold the lock and run inside one real transaction (nested calls join the outer one)."""
        self._acquire_for_write()
        try:
            if self._depth:
                self._depth += 1
                try:
                    yield self.db
                finally:
                    self._depth -= 1
                return
            conn = self.db.conn
            self._depth = 1
            try:
                yield self.db
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            finally:
                self._depth = 0
            if not conn.in_transaction:
                raise RuntimeError("a statement ended the transaction early; nothing after it is atomic")
            conn.execute("COMMIT")
        finally:
            self.lock.release()

    def _acquire_for_write(self) -> None:
        """Take the lock, and (outermost) the database's write lock with ``BEGIN IMMEDIATE``.

        While another connection holds the write lock, each attempt lets go of ``self.lock`` before
        sleeping, so reads of other greenlets are not held behind a wait that may last seconds.
        Raises DatabaseBusy past this greenlet's write wait (``limit_write_wait``)."""
        wait = _WRITE_WAIT.get()
        deadline = time.monotonic() + (self.write_wait if wait is None else wait)
        pause = 0.001
        while True:
            self.lock.acquire()
            if self._depth:  # nested: the outer tx already holds the write lock
                return
            try:
                if try_begin_immediate(self.db.conn):
                    return
            except BaseException:
                self.lock.release()
                raise
            finally:
                self.db.conn.execute(f"PRAGMA busy_timeout={int(self.busy_ms)}")
            self.lock.release()
            if time.monotonic() >= deadline:
                raise DatabaseBusy("the database is locked by another process; try again shortly")
            time.sleep(pause)  # gevent's sleep under the monkey patch: the hub serves others
            pause = min(pause * 2, 0.05)

    @contextmanager
    def read(self) -> Iterator[Database]:
        """Hold the lock for reads."""
        with self.lock:
            yield self.db

    def trace(self, callback: Optional[Callable[[str], None]]) -> None:
        """Record every statement the request-path connection runs (tests).

        Swapped under the lock: ``set_trace_callback`` takes the connection's SQLite mutex while
        holding the GIL, and a thread inside a statement holds that mutex and needs the GIL to call
        the old callback, so a swap during another thread's statement deadlocks both.
        """
        with self.lock:
            self.db.conn.set_trace_callback(callback)
