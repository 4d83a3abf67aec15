"""How big a model's context window is, and how much of it a turn may fill.

The window of a (provider, model) pair comes from, in order:

1. configuration: ``context_length`` on the provider's model entry
   (``models = [{name = "qwen2.5", context_length = 32768}]``), or on the provider table itself
   (a number for all its models, or a table ``{model = number}``);
2. the provider's own report, asked once and cached for ``CONTEXT_WINDOW_CACHE_SECONDS``:
   Ollama ``POST /api/show`` (``model_info["<arch>.context_length"]``, or ``num_ctx`` in its
   parameters), an OpenAI-compatible ``/v1/models`` listing that carries it (``context_length``,
   ``max_model_len`` of vLLM, ``context_window``), for a local OpenAI-compatible server llama.cpp's
   ``/props`` (``default_generation_settings.n_ctx``: the context each slot was started with), and
   only then a listing's ``meta.n_ctx_train`` (the length the model was *trained* with: a server
   started with a smaller ``--ctx-size`` refuses prompts past its own, so the served one wins);
3. ``DEFAULT_CONTEXT_WINDOW`` (8192) for local providers (Ollama, loopback/private hosts, the demo
   model) or ``DEFAULT_CONTEXT_WINDOW_HOSTED`` (128000) for hosted ones.

A failed or slow report counts as "not reported" (and is cached too, so a down server is not
asked on every turn).

A local llama.cpp server can also count a prompt exactly (``prompt_tokens``: ``/apply-template``
renders the messages with the model's own template, ``/tokenize`` counts them); a turn whose
estimate comes near its window asks it before sending (``turn_window.TurnWindow.counted``). A
server that cannot (no such endpoints) is remembered as such for ``CONTEXT_WINDOW_CACHE_SECONDS``.

The reply reserve is the request's ``max_tokens`` when given, else
``REPLY_RESERVE_TOKENS``, but never more than a quarter of the window.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Dict, Optional, Tuple
from urllib.parse import urlsplit

from ..research.limits import is_local

log = logging.getLogger(__name__)

#: keys under which OpenAI-compatible servers list a model's window in /v1/models
LISTING_KEYS = ("context_length", "max_model_len", "context_window", "max_context_length", "n_ctx")


def _positive(value: Any) -> Optional[int]:
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return number if 0 < number < 100_000_000 else None


def configured_length(provider: Any, model: str) -> Optional[int]:
    """The window configuration gives for ``model`` of ``provider`` (None when it gives none)."""
    options = getattr(getattr(provider, "config", None), "options", None) or {}
    per_model = options.get("model_context_length") or {}
    if isinstance(per_model, dict) and _positive(per_model.get(model)):
        return _positive(per_model.get(model))
    value = options.get("context_length")
    if isinstance(value, dict):
        return _positive(value.get(model))
    return _positive(value)


def is_local_provider(provider: Any) -> bool:
    """Local providers get the small default window."""
    return getattr(provider, "kind", "") == "demo" or is_local(provider)


def _get(provider: Any, url: str, timeout: float, body: Optional[dict] = None) -> Any:
    """The provider's JSON at ``url`` (POSTed ``body`` when given), through its own transport."""
    return provider.transport.fetch_json(url, body, timeout)


def ollama_length(provider: Any, model: str, timeout: float) -> Optional[int]:
    """Ollama's /api/show: num_ctx in the parameters (what the server will use), else the model's trained length."""
    doc = _get(provider, provider.base_url + "/api/show", timeout, {"model": model}) or {}
    for line in str(doc.get("parameters") or "").splitlines():
        name, _, value = line.strip().partition(" ")
        if name == "num_ctx" and _positive(value.strip()):
            return _positive(value.strip())
    info = doc.get("model_info") or {}
    for key, value in info.items():
        if key.endswith(".context_length") and _positive(value):
            return _positive(value)
    return None


def listing_length(provider: Any, model: str, timeout: float) -> Tuple[Optional[int], Optional[int]]:
    """An OpenAI-compatible /v1/models entry for ``model``: (the served window it states, its training length)."""
    doc = _get(provider, provider.root + "/models", timeout)
    items = doc.get("data", []) if isinstance(doc, dict) else doc
    served: Optional[int] = None
    trained: Optional[int] = None
    for item in items or []:
        if not isinstance(item, dict) or item.get("id") != model:
            continue
        for holder in (item, item.get("meta") or {}, item.get("top_provider") or {}):
            for key in LISTING_KEYS:
                served = served or _positive(holder.get(key))
            trained = trained or _positive(holder.get("n_ctx_train"))
    return served, trained


def llamacpp_length(provider: Any, timeout: float) -> Optional[int]:
    """llama.cpp's /props at the server root: the n_ctx it was started with."""
    parts = urlsplit(provider.root)
    doc = _get(provider, f"{parts.scheme}://{parts.netloc}/props", timeout) or {}
    settings = doc.get("default_generation_settings") or {}
    return _positive(settings.get("n_ctx")) or _positive(doc.get("n_ctx"))


