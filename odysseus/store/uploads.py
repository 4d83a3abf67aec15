"""Uploaded files, their text chunks and the FTS5 (BM25) index over them. Every query filters by owner.

The bytes live on disk under ``DATA_DIR/uploads/<id>`` (``odysseus.context.files``); this
repository keeps the records. ``index_status`` tells where the background indexer is:
``pending`` -> ``indexing`` -> ``indexed`` (or ``failed`` with ``index_error``); images are ``none``.
"""

from __future__ import annotations

import time
from typing import Iterable, List, Optional, Sequence, Tuple

from ..errors import NotFound
from .database import Locked

#: the fields a client sees
PUBLIC = (
    "id",
    "name",
    "mime",
    "size",
    "sha256",
    "uploaded_at",
    "width",
    "height",
    "index_status",
    "chunk_count",
    "text_status",
)


def public_upload(row: dict, is_duplicate: Optional[bool] = None) -> dict:
    """The record as the API answers it (``width``/``height`` only for images)."""
    out = {key: row.get(key) for key in PUBLIC if not (key in ("width", "height") and row.get(key) is None)}
    if row.get("index_error"):
        out["index_error"] = row["index_error"]
    if row.get("text_note"):
        out["text_note"] = row["text_note"]
    if is_duplicate is not None:
        out["is_duplicate"] = is_duplicate
    return out


