"""The durable run log: every logged event written through to SQLite by one native thread.

Invariants:

- Every event a run logs is queued here with the exact payload text the memory log holds,
  and written to ``run_events``; a run's consecutive events of one write share one row
  (``event_packs``: SQLite's cost is per row). Events are written in the order they were
  logged, so if seq N of a run is durable, every seq below it is too. Every reader goes
  through ``event_packs`` (``read_events``, ``read_tail``, recovery).
- One native thread (``NativeWorker``) owns the writer connection and does every write of
  the engine: group commits of pending events at most every ``EVENT_FLUSH_INTERVAL``
  seconds, lease renewal, final saves, recovery and purging. The gevent hub never waits
  on SQLite for these; callers wait cooperatively for a final save's result.
- [issue 40] Under gevent a final save runs on the hub instead, on the request-path connection
  (``use_hub``: the one the start transaction uses), when it can: handing it to the native thread
  cost a cross-thread wake-up and a GIL hand-over each way, about a fifth of a one-token turn's
  worker CPU. The hub then takes the pending events itself while holding ``_taking``, a real
  (not gevent) lock the native thread holds from taking rows to their commit, so a run's tail
  never commits while its earlier events sit in an uncommitted writer transaction; when the
  writer holds it (mid-flush) or has rows to retry, the save goes to the native thread as before.
- A final save is one transaction: the run's pending events, the assistant message, the
  run row's final status and the terminal tail (``message_saved``, terminal record,
  ``done``/``error``, ``close``). It is conditional (``where status = 'running'``), so
  two writers (a live worker and a recovering one) can never save one reply twice.
  Final saves queued together (a burst of runs ending at once) share one transaction
  (group commit: the COMMIT is most of a save's cost), each in its own savepoint: each is
  still claimed on its own, and one that fails is rolled back alone and told so, while
  the others commit.
- A write that fails (lock held elsewhere, disk full) keeps its events queued and is
  retried on the next flush; ``stats()`` reports the backlog for ``/api/health``.
- A recovered run's tail is numbered past every id its dead worker could have sent (the
  run log's cap, ``RUN_MAX_EVENTS``, plus its lifecycle events), not right after the last
  durable event: the events a client saw but the disk never got must not have their ids
  reused, and a client resuming with the last id it saw must still get the terminal record.
"""

from __future__ import annotations

import collections
import json
import logging
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Deque, Dict, List, Mapping, Optional, Sequence, Tuple

from ..events import CLOSE, DELTA, Event
from ..llm.text_repair import repair_text
from ..process_identity import worker_is_dead
from ..errors import DatabaseBusy
from ..store.database import Executes, Locked, connect, write_wait_at_most
from ..store.messages import insert_message
from .event_packs import INSERT, Row, iter_events, pack_rows, read_after, read_newest
from .native import NativeWorker, WorkerClosed, gevent_active, native_lock
from .run_log import LIFECYCLE, Entry, encode_payload, seq_of

log = logging.getLogger(__name__)

#: the writer connection may wait this long inside SQLite (it is a native thread: the hub is free)
WRITER_BUSY_MS = 1000


#: runs whose durable events the purge deletes: finished before the cutoff and not purged yet.
#: ``idx_runs_events_purged_finished_at`` answers it without a scan of every run (m150).
PURGE_DUE = "select run_id from runs where events_purged = 0 and finished_at < ? and status != 'running' limit ?"


@dataclass
class FinalSave:
    """What the engine asks to be saved when a run ends."""

    run_id: str
    owner: str
    session_id: str
    status: str
    stop_reason: Optional[str]
    error: Optional[str]
    content: str
    thinking: str
    metadata: Dict[str, Any]
    #: numbered after the run's last logged event; receives the saved message id
    build_tail: Callable[[Optional[int]], List[Event]]
    first_tail_seq: int
    #: the run log's base (its first event is ``base + 1``)
    base: int = 0
    #: ids left unused before the tail (a recovered run's tail jumps past what a client may have seen)
    skipped: int = 0
    #: set by the writer
    message_id: Optional[int] = None
    tail: List[Entry] = field(default_factory=list)
    saved: bool = False  # False when another writer had already finished this run


