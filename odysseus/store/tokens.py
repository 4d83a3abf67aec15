"""API tokens: only their SHA-256 is stored; every owner-facing query filters by owner."""

from __future__ import annotations

import time
from typing import List, Optional

from ..errors import NotFound
from .database import Locked
from .sessions import new_id

# last_used_at is a hint for the owner, not an audit log: write it at most this often.
LAST_USED_RESOLUTION = 60.0


def public_token(row: dict) -> dict:
    """What the owner sees of a stored token (never the hash)."""
    return {
        "id": row["id"],
        "name": row["name"],
        "prefix": row["prefix"],
        "created_at": row["created_at"],
        "last_used_at": row["last_used_at"],
        "revoked_at": row["revoked_at"],
    }


class TokenRepo:
    """Create, look up, list and revoke API tokens."""

    def __init__(self, locked: Locked):
        self._l = locked

    def create(self, owner: str, name: str, token_hash: str, prefix: str) -> dict:
        """Record a new token by its hash."""
        row = {
            "id": new_id("tok_"),
            "owner": owner,
            "name": name,
            "token_hash": token_hash,
            "prefix": prefix,
            "created_at": time.time(),
            "last_used_at": None,
            "revoked_at": None,
        }
        with self._l.tx() as db:
            db.table("api_tokens").insert(row)
        return row

    def by_hash(self, token_hash: str) -> Optional[dict]:
        """The live (not revoked) token with this hash, or None."""
        with self._l.read() as db:
            rows = list(db["api_tokens"].rows_where("token_hash = ? and revoked_at is null", [token_hash], limit=1))
        return rows[0] if rows else None

    def touch(self, row: dict) -> None:
        """Note that the token was used (at most once a minute)."""
        now = time.time()
        if row["last_used_at"] and now - row["last_used_at"] < LAST_USED_RESOLUTION:
            return
        with self._l.tx() as db:
            db.execute("update api_tokens set last_used_at = ? where id = ?", [now, row["id"]])

    def list(self, owner: str, include_revoked: bool = False) -> List[dict]:
        """The owner's tokens, newest first."""
        where = "owner = ?" + ("" if include_revoked else " and revoked_at is null")
        with self._l.read() as db:
            return [
                public_token(r)
                for r in db["api_tokens"].rows_where(where, [owner], order_by="created_at desc, rowid desc")
            ]

    def revoke_all(self, owner: str) -> int:
        """Revoke every live token of ``owner`` (a password change); answers how many."""
        with self._l.tx() as db:
            cursor = db.execute(
                "update api_tokens set revoked_at = ? where owner = ? and revoked_at is null", [time.time(), owner]
            )
            return int(cursor.rowcount)

    def revoke(self, owner: str, token_id: str) -> dict:
        """Revoke the owner's live token (NotFound for unknown, foreign or already revoked ids)."""
        with self._l.tx() as db:
            cursor = db.execute(
                "update api_tokens set revoked_at = ? where id = ? and owner = ? and revoked_at is null",
                [time.time(), token_id, owner],
            )
            if cursor.rowcount == 0:
                raise NotFound("token not found")
            return public_token(db.table("api_tokens").get(token_id))
