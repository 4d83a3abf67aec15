"""Chat sessions: one owner each; every query filters by owner."""

from __future__ import annotations

import secrets
import time
from typing import Any, Dict, List, Optional, Tuple

from ..errors import NotFound
from .database import Locked, select_rows

#: ``list``'s folder filter: any folder or none (no filter), in no folder, or one folder's id
ANY_FOLDER = ""
NO_FOLDER = "none"


def new_id(prefix: str) -> str:
    """An unguessable id: ``prefix`` + 128 random bits, URL-safe."""
    return prefix + secrets.token_urlsafe(16)


def session_view(row: dict) -> dict:
    """A session row as the API shows it: ``pinned`` and ``archived`` as booleans (m307; 0/1 in SQLite)."""
    row["pinned"] = bool(row.get("pinned"))
    row["archived"] = bool(row.get("archived"))
    row.setdefault("folder_id", None)
    return row


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
        return session_view(dict(row, folder_id=None, pinned=0, archived=0))

    def get(self, owner: str, session_id: str) -> dict:
        """The owner's session, or NotFound."""
        with self._l.read() as db:
            rows = select_rows(db, "select * from sessions where id = ? and owner = ? limit 1", [session_id, owner])
        if not rows:
            raise NotFound("session not found")
        return session_view(rows[0])

    def list(
        self,
        owner: str,
        limit: int = 100,
        offset: int = 0,
        before: Optional[Tuple[float, str]] = None,
        origin: str = "all",
        archived: bool = False,
        pinned: Optional[bool] = None,
        folder: str = ANY_FOLDER,
    ) -> List[dict]:
        """The owner's sessions, most recently updated first (ties by id).

        ``before`` is the (updated_at, id) of the last session of the previous page: the
        next page starts right after it, so paging never repeats a session when another
        one is updated meanwhile (that one moves to the top instead). ``origin``: ``page``
        (sessions the page made: ``origin`` null), ``api`` (made through /v1) or ``all``.
        ``archived``: the archived sessions instead of the others; ``pinned``: only pinned (True)
        or only unpinned (False) ones; ``folder``: ``ANY_FOLDER``, ``NO_FOLDER`` or a folder's id
        (the caller has checked that it is the owner's). The flags are SQL literals, so the partial
        indexes of m307 can answer the pinned, foldered and archived lists; they are named (``indexed
        by``), since without statistics SQLite would rather walk the date-ordered index over every chat.
        """
        where = "owner = ?"
        args: List[Any] = [owner]
        if origin == "page":
            where += " and origin is null"
        elif origin != "all":
            where += " and origin = ?"
            args.append(origin)
        where += " and archived = 1" if archived else " and archived = 0"
        if pinned is not None:
            where += " and pinned = 1" if pinned else " and pinned = 0"
        if folder == NO_FOLDER:
            where += " and folder_id is null"
        elif folder != ANY_FOLDER:
            where += " and folder_id is not null and folder_id = ?"
            args.append(folder)
        if before is not None:
            where += " and (updated_at < ? or (updated_at = ? and id < ?))"
            args += [before[0], before[0], before[1]]
        index = ""  # the chats in none of the sections: the date-ordered index over all of them
        if archived:
            index = " indexed by idx_sessions_archived"
        elif folder not in (ANY_FOLDER, NO_FOLDER):
            index = " indexed by idx_sessions_folder"
        elif pinned:
            index = " indexed by idx_sessions_pinned"
        with self._l.read() as db:
            rows = select_rows(
                db,
                f"select * from sessions{index} where {where} order by updated_at desc, id desc limit ? offset ?",
                [*args, limit, offset],
            )
        return [session_view(row) for row in rows]

    def rename(self, owner: str, session_id: str, title: str) -> dict:
        """Rename the owner's session."""
        return self.update(owner, session_id, {"title": title})

    def update(self, owner: str, session_id: str, changes: Dict[str, Any]) -> dict:
        """Change the owner's session in one transaction: ``title`` (moves it to the top, as activity does),
        ``folder_id`` (the owner's folder, or None), ``pinned``, ``archived`` (bools; organising a chat
        leaves its place in time alone). NotFound for another user's session or folder; nothing is
        written then."""
        values: Dict[str, Any] = {}
        if "title" in changes:
            values.update(title=changes["title"], updated_at=time.time())
        for flag in ("pinned", "archived"):
            if flag in changes:
                values[flag] = 1 if changes[flag] else 0
        if "folder_id" in changes:
            values["folder_id"] = changes["folder_id"]
        with self._l.tx() as db:
            if db.execute("select 1 from sessions where id = ? and owner = ?", [session_id, owner]).fetchone() is None:
                raise NotFound("session not found")
            folder_id = values.get("folder_id")
            if folder_id is not None and (
                db.execute("select 1 from folders where id = ? and owner = ?", [folder_id, owner]).fetchone() is None
            ):
                raise NotFound("folder not found")
            if values:
                assignments = ", ".join(f"{column} = ?" for column in values)
                db.execute(
                    f"update sessions set {assignments} where id = ? and owner = ?",
                    [*values.values(), session_id, owner],
                )
        return self.get(owner, session_id)

    def delete(self, owner: str, session_id: str) -> List[str]:
        """Delete the owner's session with its messages, runs (and their durable events), background jobs,
        approvals, image records and share links (m309: their urls answer 404 from now on).

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
            for table in ("messages", "runs", "jobs", "approvals", "images", "shares"):
                db.execute(f"delete from {table} where session_id = ? and owner = ?", where)
            db.execute("delete from sessions where id = ? and owner = ?", where)
        return images
