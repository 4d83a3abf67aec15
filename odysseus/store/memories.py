"""Memories: short facts a user keeps (or the model proposed) that go into later turns' context.

Every query filters by owner; another user's id is NotFound. ``memories_fts`` (FTS5, porter
stemming) indexes text and category through triggers created by the migration. Recall uses the
index to find candidates and scores them in Python (see ``recall``), because BM25 alone is
meaningless on the handful of rows a user has (its IDF is clamped to ~0 when a term occurs in
most of them).
"""

from __future__ import annotations

import math
import re
import time
from typing import Dict, List, Optional, Tuple

from ..errors import BadRequest, NotFound
from .database import Locked, select_rows
from .sessions import new_id

MAX_TEXT = 1000
MAX_CATEGORY = 40
SOURCES = ("user", "auto")
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_STOP = frozenset(
    """a an and are as at be been but by can could did do does for from had has have how i if in
into is it its me my of on or our so than that the their them then there these they this to was we were what
when where which who why will with would you your yours about just also please tell know like want""".split()
)


def words(text: str) -> List[str]:
    """The significant words of ``text``, lower-cased and crudely stemmed (for overlap scoring)."""
    out = []
    for word in _WORD.findall(text.lower()):
        if len(word) < 2 or word in _STOP:
            continue
        for suffix in ("ing", "es", "ed", "s"):
            if len(word) > len(suffix) + 2 and word.endswith(suffix):
                word = word[: -len(suffix)]
                break
        out.append(word)
    return out


def fts_query(text: str, limit: int = 24) -> str:
    """An FTS5 MATCH expression: the message's significant words OR-ed, each quoted (no query syntax leaks)."""
    seen: List[str] = []
    for word in _WORD.findall(text.lower()):
        if len(word) >= 2 and word not in _STOP and word not in seen:
            seen.append(word)
        if len(seen) >= limit:
            break
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in seen)


def clean_memory(data: dict, partial: bool) -> dict:
    """Validate memory fields from a request body (text, category, pinned); raises BadRequest."""
    out: Dict[str, object] = {}
    if "text" in data or not partial:
        text = data.get("text")
        if not isinstance(text, str) or not text.strip():
            raise BadRequest("text is required and must be a non-empty string")
        text = " ".join(text.split())
        if len(text) > MAX_TEXT:
            raise BadRequest(f"text is longer than {MAX_TEXT} characters")
        out["text"] = text
    if "category" in data and data["category"] is not None:
        category = data["category"]
        if not isinstance(category, str):
            raise BadRequest("category must be a string")
        category = " ".join(category.split()).lower()
        if len(category) > MAX_CATEGORY:
            raise BadRequest(f"category is longer than {MAX_CATEGORY} characters")
        out["category"] = category or "general"
    if "pinned" in data:
        if not isinstance(data["pinned"], bool):
            raise BadRequest("pinned must be true or false")
        out["pinned"] = 1 if data["pinned"] else 0
    if partial and not out:
        raise BadRequest("nothing to change (text, category or pinned)")
    return out


def public_memory(row: dict) -> dict:
    """A memory as the API shows it."""
    return {
        "id": row["id"],
        "text": row["text"],
        "category": row["category"] or "general",
        "pinned": bool(row["pinned"]),
        "source": row["source"],
        "uses": row["uses"] or 0,
        "created_at": row["created_at"],
        "updated_at": row["updated_at"],
        "last_used_at": row["last_used_at"],
    }