class UploadRepo:
    """Upload records, chunks and search."""

    def __init__(self, locked: Locked):
        self._l = locked

    # ------------------------------------------------------------ records
    def add(self, row: dict) -> dict:
        """Insert a new upload record."""
        row = dict(row, uploaded_at=row.get("uploaded_at") or time.time())
        with self._l.tx() as db:
            db.table("uploads").insert(row)
        return row

    def set_text(self, upload_id: str, status: str, note: Optional[str]) -> None:
        """Record how the upload's text extraction went (``context/extract.py``)."""
        with self._l.tx() as db:
            db.execute("update uploads set text_status = ?, text_note = ? where id = ?", [status, note, upload_id])

    def by_hash(self, owner: str, sha256: str) -> Optional[dict]:
        """The owner's existing upload with these bytes, or None."""
        with self._l.read() as db:
            rows = list(
                db["uploads"].rows_where("owner = ? and sha256 = ?", [owner, sha256], order_by="uploaded_at", limit=1)
            )
        return rows[0] if rows else None

    def get(self, owner: str, upload_id: str) -> dict:
        """The owner's upload, or NotFound (also for another owner's id)."""
        with self._l.read() as db:
            rows = list(db["uploads"].rows_where("id = ? and owner = ?", [upload_id, owner], limit=1))
        if not rows:
            raise NotFound("upload not found")
        return rows[0]

    def many(self, owner: str, ids: Sequence[str]) -> List[dict]:
        """The owner's uploads with these ids, in the given order; NotFound when any is missing."""
        return [self.get(owner, upload_id) for upload_id in ids]

    def list(self, owner: str, limit: int = 100, offset: int = 0) -> List[dict]:
        """The owner's uploads, newest first."""
        with self._l.read() as db:
            return list(
                db["uploads"].rows_where("owner = ?", [owner], order_by="uploaded_at desc", limit=limit, offset=offset)
            )

    def used_bytes(self, owner: str) -> int:
        """Bytes the owner's uploads take (the quota counts these)."""
        with self._l.read() as db:
            return int(db.execute("select coalesce(sum(size), 0) from uploads where owner = ?", [owner]).fetchone()[0])

    def delete(self, owner: str, upload_id: str) -> dict:
        """Delete the owner's upload with its chunks; returns the deleted record."""
        row = self.get(owner, upload_id)
        with self._l.tx() as db:
            self._drop_chunks(db, upload_id)
            db.execute("delete from uploads where id = ? and owner = ?", [upload_id, owner])
        return row

    # ------------------------------------------------------------ indexing
    def set_status(self, upload_id: str, status: str, error: Optional[str] = None) -> None:
        """Record the indexer's progress on one upload."""
        with self._l.tx() as db:
            db.execute("update uploads set index_status = ?, index_error = ? where id = ?", [status, error, upload_id])

    def unfinished(self) -> List[str]:
        """Ids the indexer still has to do (after a restart too), oldest first."""
        with self._l.read() as db:
            return [
                r[0]
                for r in db.execute(
                    "select id from uploads where index_status in ('pending', 'indexing') order by uploaded_at"
                ).fetchall()
            ]

    def record(self, upload_id: str) -> Optional[dict]:
        """Any owner's upload by id (the indexer's view; never for answering a client)."""
        with self._l.read() as db:
            rows = list(db["uploads"].rows_where("id = ?", [upload_id], limit=1))
        return rows[0] if rows else None

    def replace_chunks(
        self, upload_id: str, owner: str, texts: List[str], vectors: Optional[List[Optional[bytes]]] = None
    ) -> bool:
        """Store the upload's chunks (replacing earlier ones) and mark it indexed; False if it was deleted."""
        with self._l.tx() as db:
            if not db.execute("select 1 from uploads where id = ?", [upload_id]).fetchone():
                return False
            self._drop_chunks(db, upload_id)
            for number, text in enumerate(texts):
                vector = vectors[number] if vectors else None
                cursor = db.execute(
                    "insert into upload_chunks (upload_id, owner, chunk, text, vector) values (?, ?, ?, ?, ?)",
                    [upload_id, owner, number, text, vector],
                )
                db.execute("insert into upload_chunks_fts (rowid, text) values (?, ?)", [cursor.lastrowid, text])
            db.execute(
                "update uploads set index_status = 'indexed', index_error = null, chunk_count = ?,"
                " indexed_at = ? where id = ?",
                [len(texts), time.time(), upload_id],
            )
        return True

    @staticmethod
    def _drop_chunks(db, upload_id: str) -> None:
        db.execute(
            "delete from upload_chunks_fts where rowid in (select id from upload_chunks where upload_id = ?)",
            [upload_id],
        )
        db.execute("delete from upload_chunks where upload_id = ?", [upload_id])

    # ------------------------------------------------------------ search
    def has_indexed(self, owner: str) -> bool:
        """Whether the owner has any indexed chunk (retrieval defaults on then)."""
        with self._l.read() as db:
            return db.execute("select 1 from upload_chunks where owner = ? limit 1", [owner]).fetchone() is not None

    def search(self, owner: str, match: str, limit: int) -> List[dict]:
        """The owner's chunks matching the FTS5 query ``match``, best BM25 first (``bm25`` > 0, higher is better)."""
        sql = (
            "select c.id, c.upload_id, c.chunk, c.text, u.name, -bm25(upload_chunks_fts) as bm25"
            " from upload_chunks_fts join upload_chunks c on c.id = upload_chunks_fts.rowid"
            " join uploads u on u.id = c.upload_id"
            " where upload_chunks_fts match ? and c.owner = ? order by bm25(upload_chunks_fts) limit ?"
        )
        with self._l.read() as db:
            cursor = db.execute(sql, [match, owner, limit])
            names = [d[0] for d in cursor.description]
            return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def matching(self, chunk_ids: List[int], match: str) -> List[int]:
        """Those of ``chunk_ids`` that match the FTS5 query ``match``."""
        if not chunk_ids:
            return []
        marks = ",".join("?" * len(chunk_ids))
        with self._l.read() as db:
            return [
                r[0]
                for r in db.execute(
                    f"select rowid from upload_chunks_fts where upload_chunks_fts match ? and rowid in ({marks})",
                    [match, *chunk_ids],
                ).fetchall()
            ]

    def vectors(self, owner: str) -> Iterable[Tuple[int, str, int, str, str, bytes]]:
        """(chunk id, upload id, chunk number, text, file name, vector) of the owner's embedded chunks."""
        with self._l.read() as db:
            return db.execute(
                "select c.id, c.upload_id, c.chunk, c.text, u.name, c.vector from upload_chunks c"
                " join uploads u on u.id = c.upload_id where c.owner = ? and c.vector is not null",
                [owner],
            ).fetchall()
