"""Chat mode: session history in, one streamed completion out.

``build_chat_turn`` is the mode's builder (``turns/registry.py``); with ``active_doc_id`` it
hands over to the document chat (``turns/document.py``). ``chat_turn`` is what the run executes.
No Flask and no SQL here: the engine hands over the history it read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Generator, Iterator, List, Optional

from ..context import apply_injections
from ..context.turn_window import overflow_count
from ..errors import ProviderError
from ..events import DELTA, NOTICE, TOOL_CALL, TOOL_CALL_DELTA, Event
from ..llm.base import ChatRequest
from ..llm.llm_core import Candidate, stream_route
from ..runs.run import RunContext
from ..runs.start import Turn
from . import document
from .messages import Gather, announce, model_messages
from .registry import PreparedTurn, register_mode
from .request import TurnRequest

if TYPE_CHECKING:
    from ..context.turn_window import TurnWindow
    from .start import TurnService


def chat_turn(
    candidates: List[Candidate],
    history: List[Dict[str, Any]],
    temperature: Optional[float] = None,
    system_prompt: Optional[str] = None,
    gather: Optional[Gather] = None,
    window: Optional["TurnWindow"] = None,
) -> Turn:
    """Return a turn generator function for the run engine.

    ``window`` (a ``context.turn_window.TurnWindow``) compacts, trims and measures the turn;
    without it the whole history is sent as it is.
    """
    messages = model_messages(history, system_prompt)

    def build(rows: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
        return model_messages(rows, system_prompt)

    def turn(context: RunContext) -> Iterator[Event]:
        injections = gather(context) if gather is not None else []

        def refit(real: int, correction: float, how: str) -> Generator[Event, None, List[Dict[str, Any]]]:
            """The conversation fitted again with the provider's real count (a notice says so)."""
            assert window is not None
            yield _refitted_notice(context, real, how)
            fitted: List[Dict[str, Any]] = yield from window.prepare(
                context, history, build, injections, correction=correction
            )
            return fitted

        if window is None:
            yield from announce(injections, context)
            final = apply_injections(messages, injections)
        else:  # the model's window (odysseus.context.turn_window): summaries, trimming, context events
            final = yield from window.prepare(context, history, build, injections)
            real = window.counted(context, final)
            correction = window.recalibrated(context, real) if real else None
            if real and correction is not None:  # counted over the budget: fit again with that count, then send
                final = yield from refit(real, correction, "counted")
                window.counted(context, final)  # the count of what is sent, for the reply's metadata
        for attempt in (1, 2):
            request = ChatRequest(
                model=candidates[0].model,
                messages=final,
                temperature=temperature,
                max_tokens=window.max_tokens if window is not None else None,
            )
            stream = stream_route(candidates, request, context.cancel)
            started = False
            try:
                for event in window.measured(stream, context) if window is not None else stream:
                    started = started or event.type in OUTPUT
                    yield event
                return
            except ProviderError as exc:
                real = overflow_count(exc.message) if window is not None and not started and attempt == 1 else None
                correction = window.recalibrated(context, real) if window is not None and real else None
                if correction is None or window is None or not real:
                    raise
            # The provider counted more tokens than estimated (a denser tokenizer): trim again with its count
            # and retry once; the reply's usage then calibrates the next turns (tokens.correction_from).
            final = yield from refit(real, correction, "refused")

    return turn


def _refitted_notice(context: RunContext, real: int, how: str) -> Event:
    """The notice of a conversation fitted again with the provider's real token count (``how``:
    "counted" before sending, or "refused": the provider refused the request and stated it)."""
    estimated = context.metadata.get("context", {}).get("estimated_tokens")
    verb = "counted" if how == "counted" else "refused the request at"
    return Event(
        NOTICE,
        {
            "message": f"The model {verb} {real} tokens where about {estimated} were estimated; "
            "the conversation was fitted again.",
            "source": "window",
        },
    )


#: events that mean the reply has started (after them a failed request is not retried)
OUTPUT = (DELTA, TOOL_CALL, TOOL_CALL_DELTA)


def build_chat_turn(
    turns: "TurnService", request: TurnRequest, candidates: List[Candidate], owner: str
) -> PreparedTurn:
    """Chat mode's builder: a plain completion, or the document chat when a document is open."""
    if request.active_doc_id:  # an open editor document: chat with the document tools
        return document.build_document_chat_turn(turns, request, candidates, owner)
    gather = turns.gather(owner, request)
    window = turns.window(request, candidates)  # the model's window: compaction, trimming (issue 17)
    return PreparedTurn(
        request.message,
        request.client_message_id,
        lambda history: chat_turn(
            candidates, history, request.temperature, request.system_prompt, gather=gather, window=window
        ),
    )


def init_app(app: Any) -> None:
    """Register chat mode."""
    register_mode(app, "chat", build_chat_turn)
