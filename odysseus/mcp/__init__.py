"""MCP servers: the tools of Model Context Protocol servers an admin connects, offered to the agent.

``servers`` validates a server's definition (TOML ``[mcp_servers.NAME]`` or a stored row).
``init_app`` reads the configuration's servers once at start-up: a bad table stops the app with a
message naming it.
"""

from __future__ import annotations

from typing import Any, List

from .servers import ServerSpec, from_config


def config_servers(config: Any) -> List[ServerSpec]:
    """The configuration's servers, validated (OdysseusError names a bad table)."""
    return from_config(config.get("MCP_SERVERS"))


def init_app(app: Any) -> None:
    """Validate the configuration's MCP servers at start-up."""
    app.extensions["odysseus.mcp.config"] = config_servers(app.config)
