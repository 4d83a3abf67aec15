"""Agent tools, one module per family, collected by ``build_registry`` from configuration."""

from __future__ import annotations

from .code import code_tools
from .exhibits import exhibit_tools
from .images import image_tools
from .memory import memory_tools
from .registry import Tool, ToolContext, ToolError, ToolRegistry, ToolResult, execute
from .ui import ui_tools
from .web import web_tools


def _names(value) -> list:
    if isinstance(value, (list, tuple)):
        return [str(v).strip() for v in value if str(v).strip()]
    return [part.strip() for part in str(value or "").split(",") if part.strip()]


def build_registry(config: dict) -> ToolRegistry:
    """The tools ``AGENT_TOOLS`` enables, with ``AGENT_APPROVAL_TOOLS`` marking those that need approval."""
    enabled = set(_names(config.get("AGENT_TOOLS")))
    approval = set(_names(config.get("AGENT_APPROVAL_TOOLS")))
    registry = ToolRegistry()
    for tool in (
        web_tools(config) + code_tools(config) + image_tools(config) + ui_tools() + exhibit_tools() + memory_tools()
    ):
        if tool.name in enabled:
            tool.needs_approval = tool.name in approval
            registry.register(tool)
    return registry


__all__ = ["Tool", "ToolContext", "ToolError", "ToolRegistry", "ToolResult", "build_registry", "execute"]
