"""One tool call's execution inside an agent turn: its ``tool_start``, the run, the tool's own events,
``tool_output``, the saved row, exhibits and citations. A part of ``AgentLoop`` (which mixes it in);
the attributes below are the loop's."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Iterator, List, Optional

from ..cancel import Cancelled
from ..documents.service import record_touch
from ..events import DOC_SUGGESTIONS, DOC_UPDATE, EXHIBIT, TOOL_OUTPUT, TOOL_START, WEB_SOURCES, Event
from ..runs.run import RunContext
from ..tools.exhibits import citation_exhibit
from ..tools.registry import ToolContext, ToolRegistry, ToolResult, short_command
from .calls import cap
from .guards import AgentSettings
from .tool_runner import run_tool

if TYPE_CHECKING:
    from .agent_loop import AgentHooks

#: tools whose results are captured as a passive citation exhibit
CITATION_TOOLS = ("web_search", "web_research")


class ToolSteps:
    """``AgentLoop``'s tool execution (see the module docstring)."""

    registry: ToolRegistry
    settings: AgentSettings
    state: dict
    ctx: RunContext
    tool_ctx: Optional[ToolContext]
    meta: dict
    term: dict
    messages: List[dict]
    hooks: "AgentHooks"
    used: int
    tools_ms: float
    text_len: int

    def _execute(self, call: dict) -> Iterator[Event]:
        tool = self.registry.get(call["name"])
        round_no = self.state["round"]
        full = tool.full_command(call["arguments"]) if tool else f"{call['name']}(...)"
        command = short_command(full)
        internal = tool is not None and tool.internal  # e.g. present_exhibit: its events only, no tool row
        origin = {"mcp": dict(tool.origin)} if tool is not None and tool.origin else {}  # an MCP server's tool
        if not internal:
            yield Event(
                TOOL_START,
                {
                    "tool": call["name"],
                    "command": command,
                    "full_command": full,
                    "round": round_no,
                    "call_id": call["id"],
                    "server_id": call.get("server_id"),
                    "arguments": call["arguments"],
                    **origin,
                },
            )
        started = time.monotonic()
        if tool is None:
            result = ToolResult(
                f"Error: there is no tool named {call['name']!r}. Available: {', '.join(self.registry.names())}",
                exit_code=1,
            )
        elif call.get("error"):
            result = ToolResult(f"Error: {call['error']}", exit_code=1)
        else:
            timeout = tool.timeout if tool.timeout is not None else self.settings.tool_timeout
            assert self.tool_ctx is not None  # set by run() before the first round
            try:
                result = yield from run_tool(
                    tool,
                    call["arguments"],
                    self.tool_ctx,
                    self.ctx.cancel,
                    timeout=timeout,
                    progress_interval=self.settings.progress_interval,
                    round_no=round_no,
                    call_id=call["id"],
                )
            except Cancelled:  # the run was stopped mid-tool: the saved reply still shows the row
                self.meta["tools"].append(
                    {
                        "call_id": call["id"],
                        "server_id": call.get("server_id"),
                        "tool": call["name"],
                        "command": command,
                        "full_command": full,
                        "round": round_no,
                        "text_offset": self.text_len,
                        "cancelled": True,
                        **origin,
                    }
                )
                raise
        self.tools_ms += (time.monotonic() - started) * 1000
        self.used += 1
        self.term["tool_calls"] = self.used
        for event in result.events:
            if event.type == EXHIBIT:
                self._record_exhibit(event.data)
            elif event.type in (DOC_UPDATE, DOC_SUGGESTIONS):  # the saved reply names the documents it touched
                record_touch(self.ctx.metadata, event)
            yield event
        display = cap(result.output, self.settings.display_cap)
        self.messages.append(
            {"role": "tool", "tool_call_id": call["id"], "content": cap(result.output, self.settings.output_cap)}
        )
        if internal:
            return
        yield Event(
            TOOL_OUTPUT,
            {
                "tool": call["name"],
                "command": command,
                "output": display,
                "exit_code": result.exit_code,
                "round": round_no,
                "call_id": call["id"],
                "server_id": call.get("server_id"),
                **origin,
            },
        )
        yield from self._capture_citations(call, result)
        row = {
            "call_id": call["id"],
            "server_id": call.get("server_id"),
            "tool": call["name"],
            "command": command,
            "full_command": full,
            "output": display,
            "exit_code": result.exit_code,
            "round": round_no,
            "text_offset": self.text_len,  # where in the reply's text it ran (the page draws it there)
            **origin,
        }
        for key in ("plan", "url", "images"):
            if key in result.meta:
                row[key] = result.meta[key]
        self.meta["tools"].append(row)
        if "plan" in result.meta:
            self.meta["plan"] = result.meta["plan"]

    def _record_exhibit(self, exhibit: dict) -> None:
        """Keep the newest version of each exhibit id in the saved reply; amend older replies too."""
        saved = self.ctx.metadata.setdefault("exhibits", [])
        for index, old in enumerate(saved):
            if old.get("id") == exhibit.get("id"):
                saved[index] = exhibit
                break
        else:
            saved.append(exhibit)
        self.hooks.amend_exhibit(self.ctx, exhibit)

    def _capture_citations(self, call: dict, result: ToolResult) -> Iterator[Event]:
        """After a web search's result: a passive citation exhibit of its sources (config flag)."""
        if not self.settings.auto_capture_citations or call["name"] not in CITATION_TOOLS or result.exit_code:
            return
        rows = next((e.data.get("data") for e in result.events if e.type == WEB_SOURCES), None) or []
        exhibit = citation_exhibit(call["id"], rows)
        if exhibit is not None:
            self._record_exhibit(exhibit)
            yield Event(EXHIBIT, exhibit)
