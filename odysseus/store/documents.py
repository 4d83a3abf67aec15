"""Editor documents and their versions; every query filters by owner.

A document row holds the current content and ``version_count``; ``document_versions``
keeps every version's full content, numbered from 1, with its source (``ai`` or
``user``) and a short summary. Within a session one document is *active*: the one the
assistant created or wrote last (``active`` = 1), which the model edits by default.
"""

from __future__ import annotations

import time
from typing import List, Optional, Tuple

from ..errors import NotFound
from .database import Locked
from .sessions import new_id

SUMMARY_COLUMNS = "id, owner, session_id, title, language, version_count, active, created_at, updated_at"


class DocumentRepo:
    """CRUD for documents and versions."""

    def __init__(self, locked: Locked):
        self._l = locked

    def create(
        self,
        owner: str,
        session_id: Optional[str],
        title: str,
        language: str,
        content: str,
        *,
        source: str,
        summary: str = "Created",
    ) -> dict:
        """Create a document with its version 1; in a session it becomes the active document."""
        now = time.time()
        row = {
            "id": new_id("doc_"),
            "owner": owner,
            "session_id": session_id,
            "title": title,
            "language": language,
            "content": content,
            "version_count": 1,
            "active": 1 if session_id else 0,
            "created_at": now,
            "updated_at": now,
        }
        with self._l.tx() as db:
            if session_id:
                db.execute("update documents set active = 0 where owner = ? and session_id = ?", [owner, session_id])
            db.table("documents").insert(row)
            db.table("document_versions").insert(
                {
                    "document_id": row["id"],
                    "version": 1,
                    "content": content,
                    "summary": summary,
                    "source": source,
                    "created_at": now,
                }
            )
        return row

    def get(self, owner: str, doc_id: str) -> dict:
        """The owner's document with its content, or NotFound."""
        with self._l.read() as db:
            rows = list(db["documents"].rows_where("id = ? and owner = ?", [doc_id, owner], limit=1))
        if not rows:
            raise NotFound("document not found")
        return rows[0]

    def list_for_session(self, owner: str, session_id: str) -> List[dict]:
        """The session's documents (no content, with ``size``), most recently updated first."""
        with self._l.read() as db:
            cursor = db.execute(
                f"select {SUMMARY_COLUMNS}, length(cast(content as blob)) as size from documents "
                "where owner = ? and session_id = ? order by updated_at desc",
                [owner, session_id],
            )
            names = [c[0] for c in cursor.description]
            return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def active_for_session(self, owner: str, session_id: Optional[str]) -> Optional[dict]:
        """The session's active document (the newest one marked active), or None."""
        if not session_id:
            return None
        with self._l.read() as db:
            rows = list(
                db["documents"].rows_where(
                    "owner = ? and session_id = ? and active = 1",
                    [owner, session_id],
                    order_by="updated_at desc",
                    limit=1,
                )
            )
        return rows[0] if rows else None

    def write(
        self,
        owner: str,
        doc_id: str,
        content: str,
        *,
        source: str,
        summary: str,
        fold_seconds: float = 0.0,
        force: bool = False,
    ) -> Tuple[dict, bool]:
        """Store ``content`` as the document's next version; returns (document, whether anything changed).

        Unchanged content is a no-op unless ``force``. A ``user`` write within ``fold_seconds`` of the
        latest version, when that one is also the user's, replaces it instead of adding one.
        """
        now = time.time()
        with self._l.tx() as db:
            doc = self._owned(db, owner, doc_id)
            if content == doc["content"] and not force:
                return doc, False
            latest = db.execute(
                "select source, created_at from document_versions where document_id = ? and version = ?",
                [doc_id, doc["version_count"]],
            ).fetchone()
            fold = (
                source == "user"
                and not force
                and fold_seconds > 0
                and latest is not None
                and latest[0] == "user"
                and now - latest[1] < fold_seconds
            )
            if fold:
                db.execute(
                    "update document_versions set content = ?, summary = ? where document_id = ? and version = ?",
                    [content, summary, doc_id, doc["version_count"]],
                )
                version = doc["version_count"]
            else:
                version = doc["version_count"] + 1
                db.table("document_versions").insert(
                    {
                        "document_id": doc_id,
                        "version": version,
                        "content": content,
                        "summary": summary,
                        "source": source,
                        "created_at": now,
                    }
                )
            changes = {"content": content, "version_count": version, "updated_at": now}
            if source == "ai" and doc["session_id"]:
                db.execute(
                    "update documents set active = 0 where owner = ? and session_id = ? and id != ?",
                    [owner, doc["session_id"], doc_id],
                )
                changes["active"] = 1
            db.table("documents").update(doc_id, changes)
            doc.update(changes)
        return doc, True

    def patch(self, owner: str, doc_id: str, **fields) -> dict:
        """Change the title and/or language."""
        changes = {k: v for k, v in fields.items() if k in ("title", "language") and v is not None}
        with self._l.tx() as db:
            doc = self._owned(db, owner, doc_id)
            if changes:
                changes["updated_at"] = time.time()
                db.table("documents").update(doc_id, changes)
                doc.update(changes)
        return doc

    def delete(self, owner: str, doc_id: str) -> None:
        """Delete the document and its versions."""
        with self._l.tx() as db:
            self._owned(db, owner, doc_id)
            db.execute("delete from document_versions where document_id = ?", [doc_id])
            db.execute("delete from documents where id = ? and owner = ?", [doc_id, owner])

    def delete_session(self, owner: str, session_id: str) -> int:
        """Delete every document of a session (the session was deleted); returns how many."""
        with self._l.tx() as db:
            ids = [
                r[0]
                for r in db.execute(
                    "select id from documents where owner = ? and session_id = ?", [owner, session_id]
                ).fetchall()
            ]
            for doc_id in ids:
                db.execute("delete from document_versions where document_id = ?", [doc_id])
            db.execute("delete from documents where owner = ? and session_id = ?", [owner, session_id])
        return len(ids)

    def versions(self, owner: str, doc_id: str) -> List[dict]:
        """The document's versions, newest first, without content (with ``size``)."""
        with self._l.read() as db:
            self._owned(db, owner, doc_id)
            cursor = db.execute(
                "select version, summary, source, created_at, length(cast(content as blob)) as size "
                "from document_versions where document_id = ? order by version desc",
                [doc_id],
            )
            names = [c[0] for c in cursor.description]
            return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def version(self, owner: str, doc_id: str, number: int) -> dict:
        """One version with its content, or NotFound."""
        with self._l.read() as db:
            self._owned(db, owner, doc_id)
            rows = list(
                db["document_versions"].rows_where("document_id = ? and version = ?", [doc_id, number], limit=1)
            )
        if not rows:
            raise NotFound("version not found")
        return rows[0]

    @staticmethod
    def _owned(db, owner: str, doc_id: str) -> dict:
        rows = list(db["documents"].rows_where("id = ? and owner = ?", [doc_id, owner], limit=1))
        if not rows:
            raise NotFound("document not found")
        return rows[0]
