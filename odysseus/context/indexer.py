"""The background indexer: uploaded text and PDF files become chunks in the FTS5 index, off the request path.

One worker (a greenlet under gunicorn's gevent worker, a thread elsewhere) takes upload ids from
per-owner queues, one owner after another (round robin), so one user's fifty files never make
another user's one file wait for all fifty. It reads the text extracted at upload
(``context/extract.py``: the file is never parsed here), chunks it in the thread pool (``offload``),
fetches embeddings (when configured) over HTTP, and stores the chunks in one transaction. Progress
is the upload's ``index_status``: ``pending`` -> ``indexing`` -> ``indexed`` | ``failed``; a file
whose text could not be extracted is ``none``. Uploads left ``pending``/``indexing`` by a stopped
process are queued again at start-up. An embeddings failure keeps the FTS chunks (``indexed``, with
``index_error`` saying vectors are missing).
"""

from __future__ import annotations

import collections
import logging
import threading
from typing import Any, Callable, Deque, List, Optional

from .chunking import chunk_text
from .embeddings import Embedder, pack
from .extract import NOT_EXTRACTED, Extracted
from .files import offload

log = logging.getLogger(__name__)


class FairQueue:
    """Items queued per owner, taken one owner after another (each owner's own order kept)."""

    def __init__(self) -> None:
        self._queues: "collections.OrderedDict[str, Deque[str]]" = collections.OrderedDict()
        self._cond = threading.Condition()

    def put(self, owner: str, item: str) -> None:
        """Queue ``item`` for ``owner``."""
        with self._cond:
            self._queues.setdefault(owner, collections.deque()).append(item)
            self._cond.notify()

    def get(self, timeout: float) -> Optional[str]:
        """The next item, from the owner whose turn it is; None after ``timeout`` with nothing queued."""
        with self._cond:
            if not self._queues and not self._cond.wait_for(lambda: bool(self._queues), timeout):
                return None
            owner, items = next(iter(self._queues.items()))
            item = items.popleft()
            del self._queues[owner]
            if items:  # the owner goes to the back of the line
                self._queues[owner] = items
            return item

    def empty(self) -> bool:
        """Whether nothing is queued."""
        with self._cond:
            return not self._queues


class Indexer:
    """Queues of uploads to index and the worker that indexes them."""

    def __init__(
        self, store: Any, config: dict, read_text: Callable[[dict], Extracted], embedder: Optional[Embedder] = None
    ):
        self.store, self.read_text, self.embedder = store, read_text, embedder
        self.size = int(config.get("RAG_CHUNK_CHARS", 1000))
        self.overlap = int(config.get("RAG_CHUNK_OVERLAP", 150))
        self.max_chars = int(config.get("RAG_INDEX_MAX_CHARS", 2_000_000))
        self.queue = FairQueue()
        self.idle = threading.Event()
        self.idle.set()
        self._worker: Optional[threading.Thread] = None
        self._lock = threading.Lock()

    def submit(self, upload_id: str, owner: Optional[str] = None) -> None:
        """Index ``upload_id`` soon (its status is already ``pending``)."""
        if owner is None:
            row = self.store.uploads.record(upload_id)
            owner = row["owner"] if row else ""
        self.idle.clear()
        self.queue.put(owner or "", upload_id)
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
            upload_id = self.queue.get(timeout=2.0)
            if upload_id is None:
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
        extracted = self.read_text(row)
        if extracted.status == NOT_EXTRACTED:
            self.store.uploads.set_status(upload_id, "none", f"text not extracted: {extracted.note}"[:300])
            return
        chunks: List[str] = offload(self._chunks, extracted.text)
        vectors, error = None, None
        if self.embedder is not None and chunks:
            try:
                vectors = [pack(v) for v in self.embedder.embed(chunks)]
            except Exception as exc:  # noqa: BLE001 - FTS still works without vectors
                log.warning("embeddings for %s failed: %s", upload_id, exc)
                error = f"indexed without embeddings: {exc}"[:300]
        if self.store.uploads.replace_chunks(upload_id, row["owner"], chunks, vectors) and error:
            self.store.uploads.set_status(upload_id, "indexed", error)

    def _chunks(self, text: str) -> List[str]:
        return chunk_text(text[: self.max_chars], self.size, self.overlap)


__all__: List[str] = ["FairQueue", "Indexer"]
