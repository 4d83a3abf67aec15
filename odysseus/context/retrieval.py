"""The ``retrieval`` context source (RAG over the user's uploaded text and PDF files).

Scoring, 0..1, so one threshold (``RAG_MIN_SCORE``) means the same for any corpus size:

- lexical: FTS5 finds chunks holding any query word (stopwords dropped, porter stemming) ranked by
  BM25; a chunk's lexical score is ``coverage * (0.5 + 0.5 * bm25 / best_bm25)``, where coverage is
  the share of the query's words the chunk contains. (Raw BM25 alone cannot be thresholded: in a
  one-file corpus every word's IDF is ~0.)
- with ``EMBEDDING_MODEL``: the query is embedded too, and a chunk's score is
  ``(1 - EMBEDDING_WEIGHT) * lexical + EMBEDDING_WEIGHT * max(0, cosine)``; chunks found only by
  their vectors compete as well.

The best ``RAG_TOP_K`` chunks at or above the threshold, at most ``RAG_MAX_CHARS`` of text, go into
the context as untrusted reference material; the turn announces them with ``rag_sources``
``[{filename, snippet, score, upload_id, chunk}]`` and the reply's metadata keeps them. ``use_rag``
(true/false) turns it on or off per turn; unset, it is on whenever the user has indexed chunks.
Files attached to the same turn are left out (they are inlined whole already).
"""

from __future__ import annotations

import logging
from typing import Any, Dict, List, Optional

from ..events import RAG_SOURCES, Event
from . import ContextRequest, Injection, untrusted_block
from .chunking import fts_query, query_terms
from .embeddings import Embedder, dot, pack, unpack
from .files import offload

log = logging.getLogger(__name__)
CANDIDATES = 50
SNIPPET = 240


def snippet(text: str) -> str:
    """The start of a chunk, on one line."""
    flat = " ".join(text.split())
    return flat if len(flat) <= SNIPPET else flat[: SNIPPET - 1].rstrip() + "…"


class Retriever:
    """Searches one owner's chunks (see module doc for the scores)."""

    def __init__(self, store, config: dict, embedder: Optional[Embedder] = None):
        self.store, self.embedder = store, embedder
        self.top_k = int(config["RAG_TOP_K"])
        self.min_score = float(config["RAG_MIN_SCORE"])
        self.weight = min(1.0, max(0.0, float(config["EMBEDDING_WEIGHT"])))

    def search(self, owner: str, query: str, exclude: tuple = ()) -> List[dict]:
        """The best chunks for ``query``: dicts with id, upload_id, chunk, text, name, score; best first."""
        terms = query_terms(query)
        hits: Dict[int, dict] = {}
        if terms:
            rows = self.store.uploads.search(owner, fts_query(terms), CANDIDATES)
            best = max((r["bm25"] for r in rows), default=0.0)
            found = {row["id"]: 0 for row in rows}
            for term in terms:  # coverage: which candidates hold each word (FTS5 stems as it indexed)
                for chunk_id in self.store.uploads.matching(list(found), fts_query([term])):
                    found[chunk_id] += 1
            for row in rows:
                rank = row["bm25"] / best if best > 0 else 1.0
                row["lexical"] = found[row["id"]] / len(terms) * (0.5 + 0.5 * rank)
                hits[row["id"]] = row
        if self.embedder is not None:
            self._blend(owner, query, hits)
        for row in hits.values():
            row.setdefault("score", row.get("lexical", 0.0))
        ranked = sorted((h for h in hits.values() if h["upload_id"] not in exclude), key=lambda h: -h["score"])
        return [h for h in ranked if h["score"] >= self.min_score][: self.top_k]

    def _blend(self, owner: str, query: str, hits: Dict[int, dict]) -> None:
        rows = list(self.store.uploads.vectors(owner))
        if not rows or self.embedder is None:
            return
        try:
            target = unpack(pack(self.embedder.embed([query])[0]))
        except Exception as exc:  # noqa: BLE001 - the lexical scores still stand
            log.warning("query embedding failed, retrieval uses FTS only: %s", exc)
            return
        sims = offload(lambda: [(row, dot(target, unpack(row[5]))) for row in rows])
        for (chunk_id, upload_id, number, text, name, _blob), cosine in sims:
            hit = hits.get(chunk_id)
            if hit is None:
                hit = hits[chunk_id] = {
                    "id": chunk_id,
                    "upload_id": upload_id,
                    "chunk": number,
                    "text": text,
                    "name": name,
                    "lexical": 0.0,
                }
            hit["cosine"] = max(0.0, cosine)
            hit["score"] = (1 - self.weight) * hit["lexical"] + self.weight * hit["cosine"]


class RetrievalSource:
    """Adds the best chunks of the user's files to the turn (see module doc)."""

    name = "retrieval"

    def __init__(self, retriever: Retriever, config: dict):
        self.retriever, self.store = retriever, retriever.store
        self.max_chars = int(config["RAG_MAX_CHARS"])

    def check(self, request: ContextRequest) -> Dict[str, Any]:
        """Nothing to check (``use_rag`` is parsed with the request); nothing for the user's message."""
        return {}

    def gather(self, request: ContextRequest) -> List[Injection]:
        """The retrieved chunks with their ``rag_sources`` event (nothing when none pass the threshold)."""
        flag = request.options.use_rag
        if flag is False or not (request.message or "").strip():
            return []
        if flag is None and not self.store.uploads.has_indexed(request.owner):
            return []
        exclude = request.options.attachments
        hits = self.retriever.search(request.owner, request.message, exclude)
        chosen: List[tuple] = []
        used = 0
        for hit in hits:
            if used + len(hit["text"]) > self.max_chars and chosen:
                break
            text = hit["text"][: self.max_chars - used]
            chosen.append((hit, text))
            used += len(text)
        if not chosen:
            return []
        sources = [
            {
                "filename": hit["name"],
                "snippet": snippet(hit["text"]),
                "score": round(hit["score"], 4),
                "upload_id": hit["upload_id"],
                "chunk": hit["chunk"],
            }
            for hit, _ in chosen
        ]
        body = "\n\n".join(
            f"[{n}] {hit['name']} (part {hit['chunk'] + 1})\n{text}" for n, (hit, text) in enumerate(chosen, 1)
        )
        return [
            Injection(
                self.name,
                event=Event(RAG_SOURCES, {"data": sources}),
                text=untrusted_block("retrieval from the user's files", body),
                score=max(s["score"] for s in sources),
                metadata={"rag_sources": sources},
            )
        ]
