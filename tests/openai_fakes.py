"""A model server for the /v1 client tests: replies chosen by the newest user message (so concurrent
tests never take each other's reply), text paced when asked, a tool call when the client offers tools.

Markers in the user's text: ``slow`` (the long text, 0.15 s per chunk), ``long`` (the long text,
0.01 s per chunk), ``weather`` (with tools and no tool result yet: a ``get_weather`` call; after the
result: a sentence using it), anything else: ``Echo: <text>``.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List

from fakeproviders import FakeProvider, Record, Reply, openai_chunk, openai_text

#: the long reply, in 7-character chunks: about 130 chunks, with a quote, a backslash and non-ASCII in it
LONG_TEXT = " ".join(f"w{i:03d}" for i in range(150)) + ' — "quoted" \\ ü 😀 end.'
USAGE = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
WEATHER_ARGS = {"city": "Paris", "unit": "celsius"}


def pieces(text: str, size: int = 7) -> List[str]:
    """``text`` in chunks of ``size`` characters."""
    return [text[i : i + size] for i in range(0, len(text), size)]


def tool_reply(call_id: str, name: str, arguments: Dict[str, Any]) -> Reply:
    """A streamed tool call: id and name first, then the arguments in two halves."""
    args = json.dumps(arguments)
    half = len(args) // 2
    chunks = [
        openai_chunk({"role": "assistant", "content": None}),
        openai_chunk(
            {
                "tool_calls": [
                    {"index": 0, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
                ]
            }
        ),
        openai_chunk({"tool_calls": [{"index": 0, "function": {"arguments": args[:half]}}]}),
        openai_chunk({"tool_calls": [{"index": 0, "function": {"arguments": args[half:]}}]}),
        openai_chunk({}, "tool_calls"),
        openai_chunk(None, usage=USAGE),
        "data: [DONE]\n\n",
    ]
    return Reply(chunks=chunks)


def last_user_text(body: Any) -> str:
    """The newest user message's text of a chat-completions request body."""
    for message in reversed((body or {}).get("messages") or []):
        if message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else json.dumps(content)
    return ""


def choose(record: Record) -> Reply:
    """The reply for one request (see the module docstring)."""
    body = record.body or {}
    text = last_user_text(body)
    if "slow" in text:
        return Reply(chunks=openai_text(*pieces(LONG_TEXT), usage=USAGE), delay=0.15)
    if "long" in text:
        return Reply(chunks=openai_text(*pieces(LONG_TEXT), usage=USAGE), delay=0.01)
    if "weather" in text and body.get("tools"):
        results = [m for m in body.get("messages") or [] if m.get("role") == "tool"]
        if not results:
            return tool_reply("call_w1", "get_weather", WEATHER_ARGS)
        return Reply(chunks=openai_text(f"It is {results[-1]['content']} in Paris.", usage=USAGE))
    return Reply(chunks=openai_text(*pieces(f"Echo: {text}"), usage=USAGE))


def model_server() -> FakeProvider:
    """The started model server (close it when done)."""
    return FakeProvider(chooser=choose)
