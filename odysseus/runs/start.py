"""Starting a turn: the run engine's start path, from the request to the turn's greenlet.

A part of ``RunEngine`` (which mixes it in; the attributes below are the engine's). Under the
session lock, a repeated ``client_message_id`` finds its earlier run; capacity is checked before
the session's running run is replaced, so a refused send stops nothing; the slot and the memory
log (``run_started``, ``start``) are reserved before anything is written, so a 503 stores nothing;
then ONE transaction stores the session (if new), the user's message, the run row and the mode's
writes, and builds the turn from the history read on that same connection.

[startpath, issue 22] Everything here runs before the first byte of the response: plain SQL only
(no sqlite-utils introspection), no walk over the runs held in the replay window (counters and
indexes kept by the engine), and the turn driven in a plain greenlet. Its statement budget is
pinned by tests/test_turn_start_budget.py.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, ContextManager, Dict, Iterator, List, Optional, TYPE_CHECKING, Tuple

from ..errors import CapacityError, Conflict, NotFound
from ..events import CHAT_TERMINAL, RUN_STARTED, START, Event
from ..store import Store, new_id
from ..store.messages import holds_reply, insert_message, owned_branch_head
from .run import Run, RunContext
from .run_log import ByteBudget, LogFull

if TYPE_CHECKING:
    from .backend import LocalBackend
    from .durable import DurableLog
    from .hooks import EngineHooks

#: A turn: given its run context, yields canonical events. It must honour ``context.cancel``.
Turn = Callable[[RunContext], Iterator[Event]]


class ShuttingDown(CapacityError):
    """The server is draining for a restart: try again on the next worker."""


@dataclass
class StartSpec:
    """Everything ``RunEngine.start`` needs, validated by the caller (nothing here is checked again)."""

    owner: str
    session_id: Optional[str]
    mode: str
    model: str
    make_turn: Callable[[List[Dict[str, Any]]], Turn]
    message: Optional[str] = None  # the user's message; None stores no user message
    user_metadata: Optional[Dict[str, Any]] = None
    client_message_id: Optional[str] = None
    terminal_type: str = CHAT_TERMINAL
    session_title: str = "New chat"
    #: run inside the start transaction (e.g. consume an approval); raise to roll the start back
    in_transaction: List[Callable[[Any], None]] = field(default_factory=list)
    #: the run's id, when the caller needs it before the start (the /v1 API derives its response id from it)
    run_id: Optional[str] = None
    #: where a session this start creates comes from (``sessions.origin``: None for the page, "api" for /v1)
    session_origin: Optional[str] = None
    #: the message the user's message answers, when not the session's branch head (a /v1 response that
    #: continues an earlier one of the conversation); it must be a message of the session (else NotFound)
    parent_id: Optional[int] = None
    #: refuse (Conflict) instead of replacing when the session has a running run (on any worker)
    exclusive: bool = False


@dataclass
class Started:
    """What a start produced: a live run to follow, or the row of an earlier turn with this client id."""

    session_id: str
    run: Optional[Run]
    row: Optional[Dict[str, Any]] = None
    attached: bool = False


class Starting:
    """``RunEngine``'s start path (see the module docstring)."""

    store: Store
    config: Dict[str, Any]
    worker: str
    budget: ByteBudget
    hooks: "EngineHooks"
    durable: "DurableLog"
    backend: "LocalBackend"  # or its subclass redis_backend.RedisBackend (make_backend)
    runs: Dict[str, Run]
    by_session: Dict[Tuple[str, str], Run]
    active: int
    draining: bool
    _lock: Any
    _running: Dict[str, Run]
    _gevent: bool

    if TYPE_CHECKING:  # provided by RunEngine and Housekeeping

        def _ensure_janitor(self) -> None: ...
        def _evict_idle(self, free_bytes: int) -> None: ...
        def _drive(self, run: Run, turn: Turn) -> None: ...
        def get(self, owner: str, run_id: str) -> Optional[Run]: ...
        def for_session(self, owner: str, session_id: str) -> Optional[Run]: ...
        def session_lock(self, owner: str, session_id: str) -> ContextManager[None]: ...
        def replace_running(self, owner: str, session_id: str) -> Optional[Run]: ...

    def start(self, spec: StartSpec) -> Started:
        """Start the turn ``spec`` describes, or find the earlier one with its ``client_message_id``."""
        self._ensure_janitor()
        if self.draining:
            raise ShuttingDown("the server is restarting; try again in a moment")
        creating = spec.session_id is None
        session_id = spec.session_id or new_id("s_")
        with self.session_lock(spec.owner, session_id):
            if spec.client_message_id and not creating:
                row, sent = self.store.runs.client_message_state(spec.owner, session_id, spec.client_message_id)
                if row is not None or sent:
                    run = self.get(spec.owner, row["run_id"]) if row else None
                    if run is not None and not run.log.released:
                        return Started(session_id, run, row, attached=True)
                    return Started(session_id, None, row, attached=True)
            self._check_capacity(spec.owner, session_id)  # a 503 must not stop the session's running run
            if spec.exclusive and not creating:
                self._refuse_if_running(spec.owner, session_id)
            self.replace_running(spec.owner, session_id)
            # ids increase across the runs of a session: this run's first id follows the previous run's last
            base = 0 if creating else self.session_last_seq(spec.owner, session_id)
            run = self._reserve(spec, session_id, base)
            try:
                turn = self._store_start(spec, run, creating)
            except BaseException:
                self._unreserve(run)
                raise
            with self._lock:
                self.runs[run.run_id] = run
                self._running[run.run_id] = run
                self.by_session[(spec.owner, session_id)] = run
            for entry in run.log.read_after(run.log.base):  # run_started and start
                self.durable.enqueue(run.run_id, entry)
        self.backend.run_started(run)  # [issue 14] lease
        self.hooks.run_started.send(run)
        self._spawn(run, turn)
        return Started(session_id, run)

    def _spawn(self, run: Run, turn: Turn) -> None:
        """Drive the turn in its own greenlet (gevent) or thread; the caller does not wait for it to begin.

        [startpath, issue 22] Under gevent a plain greenlet: ``threading.Thread.start`` would add a
        thread object, its bookkeeping and a hub round trip (it waits until the thread has started),
        and a run needs none of it (nothing joins it or reads its name; ``settled`` says it ended).
        """
        if self._gevent:
            import gevent

            gevent.spawn(self._drive, run, turn)
        else:
            threading.Thread(target=self._drive, args=(run, turn), name=f"run-{run.run_id}", daemon=True).start()

    def session_last_seq(self, owner: str, session_id: str) -> int:
        """The newest event id of the session's previous runs (0 when it has none): the next run's base.

        From the memory log while it is held, else from the newest run row (``first_seq +
        event_count - 1``) or its durable events, whichever is higher.
        """
        last = 0
        previous = self.for_session(owner, session_id)
        if previous is not None and not previous.log.released:
            last = previous.log.last_seq
        with self.store.locked.read() as db:  # one statement: the newest row and its durable events
            row = db.execute(
                "select coalesce(first_seq, 1) + coalesce(event_count, 0) - 1,"
                " (select max(seq) from run_events e where e.run_id = r.run_id) from runs r"
                " where owner = ? and session_id = ? order by created_at desc, rowid desc limit 1",
                [owner, session_id],
            ).fetchone()
            if row is not None:
                last = max(last, row[0], row[1] or 0)
        return last

    def _refuse_if_running(self, owner: str, session_id: str) -> None:
        """Conflict when a run of the session is still running here or on another worker (its row says so)."""
        current = self.for_session(owner, session_id)
        if current is None or current.status != "running":
            with self.store.locked.read() as db:
                running = db.execute(
                    "select 1 from runs where owner = ? and session_id = ? and status = 'running' limit 1",
                    [owner, session_id],
                ).fetchone()
            if not running:
                return
        raise Conflict("another response of this conversation is still in progress; wait for it or cancel it")

    def _check_capacity(self, owner: str, session_id: str) -> None:
        """Refuse (CapacityError) before replacing anything when the new run could not be reserved.

        The session's own running run is counted as freed, since replacing it ends it. A start
        racing this one may still take the last slot in between; then ``_reserve`` refuses after
        the replacement (rare, and still nothing of the new turn is stored).
        """
        current = self.for_session(owner, session_id)
        replacing = current is not None and current.status == "running"
        with self._lock:
            self._refuse_without_room(freed_slots=1 if replacing else 0)

    def _refuse_without_room(self, freed_slots: int = 0) -> None:
        """CapacityError unless one more run fits (a slot under ``MAX_ACTIVE_RUNS``, and budget after
        evicting idle finished runs); ``freed_slots`` running runs are about to end. Call under ``_lock``."""
        if self.active - freed_slots >= int(self.config["MAX_ACTIVE_RUNS"]):
            raise CapacityError("too many runs in progress; try again shortly")
        if self.budget.used >= self.budget.limit:
            self._evict_idle(free_bytes=self.budget.used - self.budget.limit + 1)
            if self.budget.used >= self.budget.limit:
                raise CapacityError("run memory budget exhausted; try again shortly")

    def _reserve(self, spec: StartSpec, session_id: str, base: int = 0) -> Run:
        """Take a capacity slot and log ``run_started`` and ``start`` in memory; CapacityError (nothing stored)."""
        with self._lock:
            self._refuse_without_room()
            self.active += 1
        run_id = spec.run_id or new_id("run_")
        run = Run(
            run_id=run_id,
            session_id=session_id,
            owner=spec.owner,
            mode=spec.mode,
            model=spec.model,
            client_message_id=spec.client_message_id,
            user_message_id=None,
            log=self.backend.make_log(
                run_id,
                int(self.config["RUN_MAX_EVENTS"]),  # [issue 14] mirrored
                int(self.config["RUN_MAX_BYTES"]),
                self.budget,
                base=base,
            ),
            terminal_type=spec.terminal_type,
        )
        try:
            run.log.append(
                Event(RUN_STARTED, {"run_id": run_id, "session_id": session_id, "mode": spec.mode, "model": spec.model})
            )
            run.log.append(Event(START, {"task_id": run_id, "model": spec.model}))
        except LogFull:
            with self._lock:
                self.active -= 1
            run.log.release()
            raise CapacityError("run memory budget exhausted; try again shortly") from None
        return run

    def _unreserve(self, run: Run) -> None:
        with self._lock:
            self.active -= 1
        run.log.release()

    def _store_start(self, spec: StartSpec, run: Run, creating: bool) -> Turn:
        """The session (if new), the user's message, the run row and the mode's writes: one transaction.

        The turn is built inside it too (from the history, read on the same connection, which ends with
        the uncommitted user message): a builder that raises rolls the start back instead of leaving a
        committed row ``running`` that this live worker would keep renewing and nobody would finish.
        """
        now = time.time()
        with self.store.locked.tx() as db:
            if creating:
                db.execute(
                    "insert into sessions (id, owner, title, created_at, updated_at, origin) values (?, ?, ?, ?, ?, ?)",
                    [run.session_id, spec.owner, spec.session_title, now, now, spec.session_origin],
                )
                parent: Optional[int] = None  # a new session has no message yet
            else:
                # one statement: the session is still the owner's, and the branch the message continues
                exists, parent = owned_branch_head(db, spec.owner, run.session_id)
                if not exists:
                    raise NotFound("session not found")  # deleted since the route looked it up: store nothing
                if spec.parent_id is not None:
                    if not db.execute(
                        "select 1 from messages where id = ? and session_id = ? and owner = ?",
                        [spec.parent_id, run.session_id, spec.owner],
                    ).fetchone():
                        raise NotFound("the message this turn continues is gone")
                    parent = spec.parent_id
            if spec.message is not None:
                run.user_message_id = insert_message(
                    db,
                    spec.owner,
                    run.session_id,
                    "user",
                    spec.message,
                    metadata=spec.user_metadata,
                    client_message_id=spec.client_message_id,
                    parent=parent,
                )
            self.store.runs.insert_running(
                db,
                run_id=run.run_id,
                session_id=run.session_id,
                owner=spec.owner,
                mode=spec.mode,
                model=spec.model,
                user_message_id=run.user_message_id,
                client_message_id=spec.client_message_id,
                worker=self.worker,
                lease_until=now + self.durable.lease_seconds,
                first_seq=run.log.base + 1,
                terminal_type=spec.terminal_type,
            )
            for hook in spec.in_transaction:
                hook(db)
            # the user message just stored is the branch head (insert_message set it), unless a hook moved it
            head = run.user_message_id if not spec.in_transaction else None
            if creating and head is not None:
                # a session created by this transaction holds that one message: no walk up the branch
                return spec.make_turn([self.store.messages.get(spec.owner, head)])
            history = self.store.messages.recent(
                spec.owner, run.session_id, int(self.config["HISTORY_CONTEXT_MESSAGES"]), head=head
            )
            run.follows_reply = holds_reply(history)
            return spec.make_turn(history)
