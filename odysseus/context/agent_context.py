"""The context pipeline for agent turns: the same injections and events as a chat turn.

``with_context`` wraps an agent turn: inside the run, before the loop's first round, it gathers
the app's context sources, announces their events (so ``memories_used``, ``workspace_rejected``
... come before the first delta on both projections), folds their metadata into the reply and
adds their text to the loop's model messages. A continued task (an approval answer, ``continue``)
gathers nothing new: its saved messages already hold what the task started with, and the
workspace it was given travels in its state.
"""

from __future__ import annotations

from typing import Callable, Iterator, List, Optional

from ..turns.messages import announce
from ..events import Event
from ..runs.run import RunContext
from . import Injection, apply_injections

Gather = Callable[[RunContext], List[Injection]]
Turn = Callable[[RunContext], Iterator[Event]]


def with_context(
    turn: Turn,
    state: dict,
    gather: Optional[Gather],
    window=None,
    history: Optional[List[dict]] = None,
    build: Optional[Callable] = None,
) -> Turn:
    """``turn`` preceded by the context pipeline (``gather`` None: a continued task, nothing gathered).

    With ``window`` (``turn_window.TurnWindow``) the messages are compacted (a new task, rebuilt
    from ``history`` rows with ``build``), trimmed to the model's window and measured.
    """

    def wrapped(ctx: RunContext) -> Iterator[Event]:
        injections = gather(ctx) if gather is not None else []
        if window is not None:  # the model's window (odysseus.context.turn_window)
            new_task = gather is not None and build is not None
            state["messages"][:] = yield from window.prepare(
                ctx,
                history or [],
                build if new_task else None,
                injections,
                base=None if new_task else list(state["messages"]),
            )
        elif gather is not None:
            yield from announce(injections, ctx)
            state["messages"][:] = apply_injections(state["messages"], injections)
        if gather is not None and ctx.metadata.get("workspace"):
            state["workspace"] = ctx.metadata["workspace"]
        elif gather is None and state.get("workspace"):
            ctx.metadata["workspace"] = state["workspace"]
        yield from (window.measured(turn(ctx), ctx) if window is not None else turn(ctx))

    return wrapped
