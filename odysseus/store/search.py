"""Full-text search over the owner's message text (SQLite FTS5, m111), and the index's catch-up (m312).

Invariant (m312): every message whose id is at most ``messages_fts_state.indexed_through`` (the
watermark) is in ``messages_fts`` with its current text, and no message past it is. The triggers keep
the first part exact for edits, deletes and a reused id; the messages past the watermark, which a turn
writes without touching the index, are added by ``SearchRepo.catch_up`` in batches, each one
transaction that indexes them and moves the watermark. Every search catches up first, up to the newest
message at that moment, so a search never misses a message written before it.
"""

from __future__ import annotations

import re
from typing import Any, Callable, List, Optional, Sequence, Tuple

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


#: messages indexed by one catch-up transaction (the write lock is held for one batch at a time)
CATCH_UP_BATCH = 2000
WATERMARK = "(select indexed_through from messages_fts_state)"
#: the newest id of the next batch: at most ``?`` messages past the watermark, none past ``?`` (the
#: newest message when the catch-up began); null when no message is past the watermark up to there
_BATCH_TOP = f"(select max(id) from (select id from messages where id > {WATERMARK} and id <= ? order by id limit ?))"
#: one catch-up batch: index the messages past the watermark up to the batch's top, then move the
#: watermark there (both in one transaction: the top is the same for both, no other writer runs between)
CATCH_UP = (
    (
        "insert into messages_fts(rowid, content) select id, coalesce(content, '') from messages"
        f" where id > {WATERMARK} and id <= {_BATCH_TOP}"
    ),
    f"update messages_fts_state set indexed_through = coalesce({_BATCH_TOP}, indexed_through)",
)
Statements = Sequence[Tuple[str, Sequence[Any]]]


class SearchRepo:
    """Search the owner's messages; every query filters by owner."""

    def __init__(self, locked: Locked):
        self._l = locked
        self._write: Optional[Callable[[Statements], List[int]]] = None

    def use_writer(self, write: Callable[[Statements], List[int]]) -> None:
        """Run the catch-up's transactions through ``write`` (the durable writer's native thread, so the
        gevent hub never holds the write lock while a batch is indexed) instead of this connection."""
        self._write = write

    def catch_up(self, batch: int = CATCH_UP_BATCH) -> int:
        """Index every message past the watermark, up to the newest one now; how many were indexed.

        One transaction per ``batch`` messages. Messages written meanwhile are left for the next call."""
        with self._l.read() as db:
            target, watermark = db.execute(
                f"select coalesce((select max(id) from messages), 0), {WATERMARK}"
            ).fetchone()
        if watermark >= target:
            return 0  # nothing to index: no write transaction at all
        top = [target, batch]
        statements = [(CATCH_UP[0], top), (CATCH_UP[1], top)]
        indexed = 0
        while True:
            if self._write is not None:
                inserted = self._write(statements)[0]
            else:
                with self._l.tx() as db:
                    inserted = [db.execute(sql, list(params)).rowcount for sql, params in statements][0]
            indexed += inserted
            if inserted < batch:  # this batch took the rest up to the target
                return indexed

    def search(self, owner: str, query: str, limit: int = 30, offset: int = 0) -> List[dict]:
        """Best matches first: session id, title and whether it is archived (archived chats are searched too),
        message id and role, a snippet with highlight offsets. Messages not yet indexed are indexed first."""
        expression = match_expression(query)
        self.catch_up()
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