def llamacpp_prompt_tokens(provider: Any, messages: list, timeout: float) -> Optional[int]:
    """llama.cpp's own count of ``messages``: rendered by ``/apply-template``, counted by ``/tokenize``."""
    parts = urlsplit(provider.root)
    root = f"{parts.scheme}://{parts.netloc}"
    rendered = _get(provider, root + "/apply-template", timeout, {"messages": messages}) or {}
    prompt = rendered.get("prompt") if isinstance(rendered, dict) else None
    if not isinstance(prompt, str):
        return None
    counted = _get(provider, root + "/tokenize", timeout, {"content": prompt, "add_special": True}) or {}
    tokens = counted.get("tokens") if isinstance(counted, dict) else None
    return len(tokens) if isinstance(tokens, list) else None


def reported_length(provider: Any, model: str, timeout: float) -> Optional[int]:
    """What the provider says the window is, or None (never raises)."""
    kind = getattr(provider, "kind", "")
    try:
        if kind == "ollama":
            return ollama_length(provider, model, timeout)
        if hasattr(provider, "root") and hasattr(provider, "transport") and kind != "anthropic":
            found, trained = listing_length(provider, model, timeout)
            if found is None and is_local(provider):
                try:
                    found = llamacpp_length(provider, timeout)  # the served context, before the trained one
                except Exception:  # noqa: BLE001 - not llama.cpp
                    found = None
            return found or trained
    except Exception as exc:  # noqa: BLE001 - a report is optional; the default applies
        log.info("context window of %s/%s not reported: %s", getattr(provider, "name", "?"), model, exc)
    return None


def _address(provider: Any) -> str:
    """Where a provider's requests go (its kind and base URL), for keys that must not outlive an edit."""
    config = getattr(provider, "config", None)
    return f"{getattr(config, 'kind', '')} {getattr(config, 'base_url', '') or getattr(provider, 'root', '')}"


class WindowBook:
    """The app's windows per (provider, model): configured, reported (cached) or default."""

    def __init__(self, config: dict):
        self.config = config
        self.ttl = float(config.get("CONTEXT_WINDOW_CACHE_SECONDS", 600.0))
        self.timeout = float(config.get("CONTEXT_WINDOW_PROBE_TIMEOUT", 5.0))
        self._cache: Dict[Tuple[str, str, str], Tuple[Optional[int], float]] = {}
        self._cannot_count: Dict[Tuple[str, str], float] = {}  # providers without /tokenize, until when
        self._lock = threading.Lock()

    def length(self, candidate: Any) -> Tuple[int, str]:
        """``(window, source)`` for a route candidate; source is "config", "provider" or "default"."""
        provider, model = candidate.provider, candidate.model
        configured = configured_length(provider, model)
        if configured:
            return configured, "config"
        # the provider's address is part of the key: an admin edit that points a connection at another
        # server (same name) must not keep the old server's window for up to the cache's lifetime
        key = (getattr(provider, "name", ""), _address(provider), model)
        now = time.monotonic()
        with self._lock:
            cached = self._cache.get(key)
        if cached is None or cached[1] < now:
            found = reported_length(provider, model, self.timeout)
            with self._lock:
                self._cache[key] = (found, now + self.ttl)
            cached = (found, 0.0)
        if cached[0]:
            return cached[0], "provider"
        if is_local_provider(provider):
            return int(self.config.get("DEFAULT_CONTEXT_WINDOW", 8192)), "default"
        return int(self.config.get("DEFAULT_CONTEXT_WINDOW_HOSTED", 128_000)), "default"

    def prompt_tokens(self, candidate: Any, messages: list) -> Optional[int]:
        """The provider's exact count of ``messages`` (a local llama.cpp server), or None when it
        cannot count them (another kind of server, content that is not plain text, an error)."""
        provider = candidate.provider
        if not (hasattr(provider, "root") and hasattr(provider, "transport")) or not is_local(provider):
            return None
        if getattr(provider, "kind", "") in ("ollama", "anthropic", "demo"):
            return None
        if any(not isinstance(m.get("content"), (str, type(None))) for m in messages):
            return None  # images and other parts: the template's rendering of them is the server's own
        key = (getattr(provider, "name", ""), _address(provider))
        now = time.monotonic()
        with self._lock:
            if self._cannot_count.get(key, 0.0) > now:
                return None
        try:
            counted = llamacpp_prompt_tokens(provider, messages, self.timeout)
        except Exception as exc:  # noqa: BLE001 - counting is optional; the estimate applies
            log.info("%s cannot count a prompt: %s", getattr(provider, "name", "?"), exc)
            counted = None
        if counted is None:
            with self._lock:
                self._cannot_count[key] = now + self.ttl
        return counted

    def reserve(self, window: int, max_tokens: Optional[int] = None) -> int:
        """Tokens kept free for the reply: ``max_tokens`` or REPLY_RESERVE_TOKENS, at most a quarter of the window."""
        wanted = max_tokens if max_tokens and max_tokens > 0 else int(self.config.get("REPLY_RESERVE_TOKENS", 1024))
        return max(0, min(int(wanted), window // 4))
