"""Share links (m309): a chat's snapshot behind an unguessable token, listed and revoked by its owner.

Invariants: a token is ``secrets.token_urlsafe(24)`` (192 random bits) and is the only way to read a
snapshot without signing in; a revoked share is deleted, so its token answers nothing; a share whose
chat is gone (deleted with it, ``SessionRepo.delete``) or whose owner's account is disabled answers
nothing either. The owner's other calls filter by owner: another user's share id is NotFound.
"""

from __future__ import annotations

import json
import secrets
import time
from typing import Any, Dict, List, Optional

from ..errors import NotFound
from .database import Locked, select_rows
from .sessions import new_id

#: what the owner sees of a share (the snapshot itself is read through its link)
_COLUMNS = "id, session_id, token, title, message_count, created_at"


def new_token() -> str:
    """An unguessable share token: 192 random bits, URL-safe (32 characters)."""
    return secrets.token_urlsafe(24)


class ShareRepo:
    """Create, list, revoke and read share links."""

    def __init__(self, locked: Locked):
        self._l = locked

    def create(self, owner: str, session_id: str, snapshot: Dict[str, Any]) -> dict:
        """Store a share of the owner's session with ``snapshot`` (NotFound when the session is not theirs)."""
        row = {
            "id": new_id("sh_"),
            "owner": owner,
            "session_id": session_id,
            "token": new_token(),
            "title": snapshot["title"],
            "snapshot": json.dumps(snapshot, ensure_ascii=False),
            "message_count": len(snapshot["messages"]),
            "created_at": time.time(),
        }
        with self._l.tx() as db:
            # inside the write: a chat deleted since its messages were read gets no share
            if db.execute("select 1 from sessions where id = ? and owner = ?", [session_id, owner]).fetchone() is None:
                raise NotFound("session not found")
            db.execute(
                "insert into shares (id, owner, session_id, token, title, snapshot, message_count, created_at)"
                " values (:id, :owner, :session_id, :token, :title, :snapshot, :message_count, :created_at)",
                row,
            )
        return {key: row[key] for key in ("id", "session_id", "token", "title", "message_count", "created_at")}

    def list(self, owner: str) -> List[dict]:
        """The owner's shares, newest first."""
        with self._l.read() as db:
            return select_rows(
                db, f"select {_COLUMNS} from shares where owner = ? order by created_at desc, id desc", [owner]
            )

    def delete(self, owner: str, share_id: str) -> None:
        """Revoke the owner's share: its link answers 404 from now on."""
        with self._l.tx() as db:
            if db.execute("delete from shares where id = ? and owner = ?", [share_id, owner]).rowcount == 0:
                raise NotFound("share not found")

    def snapshot(self, token: str) -> Optional[Dict[str, Any]]:
        """The snapshot behind ``token`` (``{title, messages, shared_at}``), or None for any link that is not live."""
        with self._l.read() as db:
            row = db.execute(
                "select sh.snapshot, sh.created_at from shares sh"
                " join sessions s on s.id = sh.session_id and s.owner = sh.owner"
                " where sh.token = ? and not exists"
                " (select 1 from users u where u.id = sh.owner and u.disabled_at is not null)",
                [token],
            ).fetchone()
        if row is None:
            return None
        snapshot = json.loads(row[0])
        return {"title": snapshot["title"], "messages": snapshot["messages"], "shared_at": row[1]}
