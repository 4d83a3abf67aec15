"""Provider connections entered in the settings screen: validation, ProviderConfig, and "send one token".

``validate`` is strict because the values end up in HTTP requests the server sends: a
kind from ``KINDS`` (the TOML ``[[providers]]`` kind strings), an http(s) URL with a host
and no credentials in it, a name that is safe in a route id (``name/model``), and a key
of printable ASCII up to 4 KB. Anything else is a BadRequest and nothing is stored.
``probe`` sends one real request (``max_tokens`` 1) through the same adapter a turn would
use, with short timeouts; its answer never contains the key.
"""

from __future__ import annotations

import re
import time
from dataclasses import replace
from typing import Any, Dict, List, Optional
from urllib.parse import urlsplit

from ..cancel import CancelToken
from ..errors import BadRequest, ProviderError, ProviderHTTPError, ProviderTimeout, ProviderUnavailable
from ..events import DELTA, FINISH
from .base import ChatRequest, ProviderConfig
from .http_errors import redact
from .registry import build_provider

KINDS = ("openai", "ollama", "anthropic")
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
RESERVED_NAMES = {"demo"}  # the offline demo's name: never a connection's
MAX_KEY = 4096
MAX_URL = 2048
MAX_MODEL = 200
MAX_MODELS = 200
PROBE_TIMEOUT = 10.0  # seconds each step of "send one token" may take
_PRINTABLE = re.compile(r"[\x21-\x7e]+")  # keys: visible ASCII, nothing a header could be split by
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _text(data: dict, key: str, limit: int, what: str) -> Optional[str]:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadRequest(f"{what} must be a string")
    value = value.strip()
    if len(value) > limit:
        raise BadRequest(f"{what} is longer than {limit} characters")
    if _CONTROL.search(value):
        raise BadRequest(f"{what} must not contain control characters")
    return value or None


def check_name(value: Any) -> str:
    """A connection name: 1-64 of letters, digits, ``_.-``, starting with a letter or digit."""
    if not isinstance(value, str) or not NAME.fullmatch(value):
        raise BadRequest(
            "name must be 1-64 characters: letters, digits, '_', '.', '-' (starting with a letter or digit)"
        )
    if value.lower() in RESERVED_NAMES:
        raise BadRequest(f"the name {value!r} is reserved")
    return value


def check_base_url(value: Any) -> Optional[str]:
    """An http(s) URL with a host and no user:password part; None for the adapter's default."""
    if value is None or value == "":
        return None
    if not isinstance(value, str) or len(value) > MAX_URL:
        raise BadRequest(f"base_url must be a string of at most {MAX_URL} characters")
    if _CONTROL.search(value) or any(c.isspace() for c in value):
        raise BadRequest("base_url must not contain spaces or control characters")
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        raise BadRequest("base_url is not a valid URL") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise BadRequest("base_url must be an http:// or https:// URL with a host")
    if parts.username is not None or parts.password is not None:
        raise BadRequest("base_url must not carry credentials; put the key in api_key")
    if parts.query or parts.fragment:
        raise BadRequest("base_url must not have a query or fragment")
    return value.rstrip("/")


def check_api_key(value: Any) -> Optional[str]:
    """A key of visible ASCII up to 4 KB; "" (or null) means no key."""
    if value is None or value == "":
        return ""
    if not isinstance(value, str):
        raise BadRequest("api_key must be a string")
    if len(value) > MAX_KEY:
        raise BadRequest(f"api_key is longer than {MAX_KEY} characters")
    if not _PRINTABLE.fullmatch(value):
        raise BadRequest("api_key must be printable ASCII without spaces")
    return value


def check_models(value: Any) -> List[str]:
    """A list of distinct model names (may be empty: the server is asked)."""
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > MAX_MODELS:
        raise BadRequest(f"models must be a list of at most {MAX_MODELS} names")
    names: List[str] = []
    for item in value:
        name = _text({"m": item}, "m", MAX_MODEL, "each model")
        if name is None:
            raise BadRequest("each model must be a non-empty string")
        if name not in names:
            names.append(name)
    return names


