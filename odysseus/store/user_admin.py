"""What the admin screen changes about accounts: the admin flag and disabling (m111_page's ``disabled_at``)."""

from __future__ import annotations

import time
from typing import List

from ..errors import Conflict, NotFound
from .database import Locked


def admin_view(row: dict) -> dict:
    """A user as the admin screen shows it (never the hash)."""
    return {
        "id": row["id"],
        "username": row["username"],
        "is_admin": bool(row["is_admin"]),
        "created_at": row["created_at"],
        "disabled": bool(row.get("disabled_at")),
        "disabled_at": row.get("disabled_at"),
    }


class UserAdminRepo:
    """Admin-only account changes; refuses to leave the instance without an active admin."""

    def __init__(self, locked: Locked):
        self._l = locked

    def list(self) -> List[dict]:
        """Every account, oldest first, with its disabled state."""
        with self._l.read() as db:
            return [admin_view(r) for r in db["users"].rows_where(order_by="created_at, rowid")]

    def get(self, user_id: str) -> dict:
        """One account, or NotFound."""
        with self._l.read() as db:
            rows = list(db["users"].rows_where("id = ?", [user_id], limit=1))
        if not rows:
            raise NotFound("user not found")
        return admin_view(rows[0])

    def update(self, user_id: str, *, is_admin=None, disabled=None) -> dict:
        """Set the admin flag and/or disable (signing the user out everywhere) or re-enable an account."""
        with self._l.tx() as db:
            row = db.execute("select is_admin, disabled_at from users where id = ?", [user_id]).fetchone()
            if row is None:
                raise NotFound("user not found")
            admin = bool(row[0]) if is_admin is None else is_admin
            off = bool(row[1]) if disabled is None else disabled
            others = db.execute(
                "select count(*) from users where is_admin = 1 and disabled_at is null and id != ?", [user_id]
            ).fetchone()[0]
            if others == 0 and (not admin or off):
                raise Conflict("this is the last active admin; make another admin first")
            if is_admin is not None:
                db.execute("update users set is_admin = ? where id = ?", [1 if is_admin else 0, user_id])
            if disabled is True and not row[1]:
                db.execute(
                    "update users set disabled_at = ?, session_version = session_version + 1 where id = ?",
                    [time.time(), user_id],
                )
            elif disabled is False:
                db.execute("update users set disabled_at = null where id = ?", [user_id])
        return self.get(user_id)
