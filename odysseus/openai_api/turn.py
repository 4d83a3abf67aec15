"""What a /v1 turn runs: the conversation the client gave (and, with ``previous_response_id``, the one
stored before it) sent to the model with the client's tools; a tool call comes back as a logged
``function_call`` event for the client to run. No Flask, no SQL: the run engine drives it.

Every /v1 turn, also an agent's or a workflow's, is wrapped by ``recorded``: it folds the events
the engine accepted into the response's output shape (``ResponseFold.shape``), which the saved
reply keeps in ``metadata.openai.output`` so the response object can be rebuilt after the replay
window (``odysseus.openai_api.stored``).
"""

from __future__ import annotations

import json
from typing import Any, Dict, Iterator, List, Optional

from ..events import FUNCTION_CALL, TOOL_CALL, Event
from ..llm.base import ChatRequest
from ..llm.llm_core import Candidate, stream_route
from ..runs.engine import Turn
from ..runs.run import RunContext
from .head import ResponseHead
from .responses_wire import ResponseFold

#: the key of the saved messages' metadata this API writes (user: the input items; reply: the output shape)
META = "openai"


def conversation(history: List[Dict[str, Any]], instructions: Optional[str]) -> List[Dict[str, Any]]:
    """The provider messages of a /v1 session: each stored user message's input items as the client sent
    them, each reply with the function calls it made, the instructions first (never carried over)."""
    messages: List[Dict[str, Any]] = [{"role": "system", "content": instructions}] if instructions else []
    for row in history:
        role, meta = row["role"], (row.get("metadata") or {}).get(META) or {}
        if role == "user" and isinstance(meta.get("input"), list):
            messages.extend(meta["input"])
        elif role == "assistant":
            calls = meta.get("function_calls") or []
            if not row.get("content") and not calls:
                continue  # a failed or stopped reply with nothing in it
            message: Dict[str, Any] = {"role": "assistant", "content": row.get("content") or ""}
            if calls:
                message["tool_calls"] = [
                    {
                        "id": c["call_id"],
                        "type": "function",
                        "function": {"name": c["name"], "arguments": c["arguments"]},
                    }
                    for c in calls
                ]
            messages.append(message)
        elif role in ("user", "system"):
            messages.append({"role": role, "content": row.get("content") or ""})
    return messages


def api_turn(
    candidates: List[Candidate],
    history: List[Dict[str, Any]],
    head: ResponseHead,
    provider_tools: Optional[List[Dict[str, Any]]],
    extra: Dict[str, Any],
) -> Turn:
    """The turn generator of a chat-model /v1 request (Responses or Chat Completions)."""
    messages = conversation(history, head.instructions)

    def turn(context: RunContext) -> Iterator[Event]:
        calls: List[Dict[str, Any]] = []
        context.metadata.setdefault(META, {})["function_calls"] = calls
        request = ChatRequest(
            model=candidates[0].model,
            messages=messages,
            temperature=head.temperature,
            max_tokens=head.max_output_tokens,
            tools=provider_tools or None,
            extra={"openai": dict(extra)} if extra else {},
        )
        for event in stream_route(candidates, request, context.cancel):
            if event.type == TOOL_CALL:
                data = event.data
                arguments = data.get("arguments")
                call = {
                    "call_id": str(data.get("id") or ""),
                    "name": str(data.get("name") or ""),
                    "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False),
                }
                calls.append(call)
                yield Event(FUNCTION_CALL, call)
            yield event

    return turn


def recorded(turn: Turn, head: ResponseHead) -> Turn:
    """``turn``, folding every event the engine accepted into the output shape the saved reply keeps."""

    def wrapped(context: RunContext) -> Iterator[Event]:
        fold = ResponseFold(head, emit=False, keep_text=False, shape=True)
        record = context.metadata.setdefault(META, {})
        record["output"] = fold.shape  # the same list: kept up to date
        record["events"] = 0
        for event in turn(context):
            yield event
            fold.feed(event)  # after the yield: an event the engine refused never reaches the shape
            record["events"] = fold.seq + 1  # the Responses events it made (stored.terminal_sequence)

    return wrapped
