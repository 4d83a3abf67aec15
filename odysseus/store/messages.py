"""Chat messages: role, content, thinking and a metadata JSON object, kept as a tree.

Every message has a ``parent_id`` (None for a first message); a session's selected branch is
the path from its ``branch_head`` message (``sessions.branch_head``; the newest message when
unset) back to a root. A new message continues the selected branch and becomes its head; a
reply's parent is the user message its run answers. ``recent`` and ``page`` read only the
selected branch, so a model is sent that branch and nothing else; ``list`` reads every message.
Ids grow along every path (a parent is always stored before its children).
"""

from __future__ import annotations

import json
import time
from typing import Any, List, Optional, Tuple

from ..errors import NotFound
from .database import Locked, select_rows


def _decode(row: dict) -> dict:
    """The row with its metadata as a dict and its rating as one field (``select_rows`` gives a new dict per
    row: decoded in place)."""
    raw = row.get("metadata")
    # [issue 22] most user messages hold "{}": a turn reads up to HISTORY_CONTEXT_MESSAGES rows
    row["metadata"] = json.loads(raw) if raw and raw != "{}" else {}
    row["rating"] = rating_of(row.pop("rating", None), row.pop("rating_comment", None), row.pop("rated_at", None))
    return row


def rating_of(value: Optional[int], comment: Optional[str], rated_at: Optional[float]) -> Optional[dict]:
    """A message's rating as the API shows it (m310): ``{value, comment, rated_at}``, or None when unrated."""
    return None if value is None else {"value": value, "comment": comment, "rated_at": rated_at}


#: what a reply may hold and still be blank (also the set ``chats/titles.first_reply_state`` trims in SQL)
REPLY_BLANKS = " \t\n\v\f\r"


def holds_reply(messages: List[dict]) -> bool:
    """Whether ``messages`` (rows as ``recent`` returns them) include an assistant reply that is not blank."""
    return any(m.get("role") == "assistant" and (m.get("content") or "").strip(REPLY_BLANKS) for m in messages)


#: ``insert_message``'s default ``parent``: look the parent up (``_parent_for``)
FIND_PARENT: Any = object()


def insert_message(
    db,
    owner: str,
    session_id: str,
    role: str,
    content: str,
    *,
    thinking: str = "",
    metadata: Optional[dict] = None,
    run_id: Optional[str] = None,
    client_message_id: Optional[str] = None,
    parent: Any = FIND_PARENT,
) -> int:
    """Insert a message inside the caller's transaction and return its id.

    ``parent``: the parent's id (or None) when the caller has just read it in this transaction
    (the turn start: ``owned_branch_head``); by default it is looked up.
    """
    now = time.time()
    parent_id = _parent_for(db, session_id, role, run_id) if parent is FIND_PARENT else parent
    cursor = db.execute(
        "insert into messages (session_id, owner, role, content, thinking, metadata, run_id, client_message_id,"
        " created_at, parent_id) values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            session_id,
            owner,
            role,
            content,
            thinking or "",
            json.dumps(metadata) if metadata else "{}",
            run_id,
            client_message_id,
            now,
            parent_id,
        ],
    )
    db.execute("update sessions set updated_at = ?, branch_head = ? where id = ?", [now, cursor.lastrowid, session_id])
    return cursor.lastrowid


def branch_head(db, session_id: str) -> Optional[int]:
    """The newest message of the session's selected branch (the newest message when none was selected)."""
    row = db.execute(
        "select coalesce(branch_head, (select max(id) from messages where session_id = ?)) from sessions where id = ?",
        [session_id, session_id],
    ).fetchone()
    return row[0] if row else None


def owned_branch_head(db, owner: str, session_id: str) -> Tuple[bool, Optional[int]]:
    """Whether ``owner`` has the session, and its branch head (as ``branch_head``): one statement."""
    row = db.execute(
        "select coalesce(branch_head, (select max(id) from messages where session_id = ?)) from sessions"
        " where id = ? and owner = ?",
        [session_id, session_id, owner],
    ).fetchone()
    return (False, None) if row is None else (True, row[0])


def _parent_for(db, session_id: str, role: str, run_id: Optional[str]) -> Optional[int]:
    """A reply answers its run's user message; anything else continues the selected branch."""
    if role == "assistant" and run_id:
        row = db.execute("select user_message_id from runs where run_id = ?", [run_id]).fetchone()
        if row and row[0] is not None:
            head = branch_head(db, session_id)
            if head is not None and head != row[0]:
                note = db.execute("select role, parent_id from messages where id = ?", [head]).fetchone()
                if note and note[0] == "system" and note[1] == row[0]:
                    return head  # a note stored during this run (a compaction summary) sits between the two
            return row[0]
    return branch_head(db, session_id)


#: the ids on the path from message ? back to its root (ids shrink along it, so it ends), newest first
_PATH = (
    "with recursive path(id) as (select ? union all select m.parent_id from messages m join path"
    " on m.id = path.id where m.parent_id is not null and m.parent_id < m.id{limit})"
)


