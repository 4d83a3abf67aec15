"""MCP servers: the tools of Model Context Protocol servers an admin connects, offered to the agent.

- ``servers``: a server's definition (TOML ``[mcp_servers.NAME]`` or a stored row), validated once;
- ``broker`` (a child process per worker running the official SDK) and ``client`` (its gevent side);
- ``service``: one app's servers, their state and calls; ``tools``: their tools as agent tools;
- ``schema``: the names and input schemas the model is shown; ``sandbox``: stdio servers in bubblewrap.

``init_app`` builds the service (a bad configuration table stops the start, naming it), adds its
tools to agent mode's toolbox and ends the broker with the run engine.
"""

from __future__ import annotations

from typing import Any, List

from .sandbox import McpSandbox
from .servers import ServerSpec, from_config
from .service import McpService
from .tools import McpToolSource


def config_servers(config: Any) -> List[ServerSpec]:
    """The configuration's servers, validated (OdysseusError names a bad table)."""
    return from_config(config.get("MCP_SERVERS"))


def init_app(app: Any) -> None:
    """Build the app's MCP service, offer its tools to agent turns, close it with the run engine."""
    store = app.extensions["odysseus.store"]
    service = app.extensions["odysseus.mcp"] = McpService(app.config, store, launcher=McpSandbox(app.config))
    app.extensions["odysseus.agent"].toolbox.add_source(McpToolSource(service, store, app.config))
    app.extensions["odysseus.runs"].hooks.closed.connect(service.close)
