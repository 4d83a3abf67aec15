"""agent_runs: detached runs that outlive the HTTP connection.

Invariants:

- A run is driven by its own greenlet (a daemon thread under gevent's monkey patch);
  no HTTP connection owns it. Subscribers come and go; a subscriber leaving never
  stops a run.
- Every event a run produces goes through ``RunLog.append``; the log is the only
  thing subscribers read, so live delivery and replay are the same code path.
- Every run ends in exactly one ``_finalize`` call (guarded by ``run.lock`` and
  ``run.finalized``): the reply is saved once, with the run's outcome, in one
  transaction; then ``message_saved``, the terminal record, ``done`` or ``error``,
  and finally ``close`` are logged. ``stop`` and the watchdog finalize from outside
  when the worker does not settle in time; the worker then finds the run finalized
  and its late output is dropped.
- A finished run's log is kept until ``EVICT_GRACE`` seconds after its last
  subscriber left (``_schedule_evict``), then released.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Callable, Dict, Iterator, List, Optional, Tuple

from .. import signals
from ..cancel import Cancelled
from ..errors import CapacityError, OdysseusError, ProviderError
from ..events import (CHAT_TERMINAL, CLOSE, DELTA, DONE, ERROR, MESSAGE_SAVED, PROVIDER_ONLY, RUN_STARTED,
                      RUN_TIMEOUT, Event)
from ..store import Store, new_id
from .run import Outcome, Run, RunContext
from .run_log import ByteBudget, LogFull, RunLog

log = logging.getLogger(__name__)

#: A turn: given its run context, yields canonical events. It must honour ``context.cancel``.
Turn = Callable[[RunContext], Iterator[Event]]


class RunManager:
    """All runs of this process: start, stop, subscribe, evict, watch, recover."""

    def __init__(self, store: Store, config: dict):
        self.store = store
        self.config = config
        self.grace = float(config["EVICT_GRACE"])
        self.budget = ByteBudget(int(config["PROCESS_MAX_BYTES"]))
        self.runs: Dict[str, Run] = {}
        self.by_session: Dict[Tuple[str, str], Run] = {}
        self._lock = threading.RLock()
        self._session_locks: Dict[Tuple[str, str], threading.Lock] = {}
        self._janitor: Optional[threading.Thread] = None
        self._closing = threading.Event()

    # ---------------------------------------------------------------- lookup
    def get(self, owner: str, run_id: str) -> Optional[Run]:
        """The owner's run still in memory, or None."""
        run = self.runs.get(run_id)
        return run if run is not None and run.owner == owner else None

    def for_session(self, owner: str, session_id: str) -> Optional[Run]:
        """The session's newest run still in memory, or None."""
        return self.by_session.get((owner, session_id))

    def active_count(self) -> int:
        """How many runs are still running."""
        return sum(1 for run in list(self.runs.values()) if run.status == "running")

    @contextlib.contextmanager
    def session_lock(self, owner: str, session_id: str) -> Iterator[None]:
        """Serialise starts on one session (idempotency check, replacement, user message, start)."""
        key = (owner, session_id)
        with self._lock:
            lock = self._session_locks.setdefault(key, threading.Lock())
        with lock:
            yield

    # ---------------------------------------------------------------- start
    def start(self, *, owner: str, session_id: str, turn: Turn, mode: str, model: str,
              client_message_id: Optional[str] = None, user_message_id: Optional[int] = None,
              terminal_type: str = CHAT_TERMINAL) -> Run:
        """Create a run, log ``run_started`` and drive ``turn`` in its own greenlet."""
        self._ensure_janitor()
        with self._lock:
            if self.active_count() >= int(self.config["MAX_ACTIVE_RUNS"]):
                raise CapacityError("too many runs in progress; try again shortly")
            if self.budget.used >= self.budget.limit:
                self._evict_idle(free_bytes=self.budget.used - self.budget.limit + 1)
                if self.budget.used >= self.budget.limit:
                    raise CapacityError("run memory budget exhausted; try again shortly")
            run = Run(run_id=new_id("run_"), session_id=session_id, owner=owner, mode=mode, model=model,
                      client_message_id=client_message_id, user_message_id=user_message_id,
                      log=RunLog(int(self.config["RUN_MAX_EVENTS"]), int(self.config["RUN_MAX_BYTES"]), self.budget),
                      terminal_type=terminal_type)
            self.store.runs.create(run_id=run.run_id, session_id=session_id, owner=owner, mode=mode, model=model,
                                   user_message_id=user_message_id, client_message_id=client_message_id)
            self.runs[run.run_id] = run
            self.by_session[(owner, session_id)] = run
        run.log.append(Event(RUN_STARTED, {"run_id": run.run_id, "session_id": session_id, "mode": mode,
                                           "model": model}))
        signals.run_started.send(run)
        worker = threading.Thread(target=self._drive, args=(run, turn), name=f"run-{run.run_id}", daemon=True)
        worker.start()
        return run

    def replace_running(self, owner: str, session_id: str) -> Optional[Run]:
        """Stop the session's running run with reason ``replaced`` (waits until its partial is saved)."""
        run = self.for_session(owner, session_id)
        if run is not None and run.status == "running":
            self._end(run, "replaced")
            return run
        return None

    # ---------------------------------------------------------------- driving
    def _append(self, run: Run, event: Event) -> None:
        """Log a produced event unless the run has been finalized from outside."""
        with run.lock:
            if run.finalized:
                raise Cancelled(run.cancel.reason or "stopped")
            run.observe(event)
            run.log.append(event)

    def _drive(self, run: Run, turn: Turn) -> None:
        """The worker: iterate the turn into the log, then finalize exactly once."""
        outcome: Optional[Outcome] = None
        interval = float(self.config["CHECKPOINT_INTERVAL"])
        flushed = False
        try:
            for event in turn(run.context):
                if event.type in PROVIDER_ONLY:
                    run.observe(event)
                    continue
                self._append(run, event)
                if not flushed and event.type == DELTA:
                    # A provider that sends a burst keeps this greenlet busy until its socket
                    # would block; yield once so subscribers send the first token right away.
                    flushed = True
                    time.sleep(0)
                now = time.monotonic()
                if now - run.last_checkpoint >= interval:
                    run.last_checkpoint = now
                    self.store.runs.checkpoint(run.run_id, content=run.content, thinking=run.thinking,
                                               event_count=len(run.log), last_event_type=run.log.last_type)
                if run.cancel.cancelled:
                    break
            outcome = self._cancel_outcome(run) if run.cancel.cancelled else Outcome("done")
        except Cancelled:
            outcome = self._cancel_outcome(run)
        except LogFull as exc:
            outcome = Outcome("error", "log_full", f"Response exceeded the run log limit ({exc})", 507)
        except ProviderError as exc:
            if run.cancel.cancelled:
                outcome = self._cancel_outcome(run)
            else:
                outcome = Outcome("error", "provider_error", exc.message, exc.status, exc.retry_after)
        except OdysseusError as exc:
            outcome = Outcome("error", "error", exc.message, exc.status)
        except Exception:  # a bug must still end the run with a terminal event
            log.exception("run %s crashed", run.run_id)
            outcome = Outcome("error", "internal_error", "Internal error while generating the reply", 500)
        finally:
            self._finalize(run, outcome or self._cancel_outcome(run))

    @staticmethod
    def _cancel_outcome(run: Run) -> Outcome:
        reason = run.cancel.reason or "stopped"
        if reason.startswith("timeout:"):
            which = reason.split(":", 1)[1]
            return Outcome("error", "timeout", f"Run timed out ({which} limit)", 504, timeout=which)
        return Outcome("stopped", reason)

    def _finalize(self, run: Run, outcome: Outcome) -> None:
        """Save the reply and log the terminal events; runs at most once per run."""
        with run.lock:
            if run.finalized:
                return
            run.finalized = True
            try:
                self._record_outcome(run, outcome)
            except Exception:  # storage failed: still close the log so no client hangs
                log.exception("finalizing run %s failed", run.run_id)
                run.status, run.error = "error", "could not save the reply"
                for event in (Event(ERROR, {"error": "Could not save the reply", "status": 500}), Event(CLOSE, {})):
                    with contextlib.suppress(LogFull):
                        run.log.append(event)
            run.finished_at = time.time()
            run.settled.set()
        signals.run_finished.send(run)
        with self._lock:
            if run.subscribers == 0:
                self._schedule_evict(run)

    def _record_outcome(self, run: Run, outcome: Outcome) -> None:
        run.status, run.stop_reason, run.error = outcome.status, outcome.stop_reason, outcome.error
        elapsed_ms = round((time.monotonic() - run.started_monotonic) * 1000, 1)
        if outcome.timeout:
            limit = self.config["RUN_IDLE_TIMEOUT"] if outcome.timeout == "idle" else self.config["RUN_WALL_TIMEOUT"]
            run.log.append(Event(RUN_TIMEOUT, {"limit": outcome.timeout, "seconds": limit}))
        metadata = {
            "run_id": run.run_id, "status": outcome.status, "stop_reason": outcome.stop_reason,
            "stopped": outcome.status == "stopped", "partial": outcome.status != "done",
            "model_info": run.model_info, "usage": run.usage, "metrics": run.metrics,
            "finish_reason": run.finish_reason, "total_time_ms": elapsed_ms, "fallback": run.fallback,
        }
        error = None
        if outcome.error:
            error = {"message": outcome.error, "status": outcome.http_status}
            if outcome.retry_after is not None:
                error["retry_after"] = outcome.retry_after
            metadata["error"] = error
        metadata.update(run.context.metadata)
        # counts after message_saved + terminal + (done|error) + close
        final_count = len(run.log) + (4 if outcome.status != "stopped" else 3)
        run.message_id = self.store.runs.finish_with_message(
            {"run_id": run.run_id, "owner": run.owner, "session_id": run.session_id},
            status=outcome.status, stop_reason=outcome.stop_reason, error=outcome.error, content=run.content,
            thinking=run.thinking, metadata=metadata, event_count=final_count, last_event_type=CLOSE)
        signals.message_saved.send(run.owner, session_id=run.session_id, message_id=run.message_id, role="assistant")
        run.log.append(Event(MESSAGE_SAVED, {"message_id": run.message_id, "session_id": run.session_id,
                                             "role": "assistant"}))
        terminal = {
            "status": outcome.status, "run_id": run.run_id, "session_id": run.session_id,
            "message_id": run.message_id, "stop_reason": outcome.stop_reason, "partial": outcome.status != "done",
            "content_length": len(run.content), "route": (run.model_info or {}).get("route"),
            "finish_reason": run.finish_reason, "usage": run.usage, "timing": {"total_time_ms": elapsed_ms},
            "fallback": run.fallback,
        }
        if error:
            terminal["error"] = error
        terminal.update(run.context.terminal)
        run.log.append(Event(run.terminal_type, {"data": terminal}))
        if outcome.status == "done":
            run.log.append(Event(DONE, {"task_id": run.run_id, "thinking": run.thinking,
                                        "total_time_ms": elapsed_ms, "session_id": run.session_id}))
        elif outcome.status == "error":
            body = {"error": outcome.error, "status": outcome.http_status}
            if outcome.retry_after is not None:
                body["retry_after"] = outcome.retry_after
            run.log.append(Event(ERROR, body))
        run.log.append(Event(CLOSE, {}))

    # ---------------------------------------------------------------- stop
    def stop(self, owner: str, session_id: str, expected_run_id: Optional[str], reason: str = "stopped") -> bool:
        """Stop the session's run only when ``expected_run_id`` names it exactly; True when stopped."""
        run = self.for_session(owner, session_id)
        if run is None or not expected_run_id or run.run_id != expected_run_id or run.status != "running":
            return False
        return self._end(run, reason)

    def stop_run(self, owner: str, run_id: str, reason: str = "stopped") -> Optional[Run]:
        """Stop the owner's run by id (agent API cancel); returns the run or None when unknown."""
        run = self.get(owner, run_id)
        if run is not None and run.status == "running":
            self._end(run, reason)
        return run

    def _end(self, run: Run, reason: str) -> bool:
        """Cancel, wait for the worker to settle, and finalize from here if it does not."""
        first = run.cancel.cancel(reason)
        if not run.settled.wait(float(self.config["STOP_WAIT"])):
            self._finalize(run, self._cancel_outcome(run))
        return first or run.status != "running"

    # ---------------------------------------------------------------- subscribers
    def subscribe(self, run: Run) -> None:
        """Register a reader before it replays, so the log cannot be evicted under it."""
        with self._lock:
            run.subscribers += 1
            run.evict_at = None

    def unsubscribe(self, run: Run) -> None:
        """A reader left; a finished run starts its eviction grace when it was the last."""
        with self._lock:
            run.subscribers = max(0, run.subscribers - 1)
            if run.subscribers == 0 and run.finalized:
                self._schedule_evict(run)

    def _schedule_evict(self, run: Run) -> None:
        """Keep the finished run's log ``EVICT_GRACE`` seconds more, then free it."""
        run.evict_at = time.monotonic() + self.grace

    def _evict(self, run: Run) -> None:
        with self._lock:
            self.runs.pop(run.run_id, None)
            key = (run.owner, run.session_id)
            if self.by_session.get(key) is run:
                del self.by_session[key]
                self._session_locks.pop(key, None)
        run.log.release()

    def _evict_idle(self, free_bytes: int) -> None:
        """Free the oldest finished logs without readers until ``free_bytes`` are released."""
        idle = sorted((r for r in list(self.runs.values()) if r.finalized and r.subscribers == 0),
                      key=lambda r: r.finished_at or 0)
        for run in idle:
            if free_bytes <= 0:
                break
            free_bytes -= run.log.bytes
            self._evict(run)

    # ---------------------------------------------------------------- janitor
    def _ensure_janitor(self) -> None:
        if self._janitor is None or not self._janitor.is_alive():
            self._janitor = threading.Thread(target=self._janitor_loop, name="run-janitor", daemon=True)
            self._janitor.start()

    def _janitor_interval(self) -> float:
        limits = [0.5, self.grace / 4, float(self.config["RUN_IDLE_TIMEOUT"]) / 4]
        return max(0.02, min(limits))

    def _janitor_loop(self) -> None:
        """Watchdog and evictor: one loop for the whole process."""
        while not self._closing.wait(self._janitor_interval()):
            try:
                self.sweep()
            except Exception:
                log.exception("run janitor sweep failed")

    def sweep(self) -> None:
        """End runs past their limits and evict logs whose grace has passed."""
        now = time.monotonic()
        wall, idle = float(self.config["RUN_WALL_TIMEOUT"]), float(self.config["RUN_IDLE_TIMEOUT"])
        for run in list(self.runs.values()):
            if run.status == "running" and not run.cancel.cancelled:
                if now - run.started_monotonic > wall:
                    threading.Thread(target=self._end, args=(run, "timeout:wall"), daemon=True).start()
                elif now - run.last_event_monotonic > idle:
                    threading.Thread(target=self._end, args=(run, "timeout:idle"), daemon=True).start()
            elif run.evict_at is not None and now >= run.evict_at and run.subscribers == 0:
                self._evict(run)

    def close(self) -> None:
        """Stop the janitor (tests and shutdown)."""
        self._closing.set()

    # ---------------------------------------------------------------- recovery
    def recover_interrupted(self) -> List[str]:
        """Mark runs a dead process left ``running`` as ``interrupted``, saving their partial reply."""
        recovered = []
        for row in self.store.runs.running():
            if row["run_id"] in self.runs:
                continue
            metadata = {"run_id": row["run_id"], "status": "interrupted", "stop_reason": "interrupted",
                        "stopped": False, "partial": True, "interrupted": True}
            self.store.runs.finish_with_message(
                row, status="interrupted", stop_reason="interrupted", error="the server restarted during this run",
                content=row.get("partial_content") or "", thinking=row.get("partial_thinking") or "",
                metadata=metadata, event_count=row.get("event_count") or 0,
                last_event_type=row.get("last_event_type"))
            recovered.append(row["run_id"])
        return recovered
