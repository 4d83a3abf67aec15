"""The plain chat turn: session history in, one streamed completion out.

No Flask and no SQL here: the route hands over the history it read, and the run
engine drives the generator this returns.
"""

from __future__ import annotations

from typing import Callable, Iterator, List, Optional

from .context import Injection, apply_injections
from .events import NOTICE, Event
from .llm.base import ChatRequest
from .llm.llm_core import Candidate, stream_route
from .runs.run import RunContext


def model_messages(history: List[dict], system_prompt: Optional[str] = None) -> List[dict]:
    """Turn stored messages into the provider message list.

    Failed or stopped replies with no text are left out: they carry nothing the model needs.
    """
    messages: List[dict] = []
    if system_prompt:
        messages.append({"role": "system", "content": system_prompt})
    for row in history:
        if row["role"] not in ("user", "assistant", "system"):
            continue
        if row["role"] == "assistant" and not row.get("content"):
            continue
        messages.append({"role": row["role"], "content": row["content"]})
    return messages


#: Gathers this turn's context injections inside the run (see ``odysseus.context``).
Gather = Callable[[RunContext], List[Injection]]


def announce(injections: List[Injection], context: RunContext) -> Iterator[Event]:
    """The injections' events and notices, in order, and their metadata folded into the saved reply."""
    from .context.turn_window import merged  # one memories_used for pinned + recalled memories

    for injection in merged(injections):
        if injection.event is not None:
            yield injection.event
        if injection.notice:
            yield Event(NOTICE, {"message": injection.notice, "source": injection.source})
        context.metadata.update(injection.metadata)


def chat_turn(candidates: List[Candidate], history: List[dict], temperature: Optional[float] = None,
              system_prompt: Optional[str] = None, gather: Optional[Gather] = None, window=None):
    """Return a turn generator function for the run engine.

    ``window`` (a ``context.turn_window.TurnWindow``) compacts, trims and measures the turn;
    without it the whole history is sent as it is.
    """
    messages = model_messages(history, system_prompt)

    def turn(context: RunContext) -> Iterator[Event]:
        injections = gather(context) if gather is not None else []
        if window is None:
            yield from announce(injections, context)
            final = apply_injections(messages, injections)
        else:  # the model's window (odysseus.context.turn_window): summaries, trimming, context events
            final = yield from window.prepare(context, history, lambda rows: model_messages(rows, system_prompt),
                                              injections)
        request = ChatRequest(model=candidates[0].model, messages=final, temperature=temperature,
                              max_tokens=window.max_tokens if window is not None else None)
        stream = stream_route(candidates, request, context.cancel)
        yield from (window.measured(stream, context) if window is not None else stream)

    return turn
