"""MCP servers the admin stored (m311): one row per server, keyed by its name.

Values are validated before they get here (``odysseus.mcp.servers.validate``); header and env values
are kept as given (the server must send them) and never leave through a view (``public_view``).
Every write bumps ``mcp_servers_version`` in ``settings`` in the same transaction, so every worker on
the same database sees cheaply that its set is stale (``McpService.sync``).
"""

from __future__ import annotations

import json
import sqlite3
import time
from typing import Any, Dict, List, Optional

from ..errors import Conflict, NotFound
from .counters import bump_counter, read_counter
from ..mcp.servers import FIELDS, ServerSpec, spec_from
from .database import Locked

VERSION_KEY = "mcp_servers_version"
_JSON = ("args", "env", "headers", "approval", "tools", "users", "profiles")
_BOOLS = ("enabled", "sandbox", "network")


def _fields(row: Dict[str, Any]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for key in FIELDS:
        value = row.get(key)
        if key in _JSON:
            value = json.loads(value) if value else None
        elif key in _BOOLS:
            value = bool(value)
        out[key] = value
    out["approval"] = out["approval"] or "ask"
    return out


def _columns(fields: Dict[str, Any]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for key, value in fields.items():
        if key not in FIELDS:
            continue
        if key in _JSON:
            out[key] = None if value is None else json.dumps(list(value) if isinstance(value, tuple) else value)
        elif key in _BOOLS:
            out[key] = 1 if value else 0
        else:
            out[key] = value
    return out


class McpServerRepo:
    """CRUD over ``mcp_servers``; rows carry their secrets (callers show ``public_view`` only)."""

    def __init__(self, locked: Locked):
        self._l = locked

    def version(self) -> int:
        """A counter that changes with every write (0 before the first)."""
        return read_counter(self._l, VERSION_KEY)

    def specs(self) -> List[ServerSpec]:
        """Every stored server, oldest first."""
        with self._l.read() as db:
            rows = list(db["mcp_servers"].rows_where(order_by="created_at, rowid"))
        return [spec_from(row["name"], _fields(row), "database") for row in rows]

    def get(self, name: str) -> ServerSpec:
        """One stored server, or NotFound."""
        with self._l.read() as db:
            rows = list(db["mcp_servers"].rows_where("name = ?", [name], limit=1))
        if not rows:
            raise NotFound("MCP server not found")
        return spec_from(name, _fields(rows[0]), "database")

    def create(self, name: str, fields: Dict[str, Any], created_by: Optional[str]) -> ServerSpec:
        """Store a validated server; Conflict when the name is taken."""
        now = time.time()
        row = {"name": name, **_columns(fields), "created_at": now, "updated_at": now, "created_by": created_by}
        try:
            with self._l.tx() as db:
                db.table("mcp_servers").insert(row)
                self._bump(db)
        except sqlite3.IntegrityError:
            raise Conflict(f"an MCP server named {name!r} exists already") from None
        return self.get(name)

    def update(self, name: str, fields: Dict[str, Any]) -> ServerSpec:
        """Replace a stored server's fields with validated ones; NotFound."""
        values = {**_columns(fields), "updated_at": time.time()}
        with self._l.tx() as db:
            if db.execute("select 1 from mcp_servers where name = ?", [name]).fetchone() is None:
                raise NotFound("MCP server not found")
            db.table("mcp_servers").update(name, values)
            self._bump(db)
        return self.get(name)

    def delete(self, name: str) -> None:
        """Remove a stored server; NotFound when there is none."""
        with self._l.tx() as db:
            if db.execute("select 1 from mcp_servers where name = ?", [name]).fetchone() is None:
                raise NotFound("MCP server not found")
            db.execute("delete from mcp_servers where name = ?", [name])
            self._bump(db)

    @staticmethod
    def _bump(db: Any) -> None:
        bump_counter(db, VERSION_KEY)
