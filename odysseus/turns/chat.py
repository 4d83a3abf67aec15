"""The plain chat turn: session history in, one streamed completion out.

No Flask and no SQL here: the route hands over the history it read, and the run
engine drives the generator this returns.
"""

from __future__ import annotations

from typing import Iterator, List, Optional

from ..context import apply_injections
from ..events import Event
from ..llm.base import ChatRequest
from ..llm.llm_core import Candidate, stream_route
from ..runs.run import RunContext
from .messages import Gather, announce, model_messages


def chat_turn(
    candidates: List[Candidate],
    history: List[dict],
    temperature: Optional[float] = None,
    system_prompt: Optional[str] = None,
    gather: Optional[Gather] = None,
    window=None,
):
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
            final = yield from window.prepare(
                context, history, lambda rows: model_messages(rows, system_prompt), injections
            )
        request = ChatRequest(
            model=candidates[0].model,
            messages=final,
            temperature=temperature,
            max_tokens=window.max_tokens if window is not None else None,
        )
        stream = stream_route(candidates, request, context.cancel)
        yield from (window.measured(stream, context) if window is not None else stream)

    return turn
