"""Running the context pipeline in front of a turn that builds its own model messages (agent mode)."""

from __future__ import annotations

from typing import Callable, Iterator, List

from ..turns.messages import Gather, announce
from ..events import Event
from . import apply_injections


def with_context(turn: Callable, messages: List[dict], gather: Gather) -> Callable:
    """``turn`` preceded by the pipeline: its events are announced first and its injections are
    applied to ``messages`` (in place: the list the turn will send) before the turn starts."""

    def wrapped(ctx) -> Iterator[Event]:
        injections = gather(ctx)
        yield from announce(injections, ctx)
        messages[:] = apply_injections(messages, injections)
        yield from turn(ctx)

    return wrapped
