"""The run engine: the owner of a turn's whole life, from start to its saved reply.

What happens to a turn, in order:

1. **Start** (``start``): under the session lock, a repeated ``client_message_id`` finds its
   earlier run; a running run on the session is replaced (reason ``replaced``). Capacity
   (``MAX_ACTIVE_RUNS``) and the memory budget are reserved and ``run_started`` is logged in
   memory *before* anything is written, so a 503 stores nothing (capacity is checked before the
   replacement too, so a refused send leaves the running run alone). Then ONE transaction stores
   the session (if new), the user's message, the run row (with this worker's lease) and
   whatever the mode must consume atomically (an approval). The turn then runs in its own
   greenlet; no HTTP connection owns it.
2. **Log**: every event the turn yields is appended to the run's memory log (numbered, encoded
   once) and queued for the durable log (``durable.DurableLog``), which a native thread
   group-commits to SQLite every ``EVENT_FLUSH_INTERVAL`` seconds.
3. **Finalize** (``_finalize``, exactly once per run): the reply, the run's final status and
   the terminal tail are saved in one conditional transaction, then the same tail is appended
   to the memory log. If the database stays unwritable, the run still ends in memory (the
   tail says ``message_id: null``) and the save is retried in the background.
4. **Follow** (``follow.py``): a reader asks for "everything after N" and gets it from the
   memory log while the run is held, or from the durable log after eviction or a restart,
   with the same ids and bytes; after the replay window the spec's behaviour applies
   (history, ``run_missing``).
5. **Evict**: a finished run's memory log is released ``EVICT_GRACE`` seconds after its last
   reader left (earlier under memory pressure); its durable copy is purged once the window
   has passed.
6. **Leases and recovery**: each run row records the worker driving it and a lease the
   writer renews. Start-up and the janitor mark ``interrupted`` only runs whose lease expired
   (or whose process is visibly dead), with the durable deltas as the partial reply; the
   conditional final save means two writers never save one reply twice.
7. **Shutdown** (``begin_shutdown``): new turns get 503; running runs get ``SHUTDOWN_GRACE``
   seconds, then end ``interrupted`` with their full text saved and their tail flushed.

The engine is this module (driving, finalize, stop, subscribers) plus two parts it mixes in:
``start`` (the start path, with ``StartSpec``) and ``housekeeping`` (eviction, the janitor,
recovery, shutdown); ``outcome`` builds what a run's end records (metadata, terminal record,
tails) as pure functions.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import itertools
import logging
import threading
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from ..cancel import Cancelled
from ..errors import OdysseusError, ProviderError
from ..events import (
    DELTA,
    PROVIDER_ONLY,
    RUN_TIMEOUT,
    Event,
)
from ..store import Store
from ..process_identity import worker_identity
from .backend import make_backend
from .durable import DurableLog, FinalSave, number_tail
from .heap_trim import HeapTrimmer
from .hooks import EngineHooks
from .housekeeping import Housekeeping
from .native import gevent_active, hub_loop
from .outcome import (
    cancel_outcome,
    failed_save_tail,
    outcome_error,
    reply_metadata,
    tail_events,
    terminal_record,
)
from .run import Outcome, Run
from .run_log import ByteBudget, LogFull, greenlets_only
from .start import ShuttingDown, Started, StartSpec, Starting, Turn

log = logging.getLogger(__name__)

#: seconds a run's greenlet may process a provider burst before it yields to the hub
BURST_SLICE = 0.002


class RunEngine(Starting, Housekeeping):
    """All runs of this process: start, stop, follow, finalize, evict, lease, recover, shut down."""

    def __init__(self, store: Store, config: Dict[str, Any]):
        self.store = store
        self.config = config
        self.grace = float(config["EVICT_GRACE"])
        self.budget = ByteBudget(int(config["PROCESS_MAX_BYTES"]))
        self.worker = worker_identity()
        self.durable = DurableLog(store.path, config, self.worker)
        #: [issue 14] where runs are shared beyond this process (runs/backend.py): memory or redis
        self.backend = make_backend(config, self.worker)
        # Held runs, indexed so that no per-start or per-sweep step walks every run held in the replay
        # window (issue 22). Invariants, kept under ``_lock`` at each transition:
        #   runs = _running + _finished (by id); _running holds the runs started and not yet finalized
        #   (at most MAX_ACTIVE_RUNS), _finished the finalized ones in the order they finished;
        #   active = reserved slots = len(_running) + starts between _reserve and their registration;
        #   every finished run without readers has an entry (evict_at, n, run) in _evict_heap (entries
        #   whose run has since been re-subscribed, re-scheduled or evicted are stale and skipped).
        self.runs: Dict[str, Run] = {}
        self._running: Dict[str, Run] = {}
        self._finished: "collections.OrderedDict[str, Run]" = collections.OrderedDict()
        self._evict_heap: List[Tuple[float, int, Run]] = []
        self._evict_order = itertools.count()
        self._heap = HeapTrimmer()  # evictions free memory; the janitor hands it back (heap_trim.py)
        self.by_session: Dict[Tuple[str, str], Run] = {}
        #: lifecycle hooks (run_started, run_finished, message_saved, session_deleted): this engine's own
        self.hooks = EngineHooks()
        self.active = 0
        self.draining = False
        self._lock = threading.RLock()
        self._session_locks: Dict[Tuple[str, str], threading.Lock] = {}
        self._janitor: Optional[threading.Thread] = None
        self._janitor_ended = False
        self._closing = threading.Event()
        self._last_recovery = 0.0
        #: called by the janitor with the recovery cadence (e.g. background jobs re-queue orphans)
        self.maintenance: List[Callable[[], None]] = []
        self._drain: Optional[threading.Thread] = None
        self._gevent = gevent_active()
        if self._gevent:
            # [issue 40] final saves on the request-path connection when the writer holds no rows
            self.durable.use_hub(store.locked)

    # ---------------------------------------------------------------- lookup
    def get(self, owner: str, run_id: str) -> Optional[Run]:
        """The owner's run still in memory, or None."""
        run = self.runs.get(run_id)
        return run if run is not None and run.owner == owner else None

    def for_session(self, owner: str, session_id: str) -> Optional[Run]:
        """The session's newest run still in memory, or None."""
        return self.by_session.get((owner, session_id))

    def active_count(self) -> int:
        """How many runs are still running (a counter: starting a turn never scans the runs)."""
        return self.active

    @contextlib.contextmanager
    def session_lock(self, owner: str, session_id: str) -> Iterator[None]:
        """Serialise starts on one session (idempotency check, replacement, user message, start)."""
        key = (owner, session_id)
        with self._lock:
            lock = self._session_locks.setdefault(key, threading.Lock())
        with lock, self.backend.session_lock(owner, session_id):  # [issue 14] across workers too
            yield

    def delete_session(self, owner: str, session_id: str, remove: Callable[[], List[str]]) -> List[str]:
        """Delete a session: under its lock, stop its run (``session_deleted``), then ``remove()`` its rows;
        then ``hooks.session_deleted`` with the image file names ``remove`` returned (which are returned too).

        A start waiting on the lock finds the session gone (404) and stores nothing; the stopped
        run's final save is conditional on its row, so nothing is written into the deleted session.
        """
        with self.session_lock(owner, session_id):
            run = self.for_session(owner, session_id)
            if run is not None and run.status == "running":
                self._end(run, "session_deleted")
            result = remove()
        if run is not None:
            with self._lock:
                if run.finalized and run.subscribers == 0:
                    self._schedule_evict(run, 0.0)  # nothing of the session is kept: free its log now
        self.hooks.session_deleted.send(owner, session_id=session_id, images=result)
        return result

    def replace_running(self, owner: str, session_id: str) -> Optional[Run]:
        """Stop the session's running run with reason ``replaced`` (waits until its partial is saved)."""
        run = self.for_session(owner, session_id)
        if run is not None and run.status == "running":
            self._end(run, "replaced")
            return run
        self.backend.replace_elsewhere(self, owner, session_id)  # [issue 14] a run on another worker
        return None

    # ---------------------------------------------------------------- driving
    def _append(self, run: Run, event: Event) -> None:
        """Log a produced event unless the run has been finalized from outside."""
        with run.lock:
            if run.finalized:
                raise Cancelled(run.cancel.reason or "stopped")
            entry = run.log.append(event)  # first: a refused append must not reach the saved reply
            run.observe(event)
        self.durable.enqueue(run.run_id, entry)

    def _drive(self, run: Run, turn: Turn) -> None:
        """The worker: iterate the turn into the log, then finalize exactly once."""
        outcome: Optional[Outcome] = None
        flushed = False
        busy_since = time.monotonic()
        # Among greenlets of one thread (greenlets_only) _append's section cannot interleave with
        # _finalize's (nothing in it blocks, so no other greenlet runs until it is done): the
        # per-event lock is dropped there and the append is made inline, in the same order.
        inline = greenlets_only()
        append, observe, enqueue, run_id = run.log.append, run.observe, self.durable.enqueue, run.run_id
        loop = hub_loop() if inline else None
        turns = loop.iteration if loop is not None else 0
        context = run.context
        assert context is not None, "a run is driven once, before it settles"
        try:
            for event in turn(context):
                if event.type in PROVIDER_ONLY:
                    observe(event)
                    continue
                if inline:
                    if run.finalized:
                        raise Cancelled(run.cancel.reason or "stopped")
                    entry = append(event)  # first: a refused append must not reach the saved reply
                    observe(event)
                    enqueue(run_id, entry)
                else:
                    self._append(run, event)
                # A provider that sends a burst keeps this greenlet busy until its socket would
                # block: yield after the first delta (subscribers send the first token right away)
                # and then every BURST_SLICE seconds, so a long burst cannot hold the hub (and every
                # other request) for seconds. A burst ends where the provider's read blocked (the
                # hub's loop turned since): each token of a paced model is a burst of its own, and
                # it took a second hub round trip (the yield) on top of its read's.
                now = time.monotonic()
                if loop is not None and loop.iteration != turns:
                    turns, busy_since = loop.iteration, now
                if (not flushed and event.type == DELTA) or now - busy_since >= BURST_SLICE:
                    flushed = True
                    time.sleep(0)
                    busy_since = time.monotonic()
                    if loop is not None:
                        turns = loop.iteration
                if run.cancel.cancelled:
                    break
            outcome = cancel_outcome(run) if run.cancel.cancelled else Outcome("done")
        except Cancelled:
            outcome = cancel_outcome(run)
        except LogFull as exc:
            outcome = Outcome("error", "log_full", f"Response exceeded the run log limit ({exc})", 507)
        except ProviderError as exc:
            if run.cancel.cancelled:
                outcome = cancel_outcome(run)
            else:
                outcome = Outcome("error", "provider_error", exc.message, exc.status, exc.retry_after)
        except OdysseusError as exc:
            outcome = Outcome("error", "error", exc.message, exc.status)
        except Exception:  # a bug must still end the run with a terminal event
            log.exception("run %s crashed", run.run_id)
            outcome = Outcome("error", "internal_error", "Internal error while generating the reply", 500)
        finally:
            self._settle(run, self._finalize(run, outcome or cancel_outcome(run)))

    @staticmethod
    def _settle(run: Run, finalized_here: bool) -> None:
        """A finished run's closed log is sealed (the payload texts in one string, ``RunLog.seal``) and,
        when its own worker finalized it (so its end has been announced, ``_finalize``), the run keeps
        only what its readers use until eviction (``Run.settle``). A run finalized from outside (a stop
        whose worker did not settle in ``STOP_WAIT``) keeps the rest: its finalizer may still be
        announcing it."""
        if not run.finalized:
            return
        run.log.seal()
        if finalized_here:  # its _finalize returned: settled is set and run_finished sent
            run.settle()

    # ---------------------------------------------------------------- finalize
    def _finalize(self, run: Run, outcome: Outcome) -> bool:
        """Save the reply and log the terminal tail; runs at most once per run (True: this call did)."""
        with run.lock:
            if run.finalized:
                return False
            run.finalized = True
        try:
            self._record_outcome(run, outcome)
        except Exception:  # the save failed for good: end the run as an error in memory AND in the database
            log.exception("finalizing run %s failed", run.run_id)
            self._record_failed_save(run)
        run.finished_at = time.time()
        self.backend.run_finished(run)  # [issue 14] lease released
        with self._lock:
            self.active -= 1
            if self._running.pop(run.run_id, None) is not None:
                self._finished[run.run_id] = run
            if run.subscribers == 0:
                self._schedule_evict(run)
        run.settled.set()
        self.hooks.run_finished.send(run)
        return True

    def _record_outcome(self, run: Run, outcome: Outcome) -> None:
        run.stop_reason, run.error = outcome.stop_reason, outcome.error
        elapsed_ms = round((time.monotonic() - run.started_monotonic) * 1000, 1)
        if outcome.timeout:
            limit = self.config["RUN_IDLE_TIMEOUT"] if outcome.timeout == "idle" else self.config["RUN_WALL_TIMEOUT"]
            self.durable.enqueue(
                run.run_id, run.log.append(Event(RUN_TIMEOUT, {"limit": outcome.timeout, "seconds": limit}))
            )
        error = outcome_error(outcome)
        metadata = reply_metadata(run, outcome, elapsed_ms, error)
        terminal = terminal_record(run, outcome, elapsed_ms, error)

        def build_tail(message_id: Optional[int]) -> List[Event]:
            return tail_events(
                run.terminal_type,
                run.run_id,
                run.session_id,
                outcome.status,
                message_id,
                dict(terminal, message_id=message_id),
                run.thinking,
                elapsed_ms,
                outcome.error,
                outcome.http_status,
                outcome.retry_after,
            )

        final = FinalSave(
            run_id=run.run_id,
            owner=run.owner,
            session_id=run.session_id,
            status=outcome.status,
            stop_reason=outcome.stop_reason,
            error=outcome.error,
            content=run.content,
            thinking=run.thinking,
            metadata=metadata,
            build_tail=build_tail,
            first_tail_seq=run.log.last_seq + 1,
            base=run.log.base,
        )
        if not self.durable.save_final(final, float(self.config.get("FINAL_SAVE_PATIENCE", 20))):
            # the database stays unwritable: end the run in memory now, keep retrying the save
            self.durable.retry_final(dataclasses.replace(final, tail=[]))
            final.tail = number_tail(build_tail(None), final.first_tail_seq)
        run.status, run.message_id = outcome.status, final.message_id
        for entry in final.tail:
            run.log.append_entry(entry)
        if final.message_id is not None:
            self.hooks.message_saved.send(
                run.owner, session_id=run.session_id, message_id=final.message_id, role="assistant"
            )

    def _record_failed_save(self, run: Run) -> None:
        """The final save raised: mark the row ``error`` and end the memory log with the same outcome."""
        run.status, run.error = "error", "could not save the reply"
        with contextlib.suppress(Exception):
            self.store.runs.mark_failed(run.run_id, run.error)
        events = failed_save_tail(run)
        for entry in number_tail(events, run.log.last_seq + 1):
            with contextlib.suppress(LogFull, ValueError):
                run.log.append_entry(entry)
                self.durable.enqueue(run.run_id, entry)

    # ---------------------------------------------------------------- stop
    def stop(self, owner: str, session_id: str, expected_run_id: Optional[str], reason: str = "stopped") -> bool:
        """Stop the session's run only when ``expected_run_id`` names it exactly; True when stopped."""
        run = self.for_session(owner, session_id)
        mismatch = expected_run_id and (run is None or run.run_id != expected_run_id)
        # [issue 14] maybe on another worker
        if mismatch and expected_run_id and self.get(owner, expected_run_id) is None:
            return self.backend.stop_elsewhere(self, owner, expected_run_id, reason, session_id=session_id)
        if run is None or not expected_run_id or run.run_id != expected_run_id or run.status != "running":
            return False
        return self._end(run, reason)

    def stop_run(self, owner: str, run_id: str, reason: str = "stopped") -> Optional[Run]:
        """Stop the owner's run by id (agent API cancel); returns the run or None when unknown."""
        run = self.get(owner, run_id)
        if run is not None and run.status == "running":
            self._end(run, reason)
        elif run is None:
            self.backend.stop_elsewhere(self, owner, run_id, reason)  # [issue 14] driven by another worker
        return run

    def _end(self, run: Run, reason: str) -> bool:
        """Cancel, wait for the worker to settle, and finalize from here if it does not."""
        first = run.cancel.cancel(reason)
        if not run.settled.wait(float(self.config["STOP_WAIT"])):
            self._finalize(run, cancel_outcome(run))
            run.settled.wait(float(self.config.get("FINAL_SAVE_PATIENCE", 20)) + 5)
        return first or run.status != "running"

    # ---------------------------------------------------------------- subscribers
    def subscribe(self, run: Run) -> bool:
        """Register a reader before it replays; False (not registered) when the log is already released."""
        with self._lock:
            if run.log.released:
                return False
            run.subscribers += 1
            run.evict_at = None
            return True

    def unsubscribe(self, run: Run) -> None:
        """A reader left; a finished run starts its eviction grace when it was the last."""
        with self._lock:
            run.subscribers = max(0, run.subscribers - 1)
            if run.subscribers == 0 and run.finalized:
                self._schedule_evict(run)


#: what the routes and tests import from here (the start path lives in ``start``)
__all__ = ["RunEngine", "ShuttingDown", "StartSpec", "Started", "Turn"]