class MemoryRepo:
    """CRUD, search and recall over one user's memories, plus the per-user memory switches."""

    def __init__(self, locked: Locked):
        self._l = locked

    # ------------------------------------------------------------------ CRUD
    def list(self, owner: str) -> List[dict]:
        """Every memory of ``owner``: pinned first, then newest first."""
        with self._l.read() as db:
            rows = db["memories"].rows_where("owner = ?", [owner], order_by="pinned desc, created_at desc, rowid desc")
            return [public_memory(r) for r in rows]

    def count(self, owner: str) -> int:
        """How many memories ``owner`` has."""
        with self._l.read() as db:
            return db.execute("select count(*) from memories where owner = ?", [owner]).fetchone()[0]

    def get(self, owner: str, memory_id: str) -> dict:
        """One memory; NotFound for unknown or foreign ids."""
        with self._l.read() as db:
            rows = select_rows(db, "select * from memories where id = ? and owner = ? limit 1", [memory_id, owner])
        if not rows:
            raise NotFound("memory not found")
        return public_memory(rows[0])

    def add(self, owner: str, fields: dict, source: str = "user", limit: Optional[int] = None) -> dict:
        """Store a memory (``fields`` from ``clean_memory``); BadRequest past ``limit`` memories."""
        if source not in SOURCES:
            raise ValueError(source)
        now = time.time()
        row = {
            "id": new_id("mem_"),
            "owner": owner,
            "text": fields["text"],
            "category": fields.get("category") or "general",
            "pinned": int(fields.get("pinned") or 0),
            "source": source,
            "uses": 0,
            "created_at": now,
            "updated_at": now,
            "last_used_at": None,
        }
        with self._l.tx() as db:
            if limit is not None:
                count = db.execute("select count(*) from memories where owner = ?", [owner]).fetchone()[0]
                if count >= limit:
                    raise BadRequest(f"you already have {count} memories (the limit); delete some first")
            db.table("memories").insert(row)
        return public_memory(row)

    def update(self, owner: str, memory_id: str, fields: dict) -> dict:
        """Change text, category or pinned; NotFound for foreign ids."""
        self.get(owner, memory_id)
        with self._l.tx() as db:
            db.table("memories").update(memory_id, {**fields, "updated_at": time.time()})
        return self.get(owner, memory_id)

    def delete(self, owner: str, memory_id: str) -> None:
        """Delete a memory; NotFound for foreign ids."""
        with self._l.tx() as db:
            if db.execute("delete from memories where id = ? and owner = ?", [memory_id, owner]).rowcount == 0:
                raise NotFound("memory not found")

    # ------------------------------------------------------------------ search and recall
    def search(self, owner: str, query: str, limit: int = 20) -> List[dict]:
        """Full-text search (FTS5, BM25 order) over ``owner``'s memories; each row carries ``score``."""
        match = fts_query(query)
        if not match:
            return []
        with self._l.read() as db:
            rows = select_rows(
                db,
                "select m.*, bm25(memories_fts) as rank from memories_fts"
                " join memories m on m.rowid = memories_fts.rowid"
                " where memories_fts match ? and m.owner = ? order by rank limit ?",
                [match, owner, limit],
            )
        return [{**public_memory(row), "score": round(-row["rank"], 6)} for row in rows]

    def recall(
        self,
        owner: str,
        message: str,
        limit: int,
        min_score: float,
        half_life_days: float = 30.0,
        now: Optional[float] = None,
    ) -> List[dict]:
        """Unpinned memories relevant to ``message``, best first, each with ``score``.

        FTS5 finds the candidates (any shared stemmed word, BM25 order); each is scored by word
        overlap with the message (|shared| / sqrt(|message words| * |memory words|), 0..1), which
        must reach ``min_score``; the order then also weighs recency (last use, else creation):
        ``overlap * (0.75 + 0.25 * 2 ** (-age / half_life))``.
        """
        now = time.time() if now is None else now
        asked = set(words(message))
        if not asked or limit <= 0:
            return []
        scored = []
        for row in self.search(owner, message, limit=50):
            if row["pinned"]:
                continue
            mine = set(words(row["text"] + " " + (row["category"] or "")))
            if not mine:
                continue
            overlap = len(asked & mine) / math.sqrt(len(asked) * len(mine))
            if overlap < min_score:
                continue
            age_days = max(0.0, now - (row["last_used_at"] or row["created_at"])) / 86400
            recency = 0.75 + 0.25 * 2 ** (-age_days / max(half_life_days, 0.001))
            scored.append((overlap * recency, row["score"], row))
        scored.sort(key=lambda item: (item[0], item[1]), reverse=True)
        return [{**row, "score": round(score, 4)} for score, _, row in scored[:limit]]

    def pinned(self, owner: str, limit: int) -> List[dict]:
        """``owner``'s pinned memories, oldest first (stable order in the prompt)."""
        with self._l.read() as db:
            rows = select_rows(
                db,
                "select * from memories where owner = ? and pinned = 1 order by created_at, rowid limit ?",
                [owner, limit],
            )
            return [public_memory(r) for r in rows]

    def mark_used(self, owner: str, ids: List[str]) -> None:
        """Count one use of each memory and stamp its last use."""
        if not ids:
            return
        marks = ",".join("?" for _ in ids)
        with self._l.tx() as db:
            db.execute(
                f"update memories set uses = coalesce(uses, 0) + 1, last_used_at = ? "
                f"where owner = ? and id in ({marks})",
                [time.time(), owner, *ids],
            )

    # ------------------------------------------------------------------ switches
    def settings(self, owner: str) -> dict:
        """``{"enabled": bool, "auto_extract": bool}`` for ``owner`` (memory on, extraction off by default)."""
        with self._l.read() as db:
            row = db.execute("select enabled, auto_extract from memory_settings where owner = ?", [owner]).fetchone()
        if row is None:
            return {"enabled": True, "auto_extract": False}
        return {"enabled": bool(row[0]), "auto_extract": bool(row[1])}

    def turn_state(self, owner: str) -> Tuple[bool, bool]:
        """``(enabled, has any memory)`` for ``owner`` in one statement (a turn with nothing to recall stops here)."""
        with self._l.read() as db:
            row = db.execute(
                "select coalesce((select enabled from memory_settings where owner = ?1), 1),"
                " exists(select 1 from memories where owner = ?1)",
                [owner],
            ).fetchone()
        return bool(row[0]), bool(row[1])

    def set_settings(self, owner: str, changes: dict) -> dict:
        """Change ``enabled`` and/or ``auto_extract``; returns the new settings."""
        merged = {**self.settings(owner), **changes}
        with self._l.tx() as db:
            db.table("memory_settings").upsert(
                {
                    "owner": owner,
                    "enabled": int(merged["enabled"]),
                    "auto_extract": int(merged["auto_extract"]),
                    "updated_at": time.time(),
                },
                pk="owner",
            )
        return merged
