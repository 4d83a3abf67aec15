"""Chat sessions: one owner each; every query filters by owner."""

from __future__ import annotations

import secrets
import time
from typing import Any, List, Optional, Tuple

from ..errors import NotFound
from .database import Locked, select_rows


def new_id(prefix: str) -> str:
    """An unguessable id: ``prefix`` + 128 random bits, URL-safe."""
    return prefix + secrets.token_urlsafe(16)


def session_in_tx(db: Any, owner: str, session_id: Optional[str], title: str, now: float) -> str:
    """Inside a write transaction: the owner's session ``session_id`` (NotFound for an unknown or another
    user's), or with None a new session titled ``title``; answers its id."""
    if session_id is None:
        session_id = new_id("s_")
        db.execute(
            "insert into sessions (id, owner, title, created_at, updated_at) values (?, ?, ?, ?, ?)",
            [session_id, owner, title, now, now],
        )
    elif db.execute("select 1 from sessions where id = ? and owner = ?", [session_id, owner]).fetchone() is None:
        raise NotFound("session not found")
    return session_id


class SessionRepo:
    """CRUD for sessions."""

    def __init__(self, locked: Locked):
        self._l = locked

    def create(self, owner: str, title: str = "New chat") -> dict:
        """Create and return a session."""
        now = time.time()
        row = {"id": new_id("s_"), "owner": owner, "title": title, "created_at": now, "updated_at": now}
        with self._l.tx() as db:
            db.table("sessions").insert(row)
        return row

    def get(self, owner: str, session_id: str) -> dict:
        """The owner's session, or NotFound."""
        with self._l.read() as db:
            rows = select_rows(db, "select * from sessions where id = ? and owner = ? limit 1", [session_id, owner])
        if not rows:
            raise NotFound("session not found")
        return rows[0]

    def list(
        self,
        owner: str,
        limit: int = 100,
        offset: int = 0,
        before: Optional[Tuple[float, str]] = None,
        origin: str = "all",
    ) -> List[dict]:
        """The owner's sessions, most recently updated first (ties by id).

        ``before`` is the (updated_at, id) of the last session of the previous page: the
        next page starts right after it, so paging never repeats a session when another
        one is updated meanwhile (that one moves to the top instead). ``origin``: ``page``
        (sessions the page made: ``origin`` null), ``api`` (made through /v1) or ``all``.
        """
        where = "owner = ?"
        args: List[Any] = [owner]
        if origin == "page":
            where += " and origin is null"
        elif origin != "all":
            where += " and origin = ?"
            args.append(origin)
        if before is not None:
            where += " and (updated_at < ? or (updated_at = ? and id < ?))"
            args += [before[0], before[0], before[1]]
        with self._l.read() as db:
            return list(
                db["sessions"].rows_where(where, args, order_by="updated_at desc, id desc", limit=limit, offset=offset)
            )

    def rename(self, owner: str, session_id: str, title: str) -> dict:
        """Rename the owner's session."""
        self.get(owner, session_id)
        with self._l.tx() as db:
            db.table("sessions").update(session_id, {"title": title, "updated_at": time.time()})
        return self.get(owner, session_id)

    def delete(self, owner: str, session_id: str) -> List[str]:
        """Delete the owner's session with its messages, runs (and their durable events), background jobs,
        approvals and image records.

        Returns the names of the session's image files, for the caller to remove from disk.
        """
        self.get(owner, session_id)
        where = [session_id, owner]
        with self._l.tx() as db:
            images = [
                row[0]
                for row in db.execute("select name from images where session_id = ? and owner = ?", where).fetchall()
            ]
            db.execute(
                "delete from run_events where run_id in (select run_id from runs where session_id = ? and owner = ?)",
                where,
            )
            db.execute(  # a /v1 response's id is its run's with another prefix (m220): by key, no scan
                "delete from openai_responses where id in (select 'resp_' || substr(run_id, 5) from runs"
                " where session_id = ?1 and owner = ?2 union all select 'chatcmpl-' || substr(run_id, 5) from runs"
                " where session_id = ?1 and owner = ?2)",
                where,
            )
            for table in ("messages", "runs", "jobs", "approvals", "images"):
                db.execute(f"delete from {table} where session_id = ? and owner = ?", where)
            db.execute("delete from sessions where id = ? and owner = ?", where)
        return images
