"""Browser sign-ins held on the server: a signed session cookie names one row here, and lives only as
long as that row does. Signing out deletes the row, so a copy of the cookie taken before answers 401
afterwards (a signed cookie alone would stay valid until it expires)."""

from __future__ import annotations

import secrets
import time
from typing import Optional

from .database import Locked


class SignInRepo:
    """Create, check and end browser sign-ins (``sign_ins``: id, owner, created_at)."""

    def __init__(self, locked: Locked):
        self._l = locked

    def create(self, owner: str, lifetime: float) -> str:
        """A new sign-in for ``owner``; sign-ins older than ``lifetime`` seconds (expired cookies) go."""
        sign_in_id = secrets.token_urlsafe(24)
        now = time.time()
        with self._l.tx() as db:
            db.execute("delete from sign_ins where created_at < ?", [now - lifetime])
            db.execute("insert into sign_ins (id, owner, created_at) values (?, ?, ?)", [sign_in_id, owner, now])
        return sign_in_id

    def live(self, owner: str, sign_in_id: Optional[str]) -> bool:
        """Whether the cookie's sign-in still stands for ``owner``."""
        if not sign_in_id or not isinstance(sign_in_id, str):
            return False
        with self._l.read() as db:
            row = db.execute("select owner from sign_ins where id = ?", [sign_in_id]).fetchone()
        return row is not None and row[0] == owner

    def end(self, sign_in_id: Optional[str]) -> None:
        """Sign this browser out (a no-op for an unknown id)."""
        if sign_in_id and isinstance(sign_in_id, str):
            with self._l.tx() as db:
                db.execute("delete from sign_ins where id = ?", [sign_in_id])

    def end_all(self, owner: str, keep: Optional[str] = None) -> int:
        """Sign every browser of ``owner`` out, but ``keep``; answers how many ended."""
        with self._l.tx() as db:
            cursor = db.execute("delete from sign_ins where owner = ? and id is not ?", [owner, keep])
            return int(cursor.rowcount)
