"""User accounts and instance settings. Passwords arrive here already hashed."""

from __future__ import annotations

import sqlite3
import time
from typing import List, Optional, Tuple

from ..errors import Conflict
from .database import Locked, select_rows
from .sessions import new_id

# Tables whose ``owner`` column names a user but which are not user data to adopt.
_NOT_ADOPTED = {"users", "api_tokens", "user_settings"}


def public_user(row: dict) -> dict:
    """What a client may see of a user (never the hash)."""
    return {
        "id": row["id"],
        "username": row["username"],
        "is_admin": bool(row["is_admin"]),
        "created_at": row["created_at"],
    }


class UserRepo:
    """Create, find and update users; usernames are stored lower-case and unique."""

    def __init__(self, locked: Locked):
        self._l = locked

    def count(self) -> int:
        """How many users exist."""
        with self._l.read() as db:
            return db.execute("select count(*) from users").fetchone()[0]

    def create(self, username: str, password_hash: str, *, is_admin: bool = False, only_if_none: bool = False) -> dict:
        """Insert a user; with ``only_if_none`` refuse (Conflict) once any user exists.

        The emptiness check and the insert are one statement, so two concurrent set-ups
        (even from two worker processes) cannot both create an admin.
        """
        now = time.time()
        row = {
            "id": new_id("u_"),
            "username": username,
            "password_hash": password_hash,
            "is_admin": 1 if is_admin else 0,
            "created_at": now,
            "password_changed_at": now,
            "session_version": 1,
        }
        guard = " where not exists (select 1 from users)" if only_if_none else ""
        try:
            with self._l.tx() as db:
                cursor = db.execute(
                    "insert into users (id, username, password_hash, is_admin, created_at, password_changed_at,"
                    " session_version) select ?, ?, ?, ?, ?, ?, ?" + guard,
                    [row["id"], username, password_hash, row["is_admin"], now, now, 1],
                )
                if cursor.rowcount == 0:
                    raise Conflict("set-up is already done; sign in instead")
        except sqlite3.IntegrityError:
            raise Conflict("that username is taken") from None
        return row

    def get(self, user_id: str) -> Optional[dict]:
        """The user with this id, or None."""
        with self._l.read() as db:
            rows = select_rows(db, "select * from users where id = ? limit 1", [user_id])
        return rows[0] if rows else None

    def by_username(self, username: str) -> Optional[dict]:
        """The user with this (lower-case) username, or None."""
        with self._l.read() as db:
            rows = select_rows(db, "select * from users where username = ? limit 1", [username])
        return rows[0] if rows else None

    def list(self) -> List[dict]:
        """Every user, oldest first, without hashes."""
        with self._l.read() as db:
            return [public_user(r) for r in db["users"].rows_where(order_by="created_at, rowid")]

    def first_admin_id(self) -> Optional[str]:
        """The oldest admin's id (the implicit owner in single-user mode once accounts exist)."""
        with self._l.read() as db:
            row = db.execute("select id from users where is_admin = 1 order by created_at, rowid limit 1").fetchone()
        return row[0] if row else None

    def implicit(self, fallback: str) -> Tuple[str, Optional[dict]]:
        """The oldest admin's id (else ``fallback``) and that user's row (None for ``fallback``): one statement.

        [startpath, issue 22] what ``first_admin_id`` and ``get`` answer together, for every AUTH=none request.
        """
        with self._l.read() as db:
            cursor = db.execute(
                "select o.owner, u.* from (select coalesce((select id from users where is_admin = 1"
                " order by created_at, rowid limit 1), ?) as owner) o left join users u on u.id = o.owner",
                [fallback],
            )
            columns = [d[0] for d in cursor.description][1:]
            owner, *values = cursor.fetchone()
        return owner, (dict(zip(columns, values, strict=True)) if values[0] is not None else None)

    def set_password(self, user_id: str, password_hash: str) -> int:
        """Replace the hash and end every other sign-in; returns the new session version."""
        with self._l.tx() as db:
            db.execute(
                "update users set password_hash = ?, password_changed_at = ?,"
                " session_version = session_version + 1 where id = ?",
                [password_hash, time.time(), user_id],
            )
            return db.execute("select session_version from users where id = ?", [user_id]).fetchone()[0]

    def bump_session_version(self, user_id: str) -> int:
        """Sign the user out everywhere; returns the new session version."""
        with self._l.tx() as db:
            db.execute("update users set session_version = session_version + 1 where id = ?", [user_id])
            return db.execute("select session_version from users where id = ?", [user_id]).fetchone()[0]

    def adopt(self, from_owner: str, to_owner: str) -> int:
        """Give every row owned by ``from_owner`` (in any table with an owner column) to ``to_owner``.

        Used once, when the first account is created, so chats made in single-user mode
        stay visible to the person who then turns sign-in on.
        """
        moved = 0
        with self._l.tx() as db:
            for table in db.table_names():
                if table in _NOT_ADOPTED or table.startswith("_"):
                    continue
                if "owner" in db[table].columns_dict:
                    moved += db.execute(
                        f"update [{table}] set owner = ? where owner = ?", [to_owner, from_owner]
                    ).rowcount
        return moved


class SettingsRepo:
    """Instance-wide key/value settings (``allow_signup``)."""

    def __init__(self, locked: Locked):
        self._l = locked

    def get(self, key: str, default: str = "") -> str:
        """The setting's value, or ``default``."""
        with self._l.read() as db:
            row = db.execute("select value from settings where key = ?", [key]).fetchone()
        return row[0] if row else default

    def set(self, key: str, value: str) -> None:
        """Store a setting."""
        with self._l.tx() as db:
            db.table("settings").upsert({"key": key, "value": value}, pk="key")
