"""Provider connections the admin manages in the settings screen (m130): one row per connection.

The API key is stored as given (SQLite in DATA_DIR; docs/guide.md "Providers"), read only by the
router when it builds the provider and never put into a view. Every write bumps
``provider_connections_version`` in the ``settings`` table in the same transaction, so any
worker on the same database can tell cheaply that its provider set is stale.

A deleted connection's name, and the old name of a renamed one, go into ``retired_provider_names``
in the same transaction (and leave it when a connection takes the name again): every worker's
router answers ``name/model`` for them with a 404, including one that never loaded the connection.
"""

from __future__ import annotations

import json
import sqlite3
import time
from typing import Any, List, Optional

from ..errors import Conflict, NotFound
from .counters import bump_counter, read_counter
from .database import Locked
from .sessions import new_id

VERSION_KEY = "provider_connections_version"
FIELDS = ("name", "kind", "base_url", "api_key", "default_model", "models", "enabled")


def _row(raw: dict) -> dict:
    row = dict(raw)
    row["models"] = json.loads(row["models"]) if row.get("models") else []
    row["enabled"] = bool(row["enabled"])
    return row


def key_last4(api_key: Optional[str]) -> Optional[str]:
    """The last four characters of a key, shown instead of it (none for keys too short to hide anything)."""
    return api_key[-4:] if api_key and len(api_key) >= 8 else None


def public_view(row: dict) -> dict:
    """A connection as the admin screen sees it: everything except the key, which is only hinted at."""
    view = {
        k: row[k]
        for k in (
            "id",
            "name",
            "kind",
            "base_url",
            "default_model",
            "models",
            "enabled",
            "created_at",
            "updated_at",
            "created_by",
        )
    }
    view.update(
        source="database",
        read_only=False,
        api_key_set=bool(row.get("api_key")),
        api_key_last4=key_last4(row.get("api_key")),
    )
    return view


class ProviderConnectionRepo:
    """CRUD over ``provider_connections``; rows returned here carry the key (callers use ``public_view``)."""

    def __init__(self, locked: Locked):
        self._l = locked

    def version(self) -> int:
        """A counter that changes with every write (0 before the first)."""
        return read_counter(self._l, VERSION_KEY)

    def list(self) -> List[dict]:
        """Every connection, oldest first."""
        with self._l.read() as db:
            return [_row(r) for r in db["provider_connections"].rows_where(order_by="created_at, rowid")]

    def retired_names(self) -> set:
        """Lower-cased names of deleted or renamed connections that no connection has taken again."""
        with self._l.read() as db:
            return {row[0].lower() for row in db.execute("select name from retired_provider_names")}

    def get(self, connection_id: str) -> dict:
        """One connection, or NotFound."""
        with self._l.read() as db:
            rows = list(db["provider_connections"].rows_where("id = ?", [connection_id], limit=1))
        if not rows:
            raise NotFound("provider not found")
        return _row(rows[0])

    def create(self, fields: dict, created_by: Optional[str]) -> dict:
        """Store a validated connection; Conflict when the name is taken (in any case)."""
        now = time.time()
        row = {
            "id": new_id("prov_"),
            "created_at": now,
            "updated_at": now,
            "created_by": created_by,
            "name": fields["name"],
            "kind": fields["kind"],
            "base_url": fields.get("base_url"),
            "api_key": fields.get("api_key") or None,
            "default_model": fields.get("default_model"),
            "models": json.dumps(fields.get("models") or []),
            "enabled": 1 if fields.get("enabled", True) else 0,
        }
        try:
            with self._l.tx() as db:
                db.table("provider_connections").insert(row)
                db.execute("delete from retired_provider_names where name = ?", [row["name"]])
                self._bump(db)
        except sqlite3.IntegrityError:
            raise Conflict(f"a provider named {fields['name']!r} exists already") from None
        return self.get(row["id"])

    def update(self, connection_id: str, changes: dict) -> dict:
        """Apply validated changes (``api_key`` None or "" clears the key); NotFound / Conflict."""
        values = {k: v for k, v in changes.items() if k in FIELDS}
        if "models" in values:
            values["models"] = json.dumps(values["models"] or [])
        if "enabled" in values:
            values["enabled"] = 1 if values["enabled"] else 0
        if "api_key" in values:
            values["api_key"] = values["api_key"] or None
        values["updated_at"] = time.time()
        try:
            with self._l.tx() as db:
                found = db.execute("select name from provider_connections where id = ?", [connection_id]).fetchone()
                if found is None:
                    raise NotFound("provider not found")
                db.table("provider_connections").update(connection_id, values)
                if "name" in values and values["name"].lower() != found[0].lower():
                    self._retire(db, found[0])
                    db.execute("delete from retired_provider_names where name = ?", [values["name"]])
                self._bump(db)
        except sqlite3.IntegrityError:
            raise Conflict(f"a provider named {changes.get('name')!r} exists already") from None
        return self.get(connection_id)

    def delete(self, connection_id: str) -> None:
        """Remove a connection; NotFound when there is none."""
        with self._l.tx() as db:
            found = db.execute("select name from provider_connections where id = ?", [connection_id]).fetchone()
            if found is None:
                raise NotFound("provider not found")
            db.execute("delete from provider_connections where id = ?", [connection_id])
            self._retire(db, found[0])
            self._bump(db)

    @staticmethod
    def _retire(db, name: str) -> None:
        db.execute(
            "insert into retired_provider_names (name, retired_at) values (?, ?)"
            " on conflict(name) do update set retired_at = excluded.retired_at",
            [name, time.time()],
        )

    @staticmethod
    def _bump(db: Any) -> None:
        bump_counter(db, VERSION_KEY)