@dataclass
class _Attempt:
    """One ``save_final`` try, queued for the next group commit; its outcome is set by the batch that took it."""

    final: FinalSave
    done: bool = False
    error: Optional[BaseException] = None


def number_tail(events: List[Event], first_seq: int) -> List[Entry]:
    """The terminal tail numbered from ``first_seq`` and encoded once."""
    return [(event.numbered(first_seq + i), encode_payload(event.data)) for i, event in enumerate(events)]


class DurableLog:
    """The write-through event log and every engine write, on one native thread."""

    def __init__(self, path: str, config: Mapping[str, Any], worker: str):
        self.path = path
        self.worker = worker
        self.interval = float(config.get("EVENT_FLUSH_INTERVAL", 0.2))
        self.lease_seconds = float(config.get("RUN_LEASE_SECONDS", 15))
        self.window = float(config.get("EVICT_GRACE", 180))
        self.max_events = int(config.get("RUN_MAX_EVENTS", 100_000))
        self.enabled = bool(config.get("DURABLE_EVENTS", True))
        self._pending: Deque[Row] = collections.deque()
        self._retry: List[Row] = []  # native thread only
        self._finals: Deque[_Attempt] = collections.deque()  # final saves waiting for a group commit
        self._native = NativeWorker("run-writer")
        self._conn: Optional[sqlite3.Connection] = None  # native thread only
        self._last_renew = 0.0
        self._flusher: Optional[threading.Thread] = None
        self._closing = False
        self.written = 0
        self.final_commits = 0  # transactions that carried final saves (a group commit is one)
        self.failures = 0
        self.last_error: Optional[str] = None
        self.last_flush_at: Optional[float] = None
        self.finals_waiting = 0
        #: the request-path connection final saves use when ``use_hub`` set it (gevent), else None
        self._hub: Optional[Locked] = None
        #: held by the native thread from taking rows to their commit, and by a final save on the hub
        self._taking = native_lock()
        self.hub_finals = 0  # final saves committed on the hub's connection (of ``final_commits``)

    # ------------------------------------------------------------ hub side
    def enqueue(self, run_id: str, entry: Entry) -> None:
        """Queue one logged event for the next group commit (cheap: a deque append)."""
        if self.enabled:
            event, payload = entry
            self._pending.append((run_id, event.seq, event.type, payload))  # type: ignore[arg-type] # logged: numbered

    def use_hub(self, locked: Locked) -> None:
        """Save finals on ``locked`` (the request-path connection) when the writer holds no rows (see above)."""
        self._hub = locked

    def start(self) -> None:
        """Start the periodic flusher (a greenlet or thread that submits flushes to the native thread)."""
        if self._flusher is not None:
            return
        self._flusher = threading.Thread(target=self._flush_loop, name="run-flusher", daemon=True)
        self._flusher.start()

    def _flush_loop(self) -> None:
        while not self._closing:
            time.sleep(self.interval)
            try:
                self._native.call(self._flush_native)
            except WorkerClosed:  # closed, or an app nobody closed at the process's end: nothing can run now
                return
            except Exception:  # noqa: BLE001 - counted in stats, retried next time
                log.exception("durable flush failed")

    def flush(self, timeout: Optional[float] = None) -> None:
        """Write everything queued now (tests, shutdown)."""
        self._native.call(self._flush_native, timeout=timeout)

    def save_final(self, final: FinalSave, patience: float) -> bool:
        """Save a run's outcome and tail; True when committed within ``patience`` seconds.

        The events the run logged before are written first, in the same transaction. On a
        lock or I/O failure the save is retried until ``patience`` runs out; the caller then
        goes on in memory and ``retry_final`` keeps trying in the background.
        """
        deadline = time.monotonic() + patience
        self.finals_waiting += 1
        try:
            while True:
                try:
                    wait = max(0.0, deadline - time.monotonic())
                    if self._hub is not None and self._final_on_hub(final, self._hub, wait):
                        return True
                    attempt = _Attempt(final)
                    self._finals.append(attempt)
                    self._native.call(self._final_native, attempt, timeout=max(0.1, deadline - time.monotonic()) + 5)
                    return True
                except (sqlite3.OperationalError, TimeoutError, DatabaseBusy) as exc:
                    self._note_failure(exc)
                    if time.monotonic() >= deadline:
                        return False
                    time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))
        finally:
            self.finals_waiting -= 1

    def _final_on_hub(self, final: FinalSave, hub: Locked, wait: float) -> bool:
        """The final save in one transaction on ``hub``; False (nothing done) while the writer holds rows.

        An outside write lock is waited for at most ``wait`` seconds (what is left of the save's patience:
        then DatabaseBusy, and the caller goes on in memory while ``retry_final`` keeps trying).

        Only ``_pending`` is taken (``_retry`` belongs to the native thread: with rows there, the save
        goes to it, so they still commit before or with this tail). ``_retry`` is read after ``_taking`` is
        held: the native thread fills it only while holding that lock, so a flush that failed just before
        the acquire is seen here and not overtaken."""
        if not self._taking.acquire(False):
            return False
        try:
            if self._retry:
                return False
            rows = self._take_pending()  # ``_retry`` is empty: the pending events alone
            try:
                with write_wait_at_most(wait), hub.tx() as db:
                    tails = self._finish_row(db.conn, final)
                    # a run's tail follows its pending events: written together they pack into one row
                    self._write_rows(db.conn, rows + tails)
            except BaseException:
                self._pending.extendleft(reversed(rows))  # back in front, in order, for the next flush
                raise
        finally:
            self._taking.release()
        self.final_commits += 1
        self.hub_finals += 1
        self.written += len(rows) + len(tails)
        self.last_flush_at = time.time()
        return True

    def retry_final(self, final: FinalSave) -> None:
        """Keep retrying a final save in the background until it lands (disk full, long lock)."""

        def retry() -> None:
            while not self.save_final(final, patience=30.0):
                if self._closing:
                    return

        threading.Thread(target=retry, name=f"final-{final.run_id}", daemon=True).start()

    def write(self, statements: Sequence[Tuple[str, Sequence[Any]]], timeout: Optional[float] = None) -> List[int]:
        """Run ``statements`` as one transaction on the writer's native thread; their row counts.

        For small writes that must not run on the hub (a session's title after its first reply):
        the caller waits cooperatively, and the hub never holds SQLite's write lock for them.
        A failure rolls the transaction back and is raised to the caller (nothing is retried).
        """
        return self._native.call(self._write_native, list(statements), timeout=timeout)

    def _write_native(self, statements: List[Tuple[str, Sequence[Any]]]) -> List[int]:
        conn = self._db()
        try:
            conn.execute("BEGIN IMMEDIATE")
            counts = [conn.execute(sql, list(params)).rowcount for sql, params in statements]
            conn.execute("COMMIT")
        except Exception as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            self._note_failure(exc)
            raise
        return counts

    def recover(
        self,
        is_owned: Callable[[str], bool],
        build_tail: Callable[[Dict[str, Any], Optional[int]], List[Event]],
        timeout: Optional[float] = None,
    ) -> List[str]:
        """Mark runs whose driver is gone ``interrupted`` (partial = their durable deltas); returns their ids."""
        return self._native.call(self._recover_native, is_owned, build_tail, timeout=timeout)

    def purge(self, batch: int = 50) -> int:
        """Delete the durable events of runs finished more than the replay window ago (bounded)."""
        return self._native.call(self._purge_native, batch)

    def checkpoint(self) -> Tuple[int, int]:
        """A PASSIVE WAL checkpoint on the writer's thread: (frames in the WAL, frames checkpointed).

        The janitor calls it every few seconds. The writer's own commits checkpoint at SQLite's
        1000-page mark, but a server writing only on the request path (sign-ups, edits, uploads,
        settings; no turns) would otherwise grow its WAL to the hub's far backstop
        (``HUB_WAL_AUTOCHECKPOINT``, about 80 MB). PASSIVE never waits for a reader or a writer.
        """
        return self._native.call(self._checkpoint_native)

    def _checkpoint_native(self) -> Tuple[int, int]:
        _busy, frames, done = self._db().execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        return frames, done

    def stats(self) -> Dict[str, Any]:
        """Backlog and health of the writer, for ``/api/health``."""
        return {
            "pending_events": len(self._pending) + len(self._retry),
            "finals_waiting": self.finals_waiting,
            "written": self.written,
            "failures": self.failures,
            "last_error": self.last_error,
            "last_flush_at": self.last_flush_at,
            "flush_interval": self.interval,
            "native_thread": gevent_active(),
        }

    def close(self) -> None:
        """Flush what is queued, stop the flusher and close the writer connection."""
        if self._closing:
            return
        self._closing = True
        try:
            self.flush(timeout=10)
        except Exception:  # noqa: BLE001 - best effort at shutdown
            log.exception("final durable flush failed")
        if self._flusher is not None and self._flusher is not threading.current_thread():
            self._flusher.join(self.interval + 5)
        try:
            self._native.call(self._close_native, timeout=10)
        except Exception:  # noqa: BLE001 - best effort at shutdown
            log.exception("closing the durable writer failed")

    def _close_native(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # ------------------------------------------------------------ native thread
    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = connect(self.path, busy_ms=WRITER_BUSY_MS)
            self._conn.isolation_level = None  # explicit BEGIN/COMMIT only
        return self._conn

    def _note_failure(self, exc: BaseException) -> None:
        self.failures += 1
        self.last_error = f"{type(exc).__name__}: {exc}"

    def _take_pending(self) -> List[Row]:
        rows, self._retry = self._retry, []
        pending = self._pending
        while pending:
            rows.append(pending.popleft())
        return rows

    def _write_rows(self, conn: sqlite3.Connection, rows: List[Row]) -> None:
        if not rows:
            return
        packed = pack_rows(rows)
        try:
            conn.executemany(INSERT, packed)
        except UnicodeEncodeError:
            # a lone surrogate, which UTF-8 cannot store: rather than failing every later write of
            # every run on this batch, that text is stored repaired (U+FFFD); the rows already
            # inserted by the failed call are ignored by the second
            conn.executemany(INSERT, [(r[0], r[1], r[2], repair_text(r[3]), repair_text(r[4])) for r in packed])

    def _renew_leases(self, conn: sqlite3.Connection, now: float, force: bool = False) -> None:
        if force or now - self._last_renew >= self.lease_seconds / 3:
            until = now + self.lease_seconds
            conn.execute(
                "update runs set lease_until = ? where worker = ? and status = 'running'", [until, self.worker]
            )
            conn.execute(
                "update jobs set lease_until = ? where worker = ? and status = 'running'", [until, self.worker]
            )
            self._last_renew = now

    def _flush_native(self) -> None:
        now = time.time()
        needs_renew = now - self._last_renew >= self.lease_seconds / 3
        if not self._pending and not self._retry and not needs_renew:
            return
        conn = self._db()  # before taking the rows: a connection that cannot open loses nothing
        with self._taking:  # a final save on the hub waits for these rows' commit (see above)
            rows = self._take_pending()
            try:
                conn.execute("BEGIN IMMEDIATE")
                self._write_rows(conn, rows)
                self._renew_leases(conn, now)
                conn.execute("COMMIT")
            except Exception as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                self._retry = rows + self._retry
                self._note_failure(exc)
                raise
        self.written += len(rows)
        self.last_flush_at = time.time()

    def _final_native(self, attempt: _Attempt) -> None:
        """Save ``attempt`` and every final save queued with it in one transaction (raises its own failure)."""
        if not attempt.done:  # else an earlier call's batch took it
            self._save_finals(self._take_finals())
        if not attempt.done:  # pragma: no cover - every queued attempt is in the batch that takes it
            raise RuntimeError("a final save was not taken by any group commit")
        if attempt.error is not None:
            raise attempt.error

    def _take_finals(self) -> List[_Attempt]:
        finals = self._finals
        return [finals.popleft() for _ in range(len(finals))]

    def _save_finals(self, batch: List[_Attempt]) -> None:
        """One transaction for ``batch``; every attempt in it ends ``done``, with its error if it failed."""
        rows: List[Row] = []
        self._taking.acquire()  # released in ``finally``: these rows commit before a hub save takes more
        try:
            conn = self._db()
            rows = self._take_pending()
            try:
                conn.execute("BEGIN IMMEDIATE")
                tails: List[Row] = []
                if len(batch) == 1:  # alone: no savepoint needed, a failure rolls back the one save
                    tails = self._finish_row(conn, batch[0].final)
                else:
                    for attempt in batch:
                        tails += self._finish_in_savepoint(conn, attempt)
                # a run's tail follows its pending events: written together they pack into one row
                self._write_rows(conn, rows + tails)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except BaseException as exc:
            self._retry = rows + self._retry
            for attempt in batch:
                attempt.error = attempt.error or exc
            if not isinstance(exc, Exception):
                raise
        else:
            self.final_commits += 1
            self.written += len(rows) + len(tails)
            self.last_flush_at = time.time()
        finally:
            self._taking.release()
            for attempt in batch:
                attempt.done = True

    def _finish_in_savepoint(self, conn: sqlite3.Connection, attempt: _Attempt) -> List[Row]:
        """One save of a group commit: its failure undoes only its own statements."""
        conn.execute("SAVEPOINT final_save")
        try:
            tail = self._finish_row(conn, attempt.final)
        except Exception as exc:  # noqa: BLE001 - reported to its own caller
            conn.execute("ROLLBACK TO final_save")
            conn.execute("RELEASE final_save")
            attempt.error = exc
            return []
        conn.execute("RELEASE final_save")
        return tail

    def _finish_row(self, conn: sqlite3.Connection, final: FinalSave) -> List[Row]:
        """Inside the caller's transaction: save the reply only if the run is still running.

        Returns the tail's rows for the caller to write in the same transaction (none when
        another writer had finished the run).
        """
        now = time.time()
        claimed = conn.execute(
            "update runs set status = ?, stop_reason = ?, error = ?, updated_at = ?,"
            " finished_at = ?, lease_until = null where run_id = ? and status = 'running'",
            [final.status, final.stop_reason, final.error, now, now, final.run_id],
        ).rowcount
        if claimed != 1:
            row = conn.execute("select message_id from runs where run_id = ?", [final.run_id]).fetchone()
            final.message_id, final.saved = (row[0] if row else None), False
            final.tail = number_tail(final.build_tail(final.message_id), final.first_tail_seq)
            return []
        # a lone surrogate cannot be stored as UTF-8: provider text is repaired long before this, but a
        # reply built from elsewhere (a tool's output, a synthesis) must not fail its own save forever
        message_id = insert_message(
            _RawDb(conn),
            final.owner,
            final.session_id,
            "assistant",
            repair_text(final.content),
            thinking=repair_text(final.thinking),
            metadata=final.metadata,  # JSON-encoded with ASCII escapes: any text in it is storable
            run_id=final.run_id,
        )
        final.tail = number_tail(final.build_tail(message_id), final.first_tail_seq)
        conn.execute(
            "update runs set message_id = ?, event_count = ?, last_event_type = ?, partial_content = ?,"
            " partial_thinking = ? where run_id = ?",
            [
                message_id,
                (seq_of(final.tail[-1]) if final.tail else final.first_tail_seq - 1) - final.base - final.skipped,
                CLOSE,
                "",
                "",
                final.run_id,
            ],
        )
        final.message_id, final.saved = message_id, True
        return [(final.run_id, event.seq, event.type, payload) for event, payload in final.tail]  # type: ignore[misc]

    def _recover_native(
        self, is_owned: Callable[[str], bool], build_tail: Callable[[Dict[str, Any], Optional[int]], List[Event]]
    ) -> List[str]:
        conn = self._db()
        now = time.time()
        rows = conn.execute(
            "select run_id, owner, session_id, worker, lease_until, mode, model, terminal_type,"
            " first_seq from runs where status = 'running'"
        ).fetchall()
        recovered = []
        for run_id, owner, session_id, worker, lease_until, mode, model, terminal_type, first_seq in rows:
            if is_owned(run_id):
                continue
            expired = lease_until is None or lease_until < now or worker_is_dead(worker, self.worker)
            if not expired:
                continue
            try:
                self._recover_one(
                    conn,
                    {
                        "run_id": run_id,
                        "owner": owner,
                        "session_id": session_id,
                        "mode": mode,
                        "model": model,
                        "terminal_type": terminal_type,
                        "first_seq": first_seq or 1,
                    },
                    build_tail,
                )
                recovered.append(run_id)
            except Exception as exc:  # noqa: BLE001 - one bad row must not stop the boot
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                self._note_failure(exc)
                log.exception("could not recover run %s", run_id)
        return recovered

    def _recover_one(
        self,
        conn: sqlite3.Connection,
        row: Dict[str, Any],
        build_tail: Callable[[Dict[str, Any], Optional[int]], List[Event]],
    ) -> None:
        conn.execute("BEGIN IMMEDIATE")
        content: List[str] = []
        thinking: List[str] = []
        last_seq = row["first_seq"] - 1
        for seq, kind, payload in iter_events(conn, row["run_id"], 0):
            last_seq = seq
            if kind == DELTA:
                data = json.loads(payload)
                (thinking if data.get("thinking") else content).append(data.get("delta", ""))
        # past anything the dead worker's memory log could have numbered (see the module invariants)
        first_tail = max(last_seq + 1, row["first_seq"] + self.max_events + len(LIFECYCLE))
        final = FinalSave(
            run_id=row["run_id"],
            owner=row["owner"],
            session_id=row["session_id"],
            status="interrupted",
            stop_reason="interrupted",
            error="the server restarted during this run",
            content="".join(content),
            thinking="".join(thinking),
            metadata={
                "run_id": row["run_id"],
                "status": "interrupted",
                "stop_reason": "interrupted",
                "stopped": False,
                "partial": True,
                "interrupted": True,
            },
            build_tail=lambda message_id: build_tail(row, message_id),
            first_tail_seq=first_tail,
            base=row["first_seq"] - 1,
            skipped=first_tail - last_seq - 1,
        )
        self._write_rows(conn, self._finish_row(conn, final))
        conn.execute("COMMIT")

    def _purge_native(self, batch: int) -> int:
        conn = self._db()
        cutoff = time.time() - self.window
        ids = [r[0] for r in conn.execute(PURGE_DUE, [cutoff, batch])]
        if not ids:
            return 0
        conn.execute("BEGIN IMMEDIATE")
        try:
            marks = ",".join("?" * len(ids))
            conn.execute(f"delete from run_events where run_id in ({marks})", ids)
            conn.execute(f"update runs set events_purged = 1 where run_id in ({marks})", ids)
            conn.execute("COMMIT")
        except Exception:
            conn.execute("ROLLBACK")
            raise
        return len(ids)


class _RawDb:
    """The one method of a sqlite-utils Database that ``insert_message`` uses, over a raw connection."""

    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn

    def execute(self, sql: str, params: Optional[Sequence[Any]] = None) -> sqlite3.Cursor:
        """Run one statement on the raw connection."""
        return self.conn.execute(sql, params or [])


def read_events(db: Executes, run_id: str, after: int, limit: int = 500) -> List[Tuple[int, str, str]]:
    """At most ``limit`` durable events of a run after ``after``: (seq, type, payload), in order, packs
    unpacked, whichever row the cursor falls in (request-path connection)."""
    return read_after(db, run_id, after, limit)


def read_tail(db: Executes, run_id: str, count: int = 8) -> List[Tuple[int, str, str]]:
    """A run's last ``count`` durable events, newest first: (seq, type, payload)."""
    return read_newest(db, run_id, count)


def as_entry(seq: int, kind: str, payload: str) -> Entry:
    """A durable row as a log entry (the data decoded for projections that need fields)."""
    return Event(kind, json.loads(payload), seq), payload
