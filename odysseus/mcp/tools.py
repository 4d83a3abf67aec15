"""MCP servers' tools as agent tools: ``McpToolSource``, a source of the agent's toolbox. No Flask.

``tools_for(owner, profile)`` is the servers this owner's turn may use (``ServerSpec.allows``:
everyone, or the named users and agent profiles), each one's tools picked by its allow-list and
capped at ``MCP_MAX_TOOLS``, named ``mcp__<server>__<tool>`` with a schema every provider accepts
(``schema.py``). Built tools are cached per server until its tool list or definition changes, so a
warm turn pays a dictionary lookup per server. A server never listed yet is started then (all of
them at once, at most ``MCP_START_TIMEOUT`` s); one that is unavailable is left out.

A call (``run``) goes to the broker with the turn's cancel token and progress channel; its text
content becomes the output, image content an image stored like a generated one (``generated_image``,
shown in the call's row), ``isError`` exit code 1, a timeout exit code 124, a stop 130; any other
failure is a tool error the model reads, and the turn goes on.
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
import time
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ..events import GENERATED_IMAGE, Event
from ..tools.images import _mime
from ..tools.registry import Tool, ToolContext, ToolError, ToolResult
from .client import McpError
from .schema import description, exposed_names, sanitize, selected
from .servers import ServerSpec
from .service import McpService


class McpToolSource:
    """The MCP servers' tools, per owner and agent profile (a ``ToolSource`` of ``agent/toolbox.py``)."""

    name = "mcp"

    def __init__(self, service: McpService, store: Any, config: Mapping[str, Any]):
        self.service, self.store, self.config = service, store, config
        #: server name -> (its spec, its tool list's generation, the tools built from them)
        self._built: Dict[str, Tuple[ServerSpec, int, List[Tool]]] = {}

    def tools_for(self, owner: str, profile_id: Optional[str]) -> List[Tool]:
        """The tools this owner's turn (with this profile, or None) is offered; see the module docstring."""
        servers = [spec for spec in self.service.servers().values() if spec.enabled]
        if not servers:
            return []
        user = self.store.users.get(owner) if any(not s.for_everyone() for s in servers) else None
        allowed = [spec for spec in servers if spec.allows(owner, user, profile_id)]
        self._start_cold(allowed)
        tools: List[Tool] = []
        for spec in allowed:
            tools.extend(self._tools_of(spec))
        return tools

    def _start_cold(self, specs: List[ServerSpec]) -> None:
        """Start the servers whose tools were never listed, together; wait for them boundedly.

        Only a first start is waited for: a server that failed before (it is unavailable, or starting
        again after its backoff) is left out of this turn at once, so a server that hangs delays no
        turn but the first ones that could use it."""
        cold = [s for s in specs if s.name not in self.service.tools and self._first_start(s)]
        if not cold:
            return
        wait = self.service.start_timeout()
        threads = [
            threading.Thread(target=self.service.tool_list, args=(spec.name, wait), daemon=True) for spec in cold
        ]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + wait + 3
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def _first_start(self, spec: ServerSpec) -> bool:
        until = self.service.waited.get(spec.name)
        if until is not None:
            return time.monotonic() < until
        state = self.service.states.get(spec.name) or {}
        if state.get("state") in (None, "idle"):
            return not state.get("error") or state.get("error") == "the MCP broker restarts"
        return state.get("state") == "starting" and not state.get("restarts")

    def _tools_of(self, spec: ServerSpec) -> List[Tool]:
        listing = self.service.tools.get(spec.name)
        if not listing:
            return []
        generation = self.service.generations.get(spec.name, 0)
        cached = self._built.get(spec.name)
        if cached is not None and cached[0] == spec and cached[1] == generation:
            return cached[2]
        tools = self.build(spec, listing)
        self._built[spec.name] = (spec, generation, tools)
        return tools

    def build(self, spec: ServerSpec, listing: List[Dict[str, Any]]) -> List[Tool]:
        """The agent tools of one server's listing (allow-list, cap, names, schemas, approval)."""
        cap = int(self.config.get("MCP_MAX_TOOLS", 64))
        chosen = selected([t for t in listing if isinstance(t.get("name"), str)], spec.tools, cap)
        names = exposed_names(spec.name, [t["name"] for t in chosen])
        timeout = self.service.timeout_of(spec) + self.service.start_timeout() + 5
        return [
            Tool(
                names[entry["name"]],
                description(spec.name, str(entry.get("title") or ""), str(entry.get("description") or "")),
                sanitize(entry.get("input_schema")),
                self._runner(spec, entry["name"], names[entry["name"]]),
                needs_approval=spec.needs_approval(entry["name"]),
                timeout=timeout,
                describe=_describer(spec.name, entry["name"]),
                origin={"server": spec.name, "tool": entry["name"]},
            )
            for entry in chosen
        ]

    def _runner(self, spec: ServerSpec, tool: str, exposed: str):
        def run(args: dict, ctx: ToolContext) -> ToolResult:
            return call_tool(self.service, spec, tool, exposed, args, ctx)

        return run


def _describer(server: str, tool: str):
    def describe(args: dict) -> str:
        return f"{server}.{tool}({json.dumps(args, ensure_ascii=False, sort_keys=True)})"

    return describe


def call_tool(
    service: McpService, spec: ServerSpec, tool: str, exposed: str, args: dict, ctx: ToolContext
) -> ToolResult:
    """One call through the broker, as the ToolResult the agent loop records (module docstring)."""
    try:
        result = service.call(spec, tool, args, ctx.cancel, ctx.report)
    except McpError as exc:
        if exc.kind == "cancelled":
            return ToolResult("Error: the call was stopped.", exit_code=130, meta={"error": "stopped"})
        if exc.kind == "timeout":
            return ToolResult(f"Error: {exc.message}.", exit_code=124, meta={"error": "timeout"})
        raise ToolError(f"the MCP server {spec.name} could not run {tool}: {exc.message}") from None
    texts: List[str] = []
    events: List[Event] = []
    images: List[str] = []
    for block in result.get("content") or []:
        if block.get("type") == "text":
            texts.append(str(block.get("text") or ""))
        elif block.get("type") == "image":
            url = _save_image(block, ctx)
            if url is None:
                texts.append("[an image that could not be shown]")
                continue
            images.append(url)
            events.append(Event(GENERATED_IMAGE, {"url": url, "prompt": f"{spec.name}.{tool}", "tool": exposed}))
            texts.append(f"[image shown to the user: {url}]")
    output = "\n".join(texts)
    if result.get("truncated"):
        limit = int(ctx.config.get("TOOL_OUTPUT_MAX_BYTES", 1 << 20))
        output += f"\n[output cut at {limit} bytes]"
    meta: Dict[str, Any] = {"images": images} if images else {}
    return ToolResult(output, exit_code=1 if result.get("is_error") else 0, events=events, meta=meta)


def _save_image(block: Dict[str, Any], ctx: ToolContext) -> Optional[str]:
    """An image block stored as our own image (its bytes must be a PNG, JPEG, WebP or GIF); None if not."""
    if ctx.save_image is None:
        return None
    try:
        data = base64.b64decode(str(block.get("data") or ""), validate=True)
        mime = _mime(data)
    except (binascii.Error, ValueError, ToolError):
        return None
    return ctx.save_image(data, mime)