def validate(data: dict, partial: bool = False) -> Dict[str, Any]:
    """The cleaned fields of a create (``partial`` False) or edit body; BadRequest on anything wrong.

    In an edit an absent field is left as it is; ``api_key`` absent keeps the key, "" clears it.
    """
    if not isinstance(data, dict):
        raise BadRequest("send a JSON object")
    out: Dict[str, Any] = {}
    if "name" in data or not partial:
        out["name"] = check_name(data.get("name"))
    if "kind" in data or not partial:
        if data.get("kind") not in KINDS:
            raise BadRequest(f"kind must be one of {', '.join(KINDS)}")
        out["kind"] = data["kind"]
    if "base_url" in data or not partial:
        out["base_url"] = check_base_url(data.get("base_url"))
    if "api_key" in data or not partial:
        out["api_key"] = check_api_key(data.get("api_key"))
    if "default_model" in data or not partial:
        out["default_model"] = _text(data, "default_model", MAX_MODEL, "default_model")
    if "models" in data or not partial:
        out["models"] = check_models(data.get("models"))
    if "enabled" in data or not partial:
        enabled = data.get("enabled", True)
        if not isinstance(enabled, bool):
            raise BadRequest("enabled must be true or false")
        out["enabled"] = enabled
    if partial and not out:
        raise BadRequest("send at least one of name, kind, base_url, api_key, default_model, models, enabled")
    return out


def to_config(row: dict) -> ProviderConfig:
    """The ProviderConfig a stored (or probed) connection stands for."""
    return ProviderConfig(
        name=row["name"],
        kind=row["kind"],
        base_url=row.get("base_url") or None,
        api_key=row.get("api_key") or None,
        models=list(row.get("models") or []),
        default_model=row.get("default_model") or None,
        options={"source": "database", "connection_id": row.get("id")},
    )


def _explain(exc: ProviderError) -> str:
    if isinstance(exc, ProviderUnavailable):
        return f"connection refused: nothing answers at that address ({exc.message})"
    if isinstance(exc, ProviderTimeout):
        return f"timed out after {PROBE_TIMEOUT:g} s: {exc.message}"
    if isinstance(exc, ProviderHTTPError) and exc.status in (401, 403):
        return f"the server refused the key (HTTP {exc.status}): {exc.message}"
    if isinstance(exc, ProviderHTTPError) and exc.status == 404:
        return f"not found (HTTP 404): check the base URL and the model name: {exc.message}"
    return exc.message


def probe(
    cfg: ProviderConfig, app_config: dict, model: Optional[str] = None, timeout: float = PROBE_TIMEOUT
) -> Dict[str, Any]:
    """Send one token's worth of request; ``{"ok": True, "model", "latency_ms"}`` or ``{"ok": False, "error"}``."""
    cfg = replace(
        cfg,
        options={
            **cfg.options,
            "connect_timeout": timeout,
            "first_token_timeout": timeout,
            "idle_timeout": timeout,
            "list_timeout": timeout,
        },
    )
    started = time.monotonic()
    provider = build_provider(cfg, app_config)
    try:
        model = model or cfg.default_model or (cfg.models[0] if cfg.models else None)
        if not model:
            listed = provider.list_models()
            if not listed:
                return {"ok": False, "error": "the server lists no models; name a default model"}
            model = listed[0]
        request = ChatRequest(model=model, messages=[{"role": "user", "content": "Reply with OK."}], max_tokens=1)
        answered = False
        for event in provider.stream(request, CancelToken()):
            if event.type in (DELTA, FINISH):
                answered = True
                break
        if not answered:
            return {"ok": False, "error": "the server ended the reply without a token", "model": model}
        return {"ok": True, "model": model, "latency_ms": round((time.monotonic() - started) * 1000)}
    except ProviderError as exc:
        return {"ok": False, "error": redact(_explain(exc), cfg.api_key), "model": model}
    except Exception as exc:  # an adapter bug must still answer the screen, without the key
        return {
            "ok": False,
            "error": redact(f"unexpected failure: {exc.__class__.__name__}", cfg.api_key),
            "model": model,
        }
    finally:
        transport = getattr(provider, "transport", None)
        if transport is not None:
            transport.close()
