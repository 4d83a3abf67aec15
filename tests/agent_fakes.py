"""In-process test doubles for agent mode: a scripted Provider, a few small tools, and the helpers of the
agent tests over /api/chat_stream (``use_script``, ``post``, ``of``; the ``agent_app`` fixture is in conftest.py)."""

from __future__ import annotations

import copy
import os
import threading
import time
from typing import Callable, List, Union

from odysseus.cancel import CancelToken
from odysseus.events import Event, delta, finish, tool_call, usage
from odysseus.llm.base import ChatRequest
from odysseus.llm.llm_core import ModelRouter
from odysseus.tools.registry import Tool, ToolContext, ToolResult

Step = Union[List[Event], Exception, Callable[[ChatRequest], List[Event]]]


def say(text: str) -> List[Event]:
    """A reply of plain text, in two chunks."""
    half = len(text) // 2
    return [delta(text[:half]), delta(text[half:]), usage(10, 5), finish("stop")]


def calls(*specs, text: str = "") -> List[Event]:
    """A reply calling tools: each spec is (call_id, name, arguments-dict-or-str)."""
    events = [delta(text)] if text else []
    for index, (call_id, name, args) in enumerate(specs):
        events.append(tool_call(call_id, name, args, index))
    return events + [usage(10, 5), finish("tool_calls")]


class ScriptedProvider:
    """Answers each request with the next scripted step and records every request."""

    kind = "scripted"

    def __init__(self, steps: List[Step], name: str = "scripted", default: Step = None):
        self.name = name
        self.default_model = "script-1"
        self.steps = list(steps)
        self.default = default
        self.requests: List[ChatRequest] = []
        self.lock = threading.Lock()

    def list_models(self):
        """The one scripted model."""
        return ["script-1"]

    def stream(self, request: ChatRequest, cancel: CancelToken):
        """Yield the next step's events."""
        with self.lock:
            self.requests.append(copy.deepcopy(request))
            if self.steps:
                step = self.steps.pop(0)
            elif self.default is not None:
                step = self.default
            else:
                step = say("(script exhausted)")
        if isinstance(step, Exception):
            raise step
        if callable(step):
            step = step(request)
        for event in step:
            if cancel.cancelled:
                return
            yield event


def echo_tool(needs_approval: bool = False, name: str = "echo") -> Tool:
    """Returns its ``text`` argument."""
    return Tool(
        name,
        "echo text",
        {"type": "object", "properties": {"text": {"type": "string"}}},
        lambda args, ctx: ToolResult(f"echo: {args.get('text')}"),
        needs_approval=needs_approval,
        describe=lambda a: f"echo {a.get('text')}",
    )


def boom_tool() -> Tool:
    """Always raises."""

    def run(args, ctx):
        raise RuntimeError("kaboom")

    return Tool("boom", "fails", {"type": "object", "properties": {}}, run)


def slow_tool(seconds: float = 5.0, counter: list = None) -> Tool:
    """Sleeps (waking on cancel), reporting a progress line every 0.05 s."""

    def run(args, ctx: ToolContext):
        if counter is not None:
            counter.append(time.time())
        end = time.monotonic() + float(args.get("seconds", seconds))
        n = 0
        while time.monotonic() < end:
            if ctx.cancel.wait(0.05):
                return ToolResult("cancelled", exit_code=130)
            n += 1
            ctx.progress(f"tick {n}")
        return ToolResult(f"slept {n} ticks")

    return Tool("slow", "sleeps", {"type": "object", "properties": {"seconds": {"type": "number"}}}, run)


def sse_frames(raw: bytes) -> list:
    """Parse a whole /api/chat_stream body into dicts with a ``type`` (delta, [DONE], error or the JSON type)."""
    import json

    from odysseus.sse import parse_sse

    frames = []
    for frame in parse_sse([raw]):
        if frame.get("comment") is not None or frame.get("data") is None:
            continue
        if frame["data"] == "[DONE]":
            frames.append({"type": "[DONE]"})
            continue
        data = json.loads(frame["data"])
        if frame.get("event") == "error":
            data = {"type": "error", **data}
        elif "type" not in data:
            data = {"type": "delta", **data}
        frames.append(data)
    return frames


# ---------------------------------------------------------------- an app's agent turns over /api/chat_stream
def use_script(app, steps):
    """Route every model of ``app`` to a ScriptedProvider playing ``steps``; return the provider."""
    provider = ScriptedProvider(steps)
    app.extensions["odysseus.router"] = ModelRouter([provider])
    return provider


def post(client, **body):
    """An agent-mode POST /api/chat_stream; (response, its frames when 200)."""
    response = client.post("/api/chat_stream", json={"mode": "agent", **body})
    frames = sse_frames(response.get_data()) if response.status_code == 200 else []
    return response, frames


def of(frames, kind):
    """The frames of one type."""
    return [f for f in frames if f["type"] == kind]


def workdir(app, session_id):
    """The single user's workspace directory of a session."""
    return os.path.join(app.config["DATA_DIR"], "workspaces", "local", session_id)


def messages(app, session_id):
    """The single user's stored messages of a session."""
    return app.extensions["odysseus.store"].messages.list("local", session_id)
