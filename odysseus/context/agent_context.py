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

from ..chat_turn import announce
from ..events import Event
from ..runs.run import RunContext
from . import Injection, apply_injections

Gather = Callable[[RunContext], List[Injection]]
Turn = Callable[[RunContext], Iterator[Event]]


def with_context(turn: Turn, state: dict, gather: Optional[Gather]) -> Turn:
    """``turn`` preceded by the context pipeline (``gather`` None: a continued task, nothing gathered)."""

    def wrapped(ctx: RunContext) -> Iterator[Event]:
        if gather is not None:
            injections = gather(ctx)
            yield from announce(injections, ctx)
            state["messages"][:] = apply_injections(state["messages"], injections)
            if ctx.metadata.get("workspace"):
                state["workspace"] = ctx.metadata["workspace"]
        elif state.get("workspace"):
            ctx.metadata["workspace"] = state["workspace"]
        yield from turn(ctx)

    return wrapped
