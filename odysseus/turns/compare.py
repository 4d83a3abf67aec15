"""Compare mode: one model's reply streamed straight from the provider (no run, nothing detached).

The spec's rule holds: a pane streams directly and ends when its fetch is cancelled. What it
produced is kept (issue 35): the page first stores the question once (``POST /api/compare/start``,
``store/compare_replies.py``), then sends one ``mode: "compare"`` request per model with
``compare_of`` (the question's id). Each pane's reply is saved once, as an alternative reply to the
question: opened when the pane starts, written as it streams, and finished when it ends, cut
(``stopped``, the partial text) or not. A pane without ``compare_of`` (an older page) stores nothing.

A pane's model sees what a chat turn's would: the owner's system prompt, the conversation up to the
question, and the context sources (attachments, memories, ...), whose events it streams first.
``start_compare`` checks everything before the response starts; closing the generator it returns
(the client left) closes the provider's connection and saves the partial reply.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Optional

from ..cancel import CancelToken
from ..errors import BadRequest
from ..context import apply_injections
from ..context.turn_window import merged
from ..events import DELTA, DONE, ERROR, NOTICE, Event
from ..llm.base import ChatRequest
from ..llm.llm_core import Candidate, stream_route
from ..store import compare_replies
from .messages import model_messages
from .request import TurnRequest

if TYPE_CHECKING:
    from .start import TurnService

MAX_ROW_ID = 9223372036854775807


@dataclass
class ComparePane:
    """A pane's events, and the id of the reply they are saved as (None: an unsaved pane)."""

    events: Iterator[Event]
    reply_id: Optional[int] = None
    session_id: Optional[str] = None
    headers: Dict[str, str] = field(default_factory=dict)
    discard: Callable[[], None] = lambda: None


def start_question(turns: "TurnService", owner: str, request: TurnRequest, models: List[str]) -> Dict[str, Any]:
    """Store a comparison's question (and its attachments' metadata) once; 404 for a foreign session."""
    from .start import session_title

    for model in models:
        turns.router.resolve(model)  # 404 for an unknown model before anything is stored
    if request.session_id:
        turns.store.sessions.get(owner, request.session_id)
    context_meta = turns.pipeline.check(turns.context_request(owner, as_chat(request), request.session_id))
    return compare_replies.store_question(
        turns.store.locked,
        owner,
        request.session_id,
        session_title(request.message),
        request.message,
        models,
        context_meta,
    )


def start_compare(turns: "TurnService", owner: str, request: TurnRequest) -> ComparePane:
    """Validate a pane (404 for an unknown model, session or question) and return its events."""
    request, _ = turns.resolve(owner, request)  # the owner's system prompt and temperature
    candidates = turns.router.resolve(request.model)
    question_id = compare_of(request.extra)
    if question_id is not None and not request.session_id:
        raise BadRequest("compare_of needs the session the question is in")
    newest = int(turns.config["HISTORY_CONTEXT_MESSAGES"])
    history: List[Dict[str, Any]] = []
    if request.session_id:
        turns.store.sessions.get(owner, request.session_id)
    turns.pipeline.check(turns.context_request(owner, as_chat(request), request.session_id))  # attachment ids, ...
    if question_id is None:  # an older page: the pane answers the message, nothing is stored
        if request.session_id:
            history = turns.store.messages.recent(owner, request.session_id, newest)
        history = history + [{"role": "user", "content": request.message}]
        return ComparePane(_events(turns, owner, request, candidates, history, None))
    session_id: str = request.session_id or ""
    model = request.model or candidates[0].route_id
    opened = compare_replies.open_pane(turns.store.locked, owner, session_id, question_id, model)
    # The question as stored answers, with its attachments; the conversation up to it is the history.
    request = _with_message(request, opened["question"])
    if not request.context.attachments:
        chips = opened["question_metadata"].get("attachments") or []
        ids = tuple(str(c["id"]) for c in chips if isinstance(c, dict) and c.get("id"))
        request = replace(request, context=replace(request.context, attachments=ids))
    history = turns.store.messages.recent(owner, session_id, newest, head=question_id)
    saver = _Saver(turns, owner, opened["reply_id"], model)
    pane = ComparePane(_events(turns, owner, request, candidates, history, saver), opened["reply_id"], session_id)
    pane.headers = {"X-Odysseus-Message-Id": str(opened["reply_id"]), "X-Odysseus-Session-Id": session_id}
    # the response refused before it streamed (no free stream slot): the empty reply goes again
    pane.discard = lambda: compare_replies.discard_pane(turns.store.locked, owner, opened["reply_id"])
    return pane


