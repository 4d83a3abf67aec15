"""Bounded work for a research job: model calls with their own time limit, and waits that stay alive.

A model call gets a child ``CancelToken``: cancelling the job's token cancels it, and so does
its own timer, which is how a per-call time limit reaches the provider's socket. A call that
ran out of time raises ``CallTimeout``; a cancelled job raises ``Cancelled``; a provider
failure stays a ``ProviderError``.

``wait_on`` runs blocking work in a worker (a greenlet under gevent) while the turn polls for
it: cancel is noticed within a quarter second, and every ``interval`` seconds the turn yields
a progress event, so a slow local model never trips the run's idle watchdog.
"""

from __future__ import annotations

import queue
import threading
from typing import Callable, Generator, List, Optional, TypeVar

from ..cancel import Cancelled, CancelToken
from ..errors import OdysseusError, ProviderError
from ..events import DELTA, Event
from ..llm.base import ChatRequest
from ..llm.llm_core import Candidate, stream_route

T = TypeVar("T")
POLL = 0.25


class CallTimeout(OdysseusError):
    """A model call took longer than its limit."""

    status = 504


class ResearchFailed(OdysseusError):
    """The job cannot go on: the model or the search backend does not answer."""

    status = 502


def child_token(parent: CancelToken) -> tuple:
    """A token cancelled with ``parent``; returns (token, unlink)."""
    child = CancelToken()
    unlink = parent.on_cancel(lambda: child.cancel(parent.reason or "stopped"))
    return child, unlink


def ask(
    candidates: List[Candidate],
    messages: List[dict],
    cancel: CancelToken,
    timeout: float,
    on_text: Optional[Callable[[int], None]] = None,
) -> str:
    """The text of one completion (reasoning dropped), within ``timeout`` seconds."""
    call, unlink = child_token(cancel)
    timer = threading.Timer(max(0.01, timeout), call.cancel, args=("call_timeout",))
    timer.daemon = True
    timer.start()
    parts: List[str] = []
    size = 0
    try:
        request = ChatRequest(model=candidates[0].model, messages=messages, temperature=0.2)
        for event in stream_route(candidates, request, call):
            if event.type == DELTA and not event.data.get("thinking"):
                parts.append(event.data["delta"])
                size += len(event.data["delta"])
                if on_text is not None:
                    on_text(size)
    except (Cancelled, ProviderError):
        if cancel.cancelled:
            raise Cancelled(cancel.reason or "stopped") from None
        if call.cancelled:
            raise CallTimeout(f"the model did not answer within {timeout:.0f} s") from None
        raise
    finally:
        timer.cancel()
        unlink()
    return "".join(parts)


def offload(fn: Callable[..., T], *args) -> T:
    """Run CPU-bound ``fn`` (HTML parsing) in gevent's thread pool when gevent is in charge."""
    try:
        from gevent import get_hub, monkey
    except ImportError:  # pragma: no cover - gevent is a dependency
        return fn(*args)
    if monkey.is_module_patched("threading"):
        return get_hub().threadpool.apply(fn, args)
    return fn(*args)


def wait_on(
    work: Callable[[], T], cancel: CancelToken, interval: float, beat: Callable[[float], Event]
) -> Generator[Event, None, T]:
    """Run ``work`` in a worker; yield ``beat(waited)`` every ``interval`` s; return its result.

    Use as ``result = yield from wait_on(...)``. Raises what ``work`` raised, or ``Cancelled``.
    """
    box: "queue.Queue" = queue.Queue(maxsize=1)

    def run() -> None:
        try:
            box.put((True, work()))
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting turn
            box.put((False, exc))

    threading.Thread(target=run, name="research-work", daemon=True).start()
    waited = since_beat = 0.0
    while True:
        try:
            ok, value = box.get(timeout=POLL)
        except queue.Empty:
            if cancel.cancelled:
                raise Cancelled(cancel.reason or "stopped") from None
            waited += POLL
            since_beat += POLL
            if since_beat >= interval:
                since_beat = 0.0
                yield beat(waited)
            continue
        if ok:
            return value
        raise value
