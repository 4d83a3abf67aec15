"""The background indexer: uploaded text and PDF files become chunks in the FTS5 index, off the request path.

One worker (a greenlet under gunicorn's gevent worker, a thread elsewhere) takes upload ids
from a queue; parsing and chunking run in the thread pool (``offload``), embeddings (when
configured) are fetched over HTTP, and the chunks are stored in one transaction. Progress is
the upload's ``index_status``: ``pending`` -> ``indexing`` -> ``indexed`` | ``failed``. Uploads
left ``pending``/``indexing`` by a stopped process are queued again at start-up. An embeddings
failure keeps the FTS chunks (``indexed``, with ``index_error`` saying vectors are missing).
"""

from __future__ import annotations

import logging
import queue
import threading
from typing import Callable, List, Optional

from .chunking import chunk_text
from .embeddings import Embedder, pack
from .files import file_text, offload

log = logging.getLogger(__name__)


class Indexer:
    """Queue of uploads to index and the worker that indexes them."""

    def __init__(self, store, config: dict, read_bytes: Callable[[str], bytes], embedder: Optional[Embedder] = None):
        self.store, self.read_bytes, self.embedder = store, read_bytes, embedder
        self.size = int(config.get("RAG_CHUNK_CHARS", 1000))
        self.overlap = int(config.get("RAG_CHUNK_OVERLAP", 150))
        self.max_chars = int(config.get("RAG_INDEX_MAX_CHARS", 2_000_000))
        self.queue: "queue.Queue[str]" = queue.Queue()
        self.idle = threading.Event()
        self.idle.set()
        self._worker: Optional[threading.Thread] = None
        self._lock = threading.Lock()

    def submit(self, upload_id: str) -> None:
        """Index ``upload_id`` soon (its status is already ``pending``)."""
        self.idle.clear()
        self.queue.put(upload_id)
        with self._lock:
            if self._worker is None or not self._worker.is_alive():
                self._worker = threading.Thread(target=self._run, name="odysseus-indexer", daemon=True)
                self._worker.start()

    def resume_unfinished(self) -> int:
        """Queue what an earlier process left unindexed; how many."""
        ids = self.store.uploads.unfinished()
        for upload_id in ids:
            self.submit(upload_id)
        return len(ids)

    def wait(self, timeout: float) -> bool:
        """Block until the queue is empty (tests, shutdown); False on timeout."""
        return self.idle.wait(timeout)

    def _run(self) -> None:
        while True:
            try:
                upload_id = self.queue.get(timeout=2.0)
            except queue.Empty:
                self.idle.set()
                if self.queue.empty():
                    return
                continue
            try:
                self.index(upload_id)
            except Exception as exc:  # noqa: BLE001 - one bad file never stops the worker
                log.exception("indexing %s failed", upload_id)
                self.store.uploads.set_status(upload_id, "failed", str(exc)[:300])
            finally:
                if self.queue.empty():
                    self.idle.set()

    def index(self, upload_id: str) -> None:
        """Index one upload now (the worker calls this; so can tests)."""
        row = self.store.uploads.record(upload_id)
        if row is None or row["kind"] not in ("text", "pdf"):
            return
        self.store.uploads.set_status(upload_id, "indexing")
        data = self.read_bytes(upload_id)
        chunks: List[str] = offload(self._chunks, row["kind"], data)
        vectors, error = None, None
        if self.embedder is not None and chunks:
            try:
                vectors = [pack(v) for v in self.embedder.embed(chunks)]
            except Exception as exc:  # noqa: BLE001 - FTS still works without vectors
                log.warning("embeddings for %s failed: %s", upload_id, exc)
                error = f"indexed without embeddings: {exc}"[:300]
        if self.store.uploads.replace_chunks(upload_id, row["owner"], chunks, vectors) and error:
            self.store.uploads.set_status(upload_id, "indexed", error)

    def _chunks(self, kind: str, data: bytes) -> List[str]:
        return chunk_text(file_text(kind, data)[: self.max_chars], self.size, self.overlap)
