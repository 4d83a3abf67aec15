"""Chat folders (m307): one owner each, names unique per owner in any case; deleting one keeps its chats.

A session names its folder in ``sessions.folder_id`` (null: in no folder). Another user's folder id is
NotFound exactly like an unknown one, whether it is read, renamed, deleted or a session is moved into it.
"""

from __future__ import annotations

import sqlite3
import time
import unicodedata
from typing import Any, List, Optional

from ..errors import BadRequest, Conflict, NotFound
from .database import Locked, select_rows
from .sessions import new_id

MAX_NAME = 100
MAX_FOLDERS = 1000  # per owner: a sidebar, not a file system


def folder_name(value: Any) -> str:
    """A folder name as stored: a string, trimmed, 1 to ``MAX_NAME`` characters, no control characters.

    Markup is kept as text (the page shows names with ``textContent``), never stripped or escaped here.
    """
    if not isinstance(value, str):
        raise BadRequest("name must be a string")
    name = value.strip()
    if not name:
        raise BadRequest("name is required")
    if len(name) > MAX_NAME:
        raise BadRequest(f"name is longer than {MAX_NAME} characters")
    if any(unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp") for char in name):
        raise BadRequest("name must be one line of text without control characters")
    return name


def _duplicate(db, owner: str, name: str, other_than: str = "") -> bool:
    row = db.execute(
        "select 1 from folders where owner = ? and name = ? collate nocase and id != ? limit 1",
        [owner, name, other_than],
    ).fetchone()
    return row is not None


def folder_for_import(db, owner: str, name: str, now: float) -> Optional[str]:
    """Inside a write transaction: the id of ``owner``'s folder named ``name`` (any case), created when
    there is none; None when the owner already has ``MAX_FOLDERS`` (the chat then lands in no folder)."""
    row = db.execute(
        "select id from folders where owner = ? and name = ? collate nocase limit 1", [owner, name]
    ).fetchone()
    if row is not None:
        return row[0]
    if db.execute("select count(*) from folders where owner = ?", [owner]).fetchone()[0] >= MAX_FOLDERS:
        return None
    folder_id = new_id("f_")
    db.execute(
        "insert into folders (id, owner, name, created_at, updated_at) values (?, ?, ?, ?, ?)",
        [folder_id, owner, name, now, now],
    )
    return folder_id


class FolderRepo:
    """Create, list, rename and delete the owner's folders."""

    def __init__(self, locked: Locked):
        self._l = locked

    def list(self, owner: str) -> List[dict]:
        """The owner's folders by name (any case), each with ``session_count``: its chats that are not archived."""
        with self._l.read() as db:
            return select_rows(
                db,
                "select f.id, f.name, f.created_at, f.updated_at, (select count(*) from sessions s"
                " where s.owner = f.owner and s.folder_id = f.id and s.archived = 0) as session_count"
                " from folders f where f.owner = ? order by f.name collate nocase, f.id",
                [owner],
            )

    def get(self, owner: str, folder_id: str) -> dict:
        """The owner's folder, or NotFound."""
        with self._l.read() as db:
            rows = select_rows(
                db,
                "select id, name, created_at, updated_at from folders where id = ? and owner = ? limit 1",
                [folder_id, owner],
            )
        if not rows:
            raise NotFound("folder not found")
        return rows[0]

    def create(self, owner: str, name: Any) -> dict:
        """A new folder; 409 when the owner has one of that name (any case)."""
        name = folder_name(name)
        now = time.time()
        row = {"id": new_id("f_"), "owner": owner, "name": name, "created_at": now, "updated_at": now}
        with self._l.tx() as db:
            if _duplicate(db, owner, name):
                raise Conflict(f"you already have a folder named {name!r}")
            count = db.execute("select count(*) from folders where owner = ?", [owner]).fetchone()[0]
            if count >= MAX_FOLDERS:
                raise BadRequest(f"at most {MAX_FOLDERS} folders")
            try:
                db.execute(
                    "insert into folders (id, owner, name, created_at, updated_at) values (?, ?, ?, ?, ?)",
                    [row["id"], owner, name, now, now],
                )
            except sqlite3.IntegrityError:  # the unique index, should a check ever be bypassed
                raise Conflict(f"you already have a folder named {name!r}") from None
        return self.get(owner, row["id"])

    def rename(self, owner: str, folder_id: str, name: Any) -> dict:
        """Rename the owner's folder (NotFound first, then the name's checks)."""
        self.get(owner, folder_id)
        name = folder_name(name)
        with self._l.tx() as db:
            if _duplicate(db, owner, name, other_than=folder_id):
                raise Conflict(f"you already have a folder named {name!r}")
            db.execute(
                "update folders set name = ?, updated_at = ? where id = ? and owner = ?",
                [name, time.time(), folder_id, owner],
            )
        return self.get(owner, folder_id)

    def delete(self, owner: str, folder_id: str) -> int:
        """Delete the owner's folder; its chats stay, in no folder. Answers how many chats it held."""
        with self._l.tx() as db:
            if db.execute("select 1 from folders where id = ? and owner = ?", [folder_id, owner]).fetchone() is None:
                raise NotFound("folder not found")
            moved = db.execute(
                "update sessions set folder_id = null where owner = ? and folder_id = ?", [owner, folder_id]
            ).rowcount
            db.execute("delete from folders where id = ? and owner = ?", [folder_id, owner])
        return moved
