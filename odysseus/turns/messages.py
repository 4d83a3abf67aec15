"""What every mode's turn shares: stored messages -> provider messages, and announcing context.

The chat turn (``turns.chat``), the agent loop, document and window routes all build the
model's message list with ``model_messages`` and announce their context injections with
``announce``, so these live here rather than in any one mode's module.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterator, List, Optional

from ..context import Injection
from ..events import NOTICE, Event
from ..runs.run import RunContext


def model_messages(history: List[Dict[str, Any]], system_prompt: Optional[str] = None) -> List[Dict[str, Any]]:
    """Turn stored messages into the provider message list.

    Failed or stopped replies with no text are left out: they carry nothing the model needs.
    """
    messages: List[Dict[str, Any]] = []
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
    from ..context.turn_window import merged  # one memories_used for pinned + recalled memories

    for injection in merged(injections):
        if injection.event is not None:
            yield injection.event
        if injection.notice:
            yield Event(NOTICE, {"message": injection.notice, "source": injection.source})
        context.metadata.update(injection.metadata)
