"""Full-text search over the owner's message text (SQLite FTS5; the index is kept in sync by triggers, m111)."""

from __future__ import annotations

import re
from typing import List, Tuple

from ..errors import BadRequest
from .database import Locked

#: FTS5 snippet() markers around a matched term: control characters no message text uses.
OPEN, CLOSE = "\x02", "\x03"
MAX_TERMS = 12
MAX_TERM_CHARS = 64
_WORD = re.compile(r"\w+", re.UNICODE)


def match_expression(query: str) -> str:
    """The FTS5 MATCH expression for a user's query: every word, as a prefix, all required.

    Each word is quoted, so FTS5 operators and punctuation in the query are never syntax.
    """
    words = [w[:MAX_TERM_CHARS] for w in _WORD.findall(query or "")][:MAX_TERMS]
    if not words:
        raise BadRequest("q must contain at least one letter or digit")
    return " ".join(f'"{w}"*' for w in words)


def split_snippet(marked: str) -> Tuple[str, List[List[int]]]:
    """Plain snippet text and the [start, end) offsets of its highlighted terms."""
    text: List[str] = []
    spans: List[List[int]] = []
    length, start = 0, None
    for char in marked or "":
        if char == OPEN:
            start = length
        elif char == CLOSE:
            if start is not None and length > start:
                spans.append([start, length])
            start = None
        else:
            text.append(char)
            length += 1
    return "".join(text), spans


class SearchRepo:
    """Search the owner's messages; every query filters by owner."""

    def __init__(self, locked: Locked):
        self._l = locked

    def search(self, owner: str, query: str, limit: int = 30, offset: int = 0) -> List[dict]:
        """Best matches first: session id, title and whether it is archived (archived chats are searched too),
        message id and role, a snippet with highlight offsets."""
        expression = match_expression(query)
        with self._l.read() as db:
            rows = db.execute(
                "select m.session_id, m.id, m.role, s.title, m.created_at, s.archived,"
                " snippet(messages_fts, 0, ?, ?, '…', 16)"
                " from messages_fts join messages m on m.id = messages_fts.rowid"
                " join sessions s on s.id = m.session_id and s.owner = m.owner"
                " where messages_fts match ? and m.owner = ? order by rank limit ? offset ?",
                [OPEN, CLOSE, expression, owner, limit, offset],
            ).fetchall()
        results = []
        for session_id, message_id, role, title, created_at, archived, marked in rows:
            snippet, highlights = split_snippet(marked)
            results.append(
                {
                    "session_id": session_id,
                    "message_id": message_id,
                    "role": role,
                    "title": title,
                    "archived": bool(archived),
                    "created_at": created_at,
                    "snippet": snippet,
                    "highlights": highlights,
                }
            )
        return results
