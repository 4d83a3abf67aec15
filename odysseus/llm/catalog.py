"""The model list across providers, cached briefly; one unreachable provider never fails it."""

from __future__ import annotations

import threading
import time
from typing import Iterable, List, Optional

from .base import Provider


class ModelCatalog:
    """Lists every provider's models in parallel and keeps the answer ``ttl`` seconds."""

    def __init__(self, providers: Iterable[Provider], ttl: float = 30.0, wait: float = 15.0):
        self.providers = list(providers)
        self.ttl = ttl
        self.wait = wait  # a provider slower than this is reported as an error
        self._lock = threading.Lock()
        self._cached: Optional[dict] = None
        self._cached_at = 0.0

    def _list_one(self, provider: Provider, out: dict) -> None:
        try:
            out["models"] = list(provider.list_models())
        except Exception as exc:  # any failure of one provider is reported, not raised
            out["error"] = getattr(exc, "message", None) or str(exc) or exc.__class__.__name__
            out["status"] = getattr(exc, "status", None)

    def _collect(self) -> dict:
        results: List[dict] = [{} for _ in self.providers]
        threads = [
            threading.Thread(target=self._list_one, args=(p, r), daemon=True)
            for p, r in zip(self.providers, results, strict=True)
        ]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + self.wait
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        models, errors = [], []
        for provider, result in zip(self.providers, results, strict=True):
            for name in result.get("models", []):
                models.append(
                    {
                        "id": f"{provider.name}/{name}",
                        "provider": provider.name,
                        "model": name,
                        "kind": provider.kind,
                        "default": name == getattr(provider, "default_model", None),
                    }
                )
            if "models" not in result:
                errors.append(
                    {
                        "provider": provider.name,
                        "kind": provider.kind,
                        "error": result.get("error", "timed out listing models"),
                        "status": result.get("status"),
                    }
                )
        return {"models": models, "errors": errors}

    def list(self, refresh: bool = False) -> dict:
        """``{"models": [...], "errors": [...]}``, from cache when fresh."""
        with self._lock:
            now = time.monotonic()
            if refresh or self._cached is None or now - self._cached_at >= self.ttl:
                self._cached = self._collect()
                self._cached_at = time.monotonic()
            return self._cached
