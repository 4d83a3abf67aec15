"""Per-user settings (default model and mode, personal system prompt, ``memory_enabled``, ...) as JSON values.

Which keys exist and what values they take is ``odysseus.preferences``; this repository
only stores what it is given, always under the owner's id.
"""

from __future__ import annotations

import json
import time
from typing import Any, Dict

from .database import Locked


class UserSettingsRepo:
    """Read and write one owner's settings; every query filters by owner."""

    def __init__(self, locked: Locked):
        self._l = locked

    def get_all(self, owner: str) -> Dict[str, Any]:
        """The owner's stored settings (keys never set are absent)."""
        with self._l.read() as db:
            rows = db.execute("select key, value from user_settings where owner = ?", [owner]).fetchall()
        return {key: json.loads(value) for key, value in rows}

    def update(self, owner: str, changes: Dict[str, Any]) -> None:
        """Store ``changes`` (a value of None removes the key) in one transaction."""
        now = time.time()
        with self._l.tx() as db:
            for key, value in changes.items():
                if value is None:
                    db.execute("delete from user_settings where owner = ? and key = ?", [owner, key])
                else:
                    db.execute(
                        "insert into user_settings (owner, key, value, updated_at) values (?, ?, ?, ?)"
                        " on conflict(owner, key) do update set value = excluded.value,"
                        " updated_at = excluded.updated_at",
                        [owner, key, json.dumps(value), now],
                    )
