"""The plain chat turn: session history in, one streamed completion out.

No Flask and no SQL here: the route hands over the history it read, and the run
engine drives the generator this returns.
"""

from __future__ import annotations

from typing import Iterator, List, Optional

from .events import Event
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


def chat_turn(candidates: List[Candidate], history: List[dict], temperature: Optional[float] = None,
              system_prompt: Optional[str] = None):
    """Return a turn generator function for the run engine."""
    request = ChatRequest(model=candidates[0].model, messages=model_messages(history, system_prompt),
                          temperature=temperature)

    def turn(context: RunContext) -> Iterator[Event]:
        yield from stream_route(candidates, request, context.cancel)

    return turn
