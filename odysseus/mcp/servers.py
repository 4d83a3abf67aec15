"""An MCP server's definition, validated once for both places it comes from.

A server is a TOML table ``[mcp_servers.NAME]`` (read-only, from ``ODYSSEUS_CONFIG``) or a row the
admin stored through ``/api/admin/mcp-servers`` (m311). Both go through ``validate``, so what the
broker is told to start is the same whatever its source:

- stdio: ``command`` (and ``args``, ``env``), run as a child process, in the bubblewrap sandbox
  unless ``sandbox = false``, with the network only when ``network = true``;
- Streamable HTTP: ``url`` (http or https, no credentials in it) and ``headers``;
- ``enabled``, ``timeout`` (seconds a call may take; default ``MCP_TIMEOUT``), ``approval``
  (``"ask"``, the default, or ``"auto"``; or a table of tool name -> ``ask``/``auto`` with ``"*"``
  for the rest), ``tools`` (an allow-list of the server's tool names), ``users`` and ``profiles``
  (who may use it: user ids or usernames, agent profile ids; both empty: everyone).

Names are 1-24 characters of ``[a-z0-9_-]`` starting with a letter or digit, so that
``mcp__<server>__<tool>`` keeps room for the tool's name within providers' 64 characters.
Header and env values are secrets: views carry only their last four characters (``public_view``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple
from urllib.parse import urlsplit

from ..errors import BadRequest, OdysseusError

NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,23}")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
APPROVALS = ("ask", "auto")
FIELDS = (
    "command",
    "args",
    "env",
    "url",
    "headers",
    "enabled",
    "sandbox",
    "network",
    "timeout",
    "approval",
    "tools",
    "users",
    "profiles",
)
MAX_TEXT = 4096
MAX_ITEMS = 200
MAX_TIMEOUT = 3600.0


@dataclass(frozen=True)
class ServerSpec:
    """One MCP server as the app uses it (see the module docstring)."""

    name: str
    command: str = ""
    args: Tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    url: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    enabled: bool = True
    sandbox: bool = True
    network: bool = False
    timeout: Optional[float] = None
    approval: Any = "ask"
    tools: Optional[Tuple[str, ...]] = None
    users: Tuple[str, ...] = ()
    profiles: Tuple[str, ...] = ()
    source: str = "config"  # "config" (TOML, read-only) or "database"

    @property
    def transport(self) -> str:
        """``stdio`` (a command) or ``http`` (Streamable HTTP at a URL)."""
        return "stdio" if self.command else "http"

    def needs_approval(self, tool: str) -> bool:
        """Whether a call of ``tool`` shows the approval card (``approval`` ask, the default)."""
        if isinstance(self.approval, str):
            return self.approval != "auto"
        return str(self.approval.get(tool, self.approval.get("*", "ask"))) != "auto"

    def for_everyone(self) -> bool:
        """True when no user or profile is named: every account may use it."""
        return not self.users and not self.profiles

    def allows(self, owner: str, user: Optional[Mapping[str, Any]], profile_id: Optional[str]) -> bool:
        """May this owner's turn (run with this agent profile, or None) use the server?

        Everyone, when no user or profile is named; else the named users (by id or username; in
        single-user mode the implicit owner's id) and the turns run with a named profile."""
        if self.for_everyone():
            return True
        if profile_id is not None and profile_id in self.profiles:
            return True
        names = {owner}
        if user:
            names |= {str(user.get("id")), str(user.get("username"))}
        return bool(names & set(self.users))

    def fields(self) -> Dict[str, Any]:
        """The validated fields (what a row stores), as JSON-able values."""
        return {
            "command": self.command,
            "args": list(self.args),
            "env": dict(self.env),
            "url": self.url,
            "headers": dict(self.headers),
            "enabled": self.enabled,
            "sandbox": self.sandbox,
            "network": self.network,
            "timeout": self.timeout,
            "approval": self.approval if isinstance(self.approval, str) else dict(self.approval),
            "tools": None if self.tools is None else list(self.tools),
            "users": list(self.users),
            "profiles": list(self.profiles),
        }


def check_name(value: Any) -> str:
    """A server name (see the module docstring), or BadRequest."""
    if not isinstance(value, str) or not NAME.fullmatch(value):
        raise BadRequest("name must be 1-24 characters of a-z, 0-9, '_' and '-', starting with a letter or digit")
    return value


def _text(value: Any, what: str, limit: int = MAX_TEXT, empty: bool = False) -> str:
    if not isinstance(value, str):
        raise BadRequest(f"{what} must be a string")
    if len(value) > limit:
        raise BadRequest(f"{what} is longer than {limit} characters")
    if _CONTROL.search(value):
        raise BadRequest(f"{what} must not contain control characters")
    if not empty and not value.strip():
        raise BadRequest(f"{what} must not be empty")
    return value


def _strings(value: Any, what: str, limit: int = MAX_ITEMS, item_limit: int = MAX_TEXT) -> Tuple[str, ...]:
    if not isinstance(value, (list, tuple)):
        raise BadRequest(f"{what} must be a list of strings")
    if len(value) > limit:
        raise BadRequest(f"{what} has more than {limit} entries")
    return tuple(_text(item, f"each of {what}", item_limit) for item in value)


def _mapping(value: Any, what: str, key: "re.Pattern[str]", key_what: str) -> Dict[str, Any]:
    if not isinstance(value, Mapping):
        raise BadRequest(f"{what} must be an object of {key_what} -> string")
    if len(value) > 64:
        raise BadRequest(f"{what} has more than 64 entries")
    out: Dict[str, Any] = {}
    for name, item in value.items():
        if not isinstance(name, str) or not key.fullmatch(name):
            raise BadRequest(f"{what}: {str(name)[:40]!r} is not a valid {key_what}")
        out[name] = item
    return out


def _secrets(value: Any, what: str, key: "re.Pattern[str]", key_what: str, keep: bool) -> Dict[str, Any]:
    """Header or env values: strings (or None, "keep the stored one", when ``keep``)."""
    out = _mapping(value, what, key, key_what)
    for name, item in out.items():
        if item is None and keep:
            continue
        out[name] = _text(item, f"{what}.{name}", empty=True)
    return out


def _bool(value: Any, what: str) -> bool:
    if not isinstance(value, bool):
        raise BadRequest(f"{what} must be true or false")
    return value


def _url(value: Any) -> str:
    url = _text(value, "url", 2048).strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BadRequest("url must be an http:// or https:// URL with a host")
    if parts.username or parts.password:
        raise BadRequest("url must not carry credentials: send them as headers")
    return url


def _timeout(value: Any) -> Optional[float]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise BadRequest("timeout must be a number of seconds")
    if not 1 <= value <= MAX_TIMEOUT:
        raise BadRequest(f"timeout must be between 1 and {MAX_TIMEOUT:g} seconds")
    return float(value)


def _approval(value: Any) -> Any:
    if isinstance(value, str):
        if value not in APPROVALS:
            raise BadRequest('approval must be "ask" or "auto" (or an object of tool -> ask/auto)')
        return value
    if not isinstance(value, Mapping) or len(value) > MAX_ITEMS:
        raise BadRequest('approval must be "ask" or "auto" (or an object of tool -> ask/auto)')
    out = {}
    for tool, mode in value.items():
        _text(tool, "a tool name in approval", 128)
        if mode not in APPROVALS:
            raise BadRequest(f'approval.{str(tool)[:40]} must be "ask" or "auto"')
        out[tool] = mode
    return out


def validate(data: Mapping[str, Any], *, partial: bool = False, keep_secrets: bool = False) -> Dict[str, Any]:
    """The fields of ``data`` checked and normalised (BadRequest names the first bad one).

    ``partial``: only the fields given (a PATCH); otherwise ``command`` or ``url`` is required and
    defaults fill the rest. ``keep_secrets``: a header or env value may be None ("keep the stored
    value", for an edit that does not send secrets back)."""
    unknown = sorted(set(data) - set(FIELDS) - {"name"})
    if unknown:
        raise BadRequest(f"unknown field {unknown[0]!r}")
    out: Dict[str, Any] = {}
    if "name" in data:
        out["name"] = check_name(data["name"])
    if data.get("command") not in (None, ""):
        out["command"] = _text(data["command"], "command", 1024).strip()
    elif "command" in data:
        out["command"] = ""
    if data.get("url") not in (None, ""):
        out["url"] = _url(data["url"])
    elif "url" in data:
        out["url"] = ""
    if "args" in data:
        out["args"] = _strings(data["args"] or [], "args")
    if "env" in data:
        out["env"] = _secrets(data["env"] or {}, "env", ENV_NAME, "variable name", keep_secrets)
    if "headers" in data:
        out["headers"] = _secrets(data["headers"] or {}, "headers", HEADER_NAME, "header name", keep_secrets)
    for key in ("enabled", "sandbox", "network"):
        if key in data:
            out[key] = _bool(data[key], key)
    if "timeout" in data:
        out["timeout"] = _timeout(data["timeout"])
    if "approval" in data:
        out["approval"] = _approval(data["approval"])
    if "tools" in data:
        out["tools"] = None if data["tools"] is None else _strings(data["tools"], "tools", 1000, 128)
    for key in ("users", "profiles"):
        if key in data:
            out[key] = _strings(data[key] or [], key, 1000, 128)
    if not partial:
        check_transport(out)
    return out


def check_transport(fields: Mapping[str, Any]) -> None:
    """Exactly one of ``command`` (stdio) and ``url`` (Streamable HTTP)."""
    command, url = fields.get("command") or "", fields.get("url") or ""
    if bool(command) == bool(url):
        raise BadRequest("give either command (a stdio server) or url (a Streamable HTTP server), not both")
    if url and (fields.get("args") or fields.get("env")):
        raise BadRequest("args and env belong to a stdio server (command), not to a url")
    if command and fields.get("headers"):
        raise BadRequest("headers belong to a Streamable HTTP server (url), not to a command")


def spec_from(name: str, fields: Mapping[str, Any], source: str) -> ServerSpec:
    """A ServerSpec from validated fields (defaults for the rest; http servers are never sandboxed)."""
    stdio = bool(fields.get("command"))
    tools = fields.get("tools")
    return ServerSpec(
        name=name,
        command=fields.get("command") or "",
        args=tuple(fields.get("args") or ()),
        env=dict(fields.get("env") or {}),
        url=fields.get("url") or "",
        headers=dict(fields.get("headers") or {}),
        enabled=bool(fields.get("enabled", True)),
        sandbox=stdio and bool(fields.get("sandbox", True)),
        network=stdio and bool(fields.get("network", False)),
        timeout=fields.get("timeout"),
        approval=fields.get("approval") or "ask",
        tools=None if tools is None else tuple(tools),
        users=tuple(fields.get("users") or ()),
        profiles=tuple(fields.get("profiles") or ()),
        source=source,
    )


def from_config(tables: Any) -> List[ServerSpec]:
    """The ``[mcp_servers.NAME]`` tables of the configuration; OdysseusError names the bad one."""
    if not tables:
        return []
    if not isinstance(tables, Mapping):
        raise OdysseusError("mcp_servers must be a table of [mcp_servers.NAME] tables")
    specs = []
    for name, table in tables.items():
        try:
            check_name(name)
            if not isinstance(table, Mapping):
                raise BadRequest("it must be a table")
            specs.append(spec_from(name, validate(table), "config"))
        except BadRequest as exc:
            raise OdysseusError(f"[mcp_servers.{str(name)[:40]}] in ODYSSEUS_CONFIG: {exc.message}") from None
    return specs


def secret_hint(value: Optional[str]) -> Optional[str]:
    """The last four characters of a secret (none for values too short to hide anything)."""
    return value[-4:] if value and len(value) >= 8 else None


def public_view(spec: ServerSpec) -> Dict[str, Any]:
    """A server as the admin API shows it: header and env values only as their last four characters."""
    view: Dict[str, Any] = {"name": spec.name, "transport": spec.transport, **spec.fields()}
    view["env"] = {k: {"set": bool(v), "last4": secret_hint(v)} for k, v in spec.env.items()}
    view["headers"] = {k: {"set": bool(v), "last4": secret_hint(v)} for k, v in spec.headers.items()}
    view["source"] = spec.source
    view["read_only"] = spec.source == "config"
    return view
