"""Optional embeddings for retrieval: ``EMBEDDING_MODEL = "provider/model"`` names a configured provider.

OpenAI-compatible providers are asked at ``<api root>/embeddings`` (``{"model", "input": [...]}`` ->
``data[].embedding``), Ollama at ``/api/embed`` (-> ``embeddings``). Vectors are stored unit-length as
float32 bytes, so cosine similarity is a dot product.
"""

from __future__ import annotations

import math
from array import array
from typing import List, Optional, Sequence

import requests

from ..errors import OdysseusError
from ..llm.base import ProviderConfig
from ..llm.openai_compat import api_root


class EmbeddingError(OdysseusError):
    """The embeddings server failed or answered something unusable."""

    status = 502


def pack(vector: Sequence[float]) -> bytes:
    """A unit-length float32 blob of ``vector`` (a zero vector stays zero)."""
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return array("f", (v / norm for v in vector)).tobytes()


def unpack(blob: bytes) -> array:
    """The float32 vector stored in ``blob``."""
    out = array("f")
    out.frombytes(blob)
    return out


def dot(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity of two unit vectors (0 when their sizes differ: another model made one)."""
    if len(a) != len(b):
        return 0.0
    return sum(x * y for x, y in zip(a, b, strict=False))


class Embedder:
    """Turns texts into vectors with one configured provider's embeddings endpoint."""

    def __init__(self, provider: ProviderConfig, model: str, timeout: float = 30.0, batch: int = 32):
        self.provider, self.model, self.timeout, self.batch = provider, model, timeout, max(1, batch)
        if provider.kind == "ollama":
            self.url = (provider.base_url or "http://localhost:11434").rstrip("/") + "/api/embed"
        else:
            self.url = api_root(provider.base_url) + "/embeddings"
        self.headers = {"Content-Type": "application/json", **provider.options.get("headers", {})}
        if provider.api_key:
            if provider.kind == "anthropic":
                raise OdysseusError(
                    "EMBEDDING_MODEL: Anthropic serves no embeddings; name an OpenAI-compatible or Ollama provider"
                )
            self.headers["Authorization"] = f"Bearer {provider.api_key}"
        self.session = requests.Session()

    @property
    def name(self) -> str:
        """``provider/model``, as configured."""
        return f"{self.provider.name}/{self.model}"

    def embed(self, texts: List[str]) -> List[List[float]]:
        """One vector per text, in order; EmbeddingError on any failure."""
        out: List[List[float]] = []
        for start in range(0, len(texts), self.batch):
            out.extend(self._request(texts[start : start + self.batch]))
        return out

    def _request(self, texts: List[str]) -> List[List[float]]:
        try:
            response = self.session.post(
                self.url, json={"model": self.model, "input": texts}, headers=self.headers, timeout=self.timeout
            )
        except requests.RequestException as exc:
            raise EmbeddingError(f"embeddings server {self.provider.name} unreachable: {exc}") from exc
        if response.status_code >= 400:
            raise EmbeddingError(
                f"embeddings server {self.provider.name} answered {response.status_code}: {response.text[:200]}"
            )
        try:
            doc = response.json()
            if "embeddings" in doc:  # Ollama /api/embed
                vectors = doc["embeddings"]
            else:  # OpenAI: data[] with index
                vectors = [item["embedding"] for item in sorted(doc["data"], key=lambda d: d.get("index", 0))]
            vectors = [[float(v) for v in vector] for vector in vectors]
        except (ValueError, KeyError, TypeError) as exc:
            raise EmbeddingError(f"embeddings server {self.provider.name} sent an unusable answer") from exc
        if len(vectors) != len(texts) or any(not v for v in vectors):
            raise EmbeddingError(
                f"embeddings server {self.provider.name} sent {len(vectors)} vectors for {len(texts)} texts"
            )
        return vectors


def embedder_from_config(config: dict) -> Optional[Embedder]:
    """The configured embedder, or None when ``EMBEDDING_MODEL`` is empty."""
    spec = (config.get("EMBEDDING_MODEL") or "").strip()
    if not spec:
        return None
    providers: List[ProviderConfig] = list(config.get("PROVIDERS") or [])
    name, _, model = spec.partition("/")
    provider = next((p for p in providers if p.name == name), None)
    if provider is None:
        if len(providers) != 1:
            raise OdysseusError(f"EMBEDDING_MODEL {spec!r}: name it as provider/model of a configured provider")
        provider, model = providers[0], spec
    if not model:
        raise OdysseusError(f"EMBEDDING_MODEL {spec!r} names no model")
    return Embedder(
        provider, model, float(config.get("EMBEDDING_TIMEOUT", 30.0)), int(config.get("EMBEDDING_BATCH", 32))
    )
