"""Accepting, storing and deleting uploaded files (no Flask here; ``routes/upload_routes.py`` speaks HTTP).

A request's files are all checked first (count, size, type by content, quota) and only then
stored, so a refused request stores nothing. Bytes go to ``DATA_DIR/uploads/<id>`` (the id is
unguessable; the client's name is only a display name). The same owner sending the same
bytes again gets the existing record with ``is_duplicate: true``. Uploads belong to the user,
not to a session: deleting a chat keeps them (they stay attachable and searchable);
``DELETE /api/upload/<id>`` removes the file and its chunks.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from dataclasses import dataclass
from typing import List, Optional, Tuple

from ..errors import BadRequest, PayloadTooLarge
from ..store import new_id
from ..store.uploads import public_upload
from .extract import CUT, EXTRACTED, NOT_EXTRACTED, Extracted, ExtractLimits, extract, text_path
from .files import Sniffed, offload, safe_name, sniff
from .indexer import Indexer

ID_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")


@dataclass
class Incoming:
    """One file of an upload request: the client's name and (at most limit + 1) bytes."""

    name: Optional[str]
    data: bytes


def valid_id(upload_id: str) -> bool:
    """Whether ``upload_id`` could be one of ours (so it is safe as a file name)."""
    return (
        isinstance(upload_id, str)
        and upload_id.startswith("up_")
        and 3 < len(upload_id) <= 64
        and set(upload_id[3:]) <= ID_CHARS
    )


def _inspect(data: bytes, name: str) -> Tuple[str, Sniffed]:
    return hashlib.sha256(data).hexdigest(), sniff(data, name)


class UploadService:
    """Limits, storage and the indexer for uploads."""

    def __init__(self, store, config: dict, indexer_factory=Indexer, embedder=None):
        self.store = store
        self.folder = os.path.join(config["DATA_DIR"], "uploads")
        self.max_bytes = int(config["UPLOAD_MAX_BYTES"])
        self.max_files = int(config["UPLOAD_MAX_FILES"])
        self.quota = int(config["UPLOAD_QUOTA_BYTES"])
        self.limits = ExtractLimits.from_config(config)
        self.indexer = indexer_factory(store, config, self.read_text, embedder)

    def path(self, upload_id: str) -> str:
        """Where an upload's bytes live."""
        if not valid_id(upload_id):
            raise ValueError("not an upload id")
        return os.path.join(self.folder, upload_id)

    def read_bytes(self, upload_id: str) -> bytes:
        """The stored bytes of an upload (the caller checked the owner)."""
        with open(self.path(upload_id), "rb") as fh:
            return fh.read()

    def read_text(self, row: dict) -> Extracted:
        """An upload's stored text (extracted at upload; a record from before is extracted now, once)."""
        status = row.get("text_status")
        if status in (EXTRACTED, CUT):
            try:
                with open(text_path(self.path(row["id"])), encoding="utf-8") as fh:
                    return Extracted(fh.read(), status, row.get("text_note"))
            except OSError:
                status = None  # the text file is gone: extract again
        if status == NOT_EXTRACTED:
            return Extracted("", NOT_EXTRACTED, row.get("text_note"))
        return self._extract(row["id"], row["kind"])

    def _extract(self, upload_id: str, kind: str) -> Extracted:
        """Extract once (a child process for PDFs), keep the text beside the bytes, record the outcome."""
        result = extract(kind, self.path(upload_id), self.limits)
        if result.status != NOT_EXTRACTED:
            tmp = text_path(os.path.join(self.folder, f".{upload_id}"))
            with open(tmp, "w", encoding="utf-8") as fh:
                fh.write(result.text)
            os.replace(tmp, text_path(self.path(upload_id)))
        self.store.uploads.set_text(upload_id, result.status, result.note)
        return result

    def accept(self, owner: str, files: List[Incoming]) -> List[dict]:
        """Check every file, then store the new ones; the public records in request order."""
        if not files:
            raise BadRequest("send one or more files in the multipart field 'files'")
        if len(files) > self.max_files:
            raise BadRequest(f"too many files: at most {self.max_files} per upload")
        checked = []
        for item in files:
            name = safe_name(item.name)
            if len(item.data) > self.max_bytes:
                raise PayloadTooLarge(f"{name}: larger than the limit of {self.max_bytes} bytes")
            sha, kind = offload(_inspect, item.data, name)
            checked.append((name, item.data, sha, kind))
        new_bytes, seen = 0, set()
        for _name, data, sha, _kind in checked:
            if sha not in seen and self.store.uploads.by_hash(owner, sha) is None:
                new_bytes += len(data)
            seen.add(sha)
        if new_bytes and self.store.uploads.used_bytes(owner) + new_bytes > self.quota:
            raise PayloadTooLarge(f"upload quota exceeded: {self.quota} bytes per user; delete older uploads")
        return [self._store_one(owner, *entry) for entry in checked]

    def _store_one(self, owner: str, name: str, data: bytes, sha: str, kind: Sniffed) -> dict:
        existing = self.store.uploads.by_hash(owner, sha)
        if existing is not None:
            return public_upload(existing, is_duplicate=True)
        upload_id = new_id("up_")
        os.makedirs(self.folder, exist_ok=True)
        tmp = os.path.join(self.folder, f".{upload_id}.tmp")
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, self.path(upload_id))
        indexable = kind.kind in ("text", "pdf")
        extracted = extract(kind.kind, self.path(upload_id), self.limits) if indexable else None
        if extracted is not None and extracted.status != NOT_EXTRACTED:
            with open(text_path(tmp), "w", encoding="utf-8") as fh:
                fh.write(extracted.text)
            os.replace(text_path(tmp), text_path(self.path(upload_id)))
        indexable = indexable and extracted is not None and extracted.status != NOT_EXTRACTED
        row = self.store.uploads.add(
            {
                "id": upload_id,
                "owner": owner,
                "name": name,
                "mime": kind.mime,
                "kind": kind.kind,
                "size": len(data),
                "sha256": sha,
                "width": kind.width,
                "height": kind.height,
                "index_status": "pending" if indexable else "none",
                "chunk_count": 0,
                "text_status": extracted.status if extracted is not None else None,
                "text_note": extracted.note if extracted is not None else None,
            }
        )
        if indexable:
            self.indexer.submit(upload_id, owner)
        return public_upload(row, is_duplicate=False)

    def delete(self, owner: str, upload_id: str) -> dict:
        """Delete the owner's upload: record, chunks and file (NotFound for others' ids)."""
        row = self.store.uploads.delete(owner, upload_id)
        with contextlib.suppress(OSError, ValueError):
            os.remove(self.path(upload_id))
        with contextlib.suppress(OSError, ValueError):
            os.remove(text_path(self.path(upload_id)))
        return row
