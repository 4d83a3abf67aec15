"""The tool registry: what the model is offered, and how one call is executed.

A ``Tool`` is a name, a description, a JSON schema for its arguments, whether it needs
the user's approval, and ``run(args, ctx) -> ToolResult``. ``execute`` never raises for
a tool's own failure: the exception becomes an error result (exit code 1) that the model
sees, so the agent loop goes on. Tools never import Flask or the store; whatever they
need from outside (saving an image, the workspace root) arrives in the ``ToolContext``.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional

from ..cancel import CancelToken
from ..events import Event


class ToolError(Exception):
    """An expected tool failure: its message is the error result the model sees."""


@dataclass
class ToolResult:
    """What a tool produced: text for the model, an exit code, extra UI events, metadata."""

    output: str
    exit_code: int = 0
    events: List[Event] = field(default_factory=list)
    meta: dict = field(default_factory=dict)


_SAFE = re.compile(r"[^A-Za-z0-9_.-]")


def safe_segment(value: str) -> str:
    """A path segment made from an id: no separators, no dot-dot."""
    cleaned = _SAFE.sub("_", value or "_").strip(".") or "_"
    return cleaned[:120]


@dataclass
class ToolContext:
    """What a running tool may know and touch: its owner, session, cancel token and config."""

    owner: str
    session_id: str
    cancel: CancelToken
    config: dict
    workspace_root: str = ""
    progress: Callable[[str], None] = lambda line: None
    #: a structured progress report ``{progress, total?, message?}`` (an MCP progress notification):
    #: its own ``tool_progress`` at once, where ``progress`` lines are gathered for the next interval
    report: Callable[[dict], None] = lambda data: None
    #: save_image(data, mime) -> URL served by us; None when images cannot be stored
    save_image: Optional[Callable[[bytes, str], str]] = None
    #: a host directory chosen for this turn (odysseus.context.workspace), used instead of the session's
    workspace_dir: str = ""
    #: the owner's memories for manage_memory (odysseus.context.memories.MemoryBook); None: not available
    memory: Optional[Any] = None
    #: whether code tools may reach the network (an admin's per-profile setting)
    network: bool = False

    def workspace(self) -> str:
        """The chosen workspace, else the session's working directory (created 0700 at every level)."""
        if self.workspace_dir:
            return self.workspace_dir
        if not self.workspace_root:
            raise ToolError("no workspace directory is configured")
        path = self.workspace_root
        for segment in (safe_segment(self.owner), safe_segment(self.session_id)):
            if not os.path.isdir(path):
                os.makedirs(path, mode=0o700, exist_ok=True)
            path = os.path.join(path, segment)
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
        return path


@dataclass
class Tool:
    """One tool the model may call."""

    name: str
    description: str
    parameters: dict
    run: Callable[[dict, ToolContext], ToolResult]
    needs_approval: bool = False
    timeout: Optional[float] = None  # None: the TOOL_TIMEOUT default
    #: the full command shown in tool_start (the code, the query, the URL)
    describe: Optional[Callable[[dict], str]] = None
    #: internal tools show only the events they produce (an exhibit), never a tool row
    internal: bool = False
    #: preview(ctx) -> an object with ``feed(fragment) -> [Event]`` and ``finish() -> [Event]`` that the
    #: agent loop feeds the call's arguments while they stream (a live document preview)
    preview: Optional[Callable[["ToolContext"], Any]] = None
    #: where the tool comes from when it is not ours: an MCP server's ``{"server": ..., "tool": ...}``
    origin: Optional[dict] = None

    def spec(self) -> dict:
        """The OpenAI function-tool shape the provider layer translates."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }

    def full_command(self, args: dict) -> str:
        """The exact call as a user would read it."""
        if self.describe is not None:
            try:
                return self.describe(args)
            except Exception:  # a malformed argument must not break the display
                pass
        return f"{self.name}({json.dumps(args, ensure_ascii=False, sort_keys=True)})"


def short_command(full: str, limit: int = 120) -> str:
    """The first line of a command, cut to ``limit`` characters for a tool row's title."""
    first = full.strip().splitlines()[0] if full.strip() else ""
    if len(first) > limit or "\n" in full.strip():
        return first[: limit - 1].rstrip() + "\u2026"
    return first


class ToolRegistry:
    """The tools offered to the model, by name."""

    def __init__(self, tools: Iterable[Tool] = ()):
        self.tools: Dict[str, Tool] = {}
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool) -> None:
        """Offer ``tool`` (replacing one of the same name)."""
        self.tools[tool.name] = tool

    def get(self, name: str) -> Optional[Tool]:
        """The tool called ``name``, or None."""
        return self.tools.get(name)

    def names(self) -> List[str]:
        """Every tool name, in registration order."""
        return list(self.tools)

    def specs(self) -> List[dict]:
        """The tool list for a ChatRequest."""
        return [tool.spec() for tool in self.tools.values()]


def execute(tool: Tool, args: dict, ctx: ToolContext) -> ToolResult:
    """Run ``tool``; any exception becomes an error result the model can read."""
    try:
        result = tool.run(args, ctx)
    except ToolError as exc:
        return ToolResult(f"Error: {exc}", exit_code=1, meta={"error": str(exc)})
    except Exception as exc:  # noqa: BLE001 - a tool bug is reported to the model, not raised
        message = f"{type(exc).__name__}: {exc}"[:500]
        return ToolResult(f"Error: the tool failed ({message})", exit_code=1, meta={"error": message})
    if not isinstance(result, ToolResult):
        return ToolResult(str(result))
    return result
