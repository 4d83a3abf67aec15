"""One detached run: its identity, log, cancel token and what it has produced so far."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from ..cancel import CancelToken, SettledToken
from ..events import DELTA, FALLBACK, FINISH, METRICS, MODEL_INFO, USAGE, Event
from .run_log import RunLog


@dataclass
class RunContext:
    """What a turn generator may know and touch of its run."""

    run_id: str
    session_id: str
    owner: str
    cancel: CancelToken
    #: merged into the saved assistant message's metadata (tool events, approvals, ...)
    metadata: Dict[str, Any] = field(default_factory=dict)
    #: merged into the terminal record (per-round partial text, route ids, ...)
    terminal: Dict[str, Any] = field(default_factory=dict)


_SETTLED: Optional[threading.Event] = None
_SETTLED_LOCK: Optional[threading.Lock] = None


def _settled_event_and_lock() -> "tuple[threading.Event, threading.Lock]":
    """The event (set once, never cleared: every wait returns at once) and the lock every settled run
    shares; made on first use, so after gevent's patch when serving."""
    global _SETTLED, _SETTLED_LOCK
    if _SETTLED is None or _SETTLED_LOCK is None:
        _SETTLED, _SETTLED_LOCK = threading.Event(), threading.Lock()
        _SETTLED.set()
    return _SETTLED, _SETTLED_LOCK


@dataclass
class Outcome:
    """How a run ended: ``status`` is one of done, error, stopped, interrupted."""

    status: str
    stop_reason: Optional[str] = None
    error: Optional[str] = None
    http_status: Optional[int] = None
    retry_after: Optional[float] = None
    timeout: Optional[str] = None  # "idle" or "wall" when the watchdog ended it


class Run:
    """A turn running in its own greenlet, writing into its numbered log.

    A ``__slots__`` class: the replay window holds hundreds of finished runs, and an instance
    ``__dict__`` of this many attributes is about a kilobyte of each. For the same reason a run
    that has settled drops what only its live turn needed (``settle``).
    """

    __slots__ = (
        "run_id",
        "session_id",
        "owner",
        "mode",
        "model",
        "client_message_id",
        "user_message_id",
        "log",
        "terminal_type",
        "cancel",
        "context",
        "follows_reply",
        "created_at",
        "started_monotonic",
        "last_event_monotonic",
        "finished_at",
        "status",
        "stop_reason",
        "error",
        "message_id",
        "content_parts",
        "thinking_parts",
        "model_info",
        "usage",
        "metrics",
        "finish_reason",
        "fallback",
        "subscribers",
        "evict_at",
        "settled",
        "lock",
        "finalized",
    )

    def __init__(
        self,
        *,
        run_id: str,
        session_id: str,
        owner: str,
        mode: str,
        model: str,
        client_message_id: Optional[str],
        user_message_id: Optional[int],
        log: RunLog,
        terminal_type: str,
    ):
        self.run_id = run_id
        self.session_id = session_id
        self.owner = owner
        self.mode = mode
        self.model = model
        self.client_message_id = client_message_id
        self.user_message_id = user_message_id
        self.log = log
        self.terminal_type = terminal_type
        self.cancel = CancelToken()
        #: what the turn generator gets; None once the run has settled (``settle``)
        self.context: Optional[RunContext] = RunContext(run_id, session_id, owner, self.cancel)
        self.created_at = time.time()
        self.started_monotonic = time.monotonic()
        self.last_event_monotonic = self.started_monotonic
        self.finished_at: Optional[float] = None
        self.status = "running"
        self.stop_reason: Optional[str] = None
        self.error: Optional[str] = None
        self.message_id: Optional[int] = None
        self.content_parts: List[str] = []
        self.thinking_parts: List[str] = []
        self.model_info: Optional[Dict[str, Any]] = None
        self.usage: Optional[Dict[str, Any]] = None
        self.metrics: Optional[Dict[str, Any]] = None
        self.finish_reason: Optional[str] = None
        self.fallback: Optional[Dict[str, Any]] = None
        self.subscribers = 0
        #: the history the turn was built from already held a non-blank reply (so this one is not the
        #: session's first: its title needs no look, ``chats/titles.TitleWriter``); set by the start
        self.follows_reply = False
        self.evict_at: Optional[float] = None
        self.settled = threading.Event()
        # guards finalisation against late appends; taken once per appended event and never re-entered:
        # a plain lock (a reentrant one costs a pure-Python acquire and release per event under gevent)
        self.lock = threading.Lock()
        self.finalized = False

    @property
    def content(self) -> str:
        """The assistant text so far."""
        return "".join(self.content_parts)

    @property
    def thinking(self) -> str:
        """The reasoning text so far."""
        return "".join(self.thinking_parts)

    def observe(self, event: Event) -> None:
        """Fold a produced event into the run's accumulated state."""
        self.last_event_monotonic = time.monotonic()
        kind = event.type
        if kind == DELTA:
            (self.thinking_parts if event.data.get("thinking") else self.content_parts).append(event.data["delta"])
        elif kind == MODEL_INFO:
            self.model_info = dict(event.data)
        elif kind == USAGE:
            self.usage = dict(event.data.get("data") or {})
        elif kind == METRICS:
            self.metrics = dict(event.data.get("data") or {})
        elif kind == FINISH:
            self.finish_reason = event.data.get("reason")
        elif kind == FALLBACK:
            self.fallback = dict(event.data)

    def settle(self) -> None:
        """Keep only what a finished run's readers use while it waits in the replay window.

        Called once the run has finalized, announced its end (``hooks.run_finished``) and its
        worker is done: nothing will append, observe, cancel it for real, or read its context or the
        usage, metrics, route and fallback its terminal record and saved message already carry. Its
        cancel token becomes a ``SettledToken``, its event and lock the ones every settled run
        shares (the event is set: waits return at once), the reply's parts one string each. About
        2 KB of small objects less per held run, and so fewer allocator arenas that a busy replay
        window leaves pinned after its runs are evicted (docs/benchmarks.md, "Settled runs").
        """
        self.cancel = SettledToken.of(self.cancel)
        self.context = None
        self.settled, self.lock = _settled_event_and_lock()
        self.model_info = self.usage = self.metrics = self.fallback = None
        if len(self.content_parts) > 1:
            self.content_parts = [self.content]
        if len(self.thinking_parts) > 1:
            self.thinking_parts = [self.thinking]

    def summary(self) -> Dict[str, Any]:
        """The live state for stream_status and run listings (no message text)."""
        return {
            "run_id": self.run_id,
            "session_id": self.session_id,
            "status": self.status,
            "mode": self.mode,
            "model": self.model,
            "stop_reason": self.stop_reason,
            "created_at": self.created_at,
            "updated_at": self.created_at + (self.last_event_monotonic - self.started_monotonic),
            "finished_at": self.finished_at,
            "event_count": len(self.log),
            "last_event_type": self.log.last_type,
            "error": self.error,
            "detached": True,
            "resumable": not self.log.released,
        }
