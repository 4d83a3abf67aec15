"""One app's MCP servers: their definitions, what the broker reports of them, and calls. No Flask.

Kept in ``app.extensions["odysseus.mcp"]``. The servers are the configuration's (read-only) and the
stored ones (``store.mcp_servers``, m311), re-read when the stored set's version changes (checked at
most every ``SYNC_INTERVAL`` s, and at once after a change in this worker), and sent to the broker.

What the broker reports (a server's state, its error, its tools) arrives as events and is kept here,
so a turn's tool list (``tools.McpToolSource``) and ``/api/health`` read memory only. A server whose
tools were never listed is started when a turn first could use it, and that turn waits for it at
most ``MCP_START_TIMEOUT`` s; an unavailable one is skipped at once (the broker restarts it with
backoff, and its tools come back with its next ``ready``).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Dict, List, Mapping, Optional

from ..cancel import CancelToken
from .client import BrokerClient, McpError
from .servers import ServerSpec, from_config

log = logging.getLogger(__name__)

SYNC_INTERVAL = 2.0
#: an image in a tool result is shown up to this size (what the broker's stdio guard lets through)
IMAGE_MAX_BYTES = 3 * 1024 * 1024


class McpService:
    """The MCP servers of one app (see the module docstring)."""

    def __init__(self, config: Mapping[str, Any], store: Any = None, launcher: Optional[Callable] = None):
        self.config = config
        self.store = store
        self.config_specs: Dict[str, ServerSpec] = {spec.name: spec for spec in from_config(config.get("MCP_SERVERS"))}
        self.stored: Dict[str, ServerSpec] = {}
        self._version: Optional[int] = None
        self._checked = 0.0
        #: how a stdio spec's command line is made (the sandbox, odysseus/mcp/sandbox.py); None: as given
        self.launcher = launcher
        #: name -> the broker's last word on it: {state, error, tool_count, restarts, retry_at}
        self.states: Dict[str, Dict[str, Any]] = {}
        #: name -> (its tool list as listed, a counter that changes with it)
        self.tools: Dict[str, List[Dict[str, Any]]] = {}
        self.generations: Dict[str, int] = {}
        #: server -> until when turns may wait for its first start (since its definition or the broker
        #: last changed): turns that come together wait together, later ones do not wait at all
        self.waited: Dict[str, float] = {}
        self._lock = threading.Lock()
        self.client = BrokerClient(
            self.broker_specs, on_event=self._event, max_delay=float(config.get("MCP_RESTART_MAX_DELAY", 60))
        )
        self.sync(force=True)

    # ------------------------------------------------------------------ definitions
    def sync(self, force: bool = False) -> None:
        """Re-read the stored servers when their version changed (at most every SYNC_INTERVAL s)."""
        repo = getattr(self.store, "mcp_servers", None) if self.store is not None else None
        if repo is None:
            return
        now = time.monotonic()
        if not force and now - self._checked < SYNC_INTERVAL:
            return
        self._checked = now
        version = repo.version()
        if version == self._version:
            return
        self._version = version
        stored = {spec.name: spec for spec in repo.specs() if spec.name not in self.config_specs}
        with self._lock:
            gone = set(self.stored) - set(stored)
            changed = {name for name, spec in stored.items() if self.stored.get(name) != spec}
            self.stored = stored
            for name in gone | changed:  # its old tools are not offered; the broker lists the new ones
                self.tools.pop(name, None)
                self.states.pop(name, None)
                self.waited.pop(name, None)
                self.generations[name] = self.generations.get(name, 0) + 1
        self.client.reload()

    def servers(self) -> Dict[str, ServerSpec]:
        """Every server by name: the configuration's, then the stored ones."""
        self.sync()
        return {**self.config_specs, **self.stored}

    def timeout_of(self, spec: ServerSpec) -> float:
        """Seconds a call of this server may take."""
        return float(spec.timeout or self.config.get("MCP_TIMEOUT", 60.0))

    def start_timeout(self) -> float:
        """Seconds a server may take to start and list its tools."""
        return float(self.config.get("MCP_START_TIMEOUT", 20.0))

    def broker_spec(self, spec: ServerSpec) -> Dict[str, Any]:
        """What the broker is told of a server: how to reach it, its caps and timeouts."""
        out: Dict[str, Any] = {
            "name": spec.name,
            "start_timeout": self.start_timeout(),
            "max_delay": float(self.config.get("MCP_RESTART_MAX_DELAY", 60.0)),
            "max_bytes": int(self.config.get("TOOL_OUTPUT_MAX_BYTES", 1 << 20)),
        }
        if spec.transport == "http":
            out.update(url=spec.url, headers=dict(spec.headers))
            return out
        command, args, env, cwd = spec.command, list(spec.args), dict(spec.env), None
        if self.launcher is not None:
            command, args, env, cwd = self.launcher(spec)
        out.update(command=command, args=args, env=env, cwd=cwd)
        return out

    def broker_specs(self) -> List[Dict[str, Any]]:
        """The enabled servers, as the broker gets them (a server whose launch fails is left out)."""
        specs = []
        for spec in self.servers().values():
            if not spec.enabled:
                continue
            try:
                specs.append(self.broker_spec(spec))
            except Exception as exc:  # noqa: BLE001 - e.g. the sandbox cannot be set up: say so, start nothing
                self.states[spec.name] = {"state": "unavailable", "error": str(exc)[:500]}
        return specs

    # ------------------------------------------------------------------ what the broker says
    def _event(self, event: Dict[str, Any]) -> None:
        kind = event.get("event")
        if kind == "broker_stopped":
            self.waited.clear()
            for name, state in list(self.states.items()):
                if state.get("state") in ("starting", "ready"):
                    self.states[name] = {**state, "state": "idle", "error": "the MCP broker restarts"}
            return
        if kind != "server":
            return
        name = str(event.get("name"))
        if name not in self.config_specs and name not in self.stored:
            return
        state = {key: event.get(key) for key in ("state", "error", "tool_count", "restarts", "retry_at")}
        with self._lock:
            self.states[name] = state
            if "tools" in event:
                tools = event.get("tools")
                if isinstance(tools, list) and state["state"] == "ready":
                    self.tools[name] = tools
                else:
                    self.tools.pop(name, None)
                self.generations[name] = self.generations.get(name, 0) + 1

    def status(self, sync: bool = True) -> Dict[str, Dict[str, Any]]:
        """Every server's state for /api/health and the admin (``idle``: not started yet, started on first use).

        ``sync=False`` (``/api/health``): the servers as last read, without looking at the database."""
        servers = self.servers() if sync else {**self.config_specs, **self.stored}
        out = {}
        for name, spec in servers.items():
            state = dict(self.states.get(name) or {"state": "idle", "error": None, "tool_count": None})
            if not spec.enabled:
                state = {"state": "disabled", "error": None, "tool_count": None}
            out[name] = {
                "state": state.get("state"),
                "error": state.get("error"),
                "tools": state.get("tool_count"),
                "transport": spec.transport,
                "source": spec.source,
            }
        return out

    # ------------------------------------------------------------------ tools and calls
    def tool_list(self, name: str, wait: float) -> Optional[List[Dict[str, Any]]]:
        """The server's tools: known ones at once; otherwise start it and wait up to ``wait`` s (None: not now)."""
        known = self.tools.get(name)
        if known is not None:
            return known
        state = (self.states.get(name) or {}).get("state")
        if state == "unavailable" or wait <= 0:
            return None
        self.waited.setdefault(name, time.monotonic() + wait)
        try:
            result = self.client.request("list_tools", wait + 2, server=name, timeout=wait)
        except McpError as exc:
            log.info("MCP server %s is not available: %s", name, exc.message)
            return None
        tools = result.get("tools")
        if not isinstance(tools, list):
            return None
        with self._lock:
            self.tools.setdefault(name, tools)
        return self.tools.get(name)

    def call(
        self,
        spec: ServerSpec,
        tool: str,
        arguments: Dict[str, Any],
        cancel: CancelToken,
        report: Callable[[Dict[str, Any]], None],
    ) -> Dict[str, Any]:
        """Call one tool; the capped result ``{content, is_error, truncated}`` or McpError."""
        timeout = self.timeout_of(spec)
        return self.client.request(
            "call",
            timeout + self.start_timeout() + 5,
            cancel=cancel,
            on_progress=report,
            server=spec.name,
            tool=tool,
            arguments=arguments,
            timeout=timeout,
            max_bytes=int(self.config.get("TOOL_OUTPUT_MAX_BYTES", 1 << 20)),
            max_image_bytes=IMAGE_MAX_BYTES,
        )

    def test(self, spec: ServerSpec, timeout: float = 20.0) -> Dict[str, Any]:
        """Connect afresh, initialize, list the tools: ``{ok, tools, latency_ms}`` or ``{ok: false, error}``."""
        try:
            launch = self.broker_spec(spec)
        except Exception as exc:  # noqa: BLE001 - the sandbox cannot be set up
            return {"ok": False, "error": str(exc)[:500]}
        try:
            return self.client.request("test", timeout + 10, spec=launch, timeout=timeout)
        except McpError as exc:
            return {"ok": False, "error": exc.message}

    def close(self) -> None:
        """End the broker and every server it started."""
        self.client.close()