def compare_of(extra: Any) -> Optional[int]:
    """The ``compare_of`` field: the question's message id, or None."""
    value = extra.get("compare_of")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_ROW_ID:
        raise BadRequest("compare_of must be a message id (a positive whole number)")
    return value


def as_chat(request: TurnRequest) -> TurnRequest:
    """The request as the context sources see it: a pane gets the context a chat turn gets."""
    return replace(request, mode="chat")


def _with_message(request: TurnRequest, message: str) -> TurnRequest:
    return replace(request, message=message)


class _Saver:
    """Writes one pane's reply: now and then while it streams, and once when it ends."""

    def __init__(self, turns: "TurnService", owner: str, reply_id: int, model: str):
        self.turns, self.owner, self.reply_id, self.model = turns, owner, reply_id, model
        self.text: List[str] = []
        self.thinking: List[str] = []
        self.metadata: Dict[str, Any] = {}
        self.flushed = time.monotonic()
        self.dirty = False

    def add(self, event: Event) -> None:
        if event.type != DELTA:
            return
        (self.thinking if event.data.get("thinking") else self.text).append(str(event.data.get("delta") or ""))
        self.dirty = True
        if time.monotonic() - self.flushed >= compare_replies.FLUSH_SECONDS:
            self.save("stopped")

    def save(self, status: str, error: Optional[str] = None) -> None:
        compare_replies.save_pane(
            self.turns.store.locked,
            self.owner,
            self.reply_id,
            self.model,
            "".join(self.text),
            "".join(self.thinking),
            status,
            error,
            self.metadata,
        )
        self.flushed = time.monotonic()
        self.dirty = False


def _events(
    turns: "TurnService",
    owner: str,
    request: TurnRequest,
    candidates: List[Candidate],
    history: List[Dict[str, Any]],
    saver: Optional[_Saver],
) -> Iterator[Event]:
    """Context events, the provider's events, then ``done``; a failure becomes the ``error`` event."""
    cancel = CancelToken()
    status, error = "stopped", None  # what a pane cut off (the client left) is saved as
    try:
        context = turns.context_request(owner, as_chat(request), request.session_id, cancel=cancel)
        injections = turns.pipeline.gather(context)
        for injection in merged(injections):
            if injection.event is not None:
                yield injection.event
            if injection.notice:
                yield Event(NOTICE, {"message": injection.notice, "source": injection.source})
            if saver is not None:
                saver.metadata.update(injection.metadata)
        messages = apply_injections(model_messages(history, request.system_prompt), injections)
        chat = ChatRequest(model=candidates[0].model, messages=messages, temperature=request.temperature)
        for event in stream_route(candidates, chat, cancel):
            if saver is not None:
                saver.add(event)
            yield event
        status = "done"
        yield Event(DONE, {})
    except GeneratorExit:
        raise
    except Exception as exc:  # noqa: BLE001 - every failure becomes the stream's error event
        status, error = "failed", getattr(exc, "message", "Internal error")
        yield Event(ERROR, {"error": error, "status": getattr(exc, "status", 500)})
    finally:
        cancel.cancel("client_gone")  # closes the provider connection when the client leaves
        if saver is not None:
            saver.save(status, error)