class MessageRepo:
    """Insert, list, edit and delete messages; every query filters by owner."""

    def __init__(self, locked: Locked):
        self._l = locked

    def add(
        self,
        owner: str,
        session_id: str,
        role: str,
        content: str,
        *,
        thinking: str = "",
        metadata: Optional[dict] = None,
        run_id: Optional[str] = None,
        client_message_id: Optional[str] = None,
    ) -> int:
        """Insert a message and return its id."""
        with self._l.tx() as db:
            return insert_message(
                db,
                owner,
                session_id,
                role,
                content,
                thinking=thinking,
                metadata=metadata,
                run_id=run_id,
                client_message_id=client_message_id,
            )

    def list(self, owner: str, session_id: str, limit: int = 1000, after_id: int = 0) -> List[dict]:
        """The session's OLDEST ``limit`` messages after ``after_id``, in order.

        Not for building a model's context or showing a conversation: a session may hold
        more than ``limit`` messages. Use ``recent`` or ``page`` for those.
        """
        with self._l.read() as db:
            rows = select_rows(
                db,
                "select * from messages where session_id = ? and owner = ? and id > ? order by id limit ?",
                [session_id, owner, after_id, limit],
            )
            return [_decode(r) for r in rows]

    def page(
        self, owner: str, session_id: str, before: Optional[int] = None, limit: int = 200, head: Optional[int] = None
    ) -> Tuple[List[dict], bool]:
        """The selected branch's newest ``limit`` messages older than id ``before``, in order; and whether older exist.

        Pages taken with ``before`` = the first id of the previous page meet with no gap
        and no duplicate, however many messages are added meanwhile. ``head``: the branch head
        when the caller knows it (the start, which has just stored it), saving its lookup.
        """
        with self._l.read() as db:
            head = branch_head(db, session_id) if head is None else head
            if head is None:
                return [], False
            where = "session_id = ? and owner = ?"
            args: List[Any] = [session_id, owner]
            path_args: List[Any]
            if before is not None:
                where, args = where + " and id < ?", [*args, before]
                path, path_args = _PATH.format(limit=""), [head]
            else:
                # [startpath, issue 22] the newest page walks only its own limit + 1 steps of the branch,
                # not the whole path back to the root (a start on a long session read all of it)
                path, path_args = _PATH.format(limit=" limit ?"), [head, limit + 1]
            # execute, not query(): sqlite-utils wraps query() in a savepoint, and this may run inside a start
            selected = select_rows(
                db,
                f"{path} select * from messages where id in (select id from path) and {where} order by id desc limit ?",
                path_args + args + [limit + 1],
            )
            rows = [_decode(row) for row in selected]
        has_more = len(rows) > limit
        return rows[:limit][::-1], has_more

    def recent(self, owner: str, session_id: str, limit: int, head: Optional[int] = None) -> List[dict]:
        """The selected branch's newest ``limit`` messages in order (what a model's context is built from)."""
        return self.page(owner, session_id, None, limit, head)[0]

    def latest(self, owner: str, session_id: str, role: str) -> Optional[dict]:
        """The session's newest message with ``role``, if any."""
        with self._l.read() as db:
            rows = select_rows(
                db,
                "select * from messages where session_id = ? and owner = ? and role = ? order by id desc limit 1",
                [session_id, owner, role],
            )
        return _decode(rows[0]) if rows else None

    def get(self, owner: str, message_id: int) -> dict:
        """The owner's message, or NotFound."""
        with self._l.read() as db:
            rows = select_rows(db, "select * from messages where id = ? and owner = ? limit 1", [message_id, owner])
        if not rows:
            raise NotFound("message not found")
        return _decode(rows[0])

    def by_client_id(self, owner: str, session_id: str, client_message_id: str) -> Optional[dict]:
        """The user message sent with ``client_message_id`` in this session, if any."""
        with self._l.read() as db:
            rows = select_rows(
                db,
                "select * from messages where session_id = ? and owner = ? and client_message_id = ?"
                " and role = 'user' limit 1",
                [session_id, owner, client_message_id],
            )
        return _decode(rows[0]) if rows else None

    def session_of_client_id(self, owner: str, client_message_id: str) -> Optional[str]:
        """The session in which the owner already sent ``client_message_id``, if any."""
        with self._l.read() as db:
            row = db.execute(
                "select session_id from messages where owner = ? and client_message_id = ? and role = 'user'"
                " order by id desc limit 1",
                [owner, client_message_id],
            ).fetchone()
        return row[0] if row else None

    def update_content(self, owner: str, message_id: int, content: str) -> dict:
        """Edit a message's content (metadata records the edit)."""
        message = self.get(owner, message_id)
        meta = dict(message["metadata"], edited_at=time.time())
        with self._l.tx() as db:
            db.table("messages").update(message_id, {"content": content, "metadata": json.dumps(meta)})
        return self.get(owner, message_id)

    def amend_exhibit(self, owner: str, session_id: str, exhibit: dict) -> int:
        """Replace the exhibit with ``exhibit["id"]`` in every saved reply of the session; return how many."""
        needle = json.dumps(exhibit["id"])
        changed = 0
        with self._l.tx() as db:
            rows = db.execute(
                "select id, metadata from messages where session_id = ? and owner = ?"
                " and role = 'assistant' and instr(metadata, ?) > 0",
                [session_id, owner, needle],
            ).fetchall()
            for message_id, raw in rows:
                meta = json.loads(raw or "{}")
                exhibits = meta.get("exhibits") or []
                if not any(e.get("id") == exhibit["id"] for e in exhibits):
                    continue
                meta["exhibits"] = [exhibit if e.get("id") == exhibit["id"] else e for e in exhibits]
                db.execute("update messages set metadata = ? where id = ?", [json.dumps(meta), message_id])
                changed += 1
        return changed

    def delete(self, owner: str, message_id: int) -> None:
        """Delete the owner's message; its replies and alternatives move up to its parent, so no branch is cut."""
        message = self.get(owner, message_id)
        with self._l.tx() as db:
            db.execute(
                "update messages set parent_id = ? where parent_id = ? and session_id = ?",
                [message.get("parent_id"), message_id, message["session_id"]],
            )
            db.execute(
                "update sessions set branch_head = ? where id = ? and branch_head = ?",
                [message.get("parent_id"), message["session_id"], message_id],
            )
            db.execute("delete from messages where id = ? and owner = ?", [message_id, owner])
