"""Provider failures as our errors: THE adapter boundary (``provider_errors``), the mapping of
lower-level exceptions (``socket``, ``ssl``, ``http.client``, bad JSON), an error body's
message and ``Retry-After``, and keeping credentials out of what is reported.

When the run was cancelled, a failure inside the boundary becomes ``Cancelled`` instead, so a stop is
never reported as a failure.
"""

from __future__ import annotations

import contextlib
import email.utils
import http.client
import json
import socket
import ssl
import time
from typing import Any, Iterator, Optional

from ..cancel import Cancelled, CancelToken
from ..errors import (
    ProviderError,
    ProviderNetworkError,
    ProviderProtocolError,
    ProviderTimeout,
    ProviderUnavailable,
)
from .text_repair import repair_text, repair_value

SECRET_HEADERS = ("authorization", "x-api-key", "api-key")


def redact(text: str, secret: Optional[str]) -> str:
    """``text`` with ``secret`` (and a long prefix of it, which servers echo) replaced by its last four."""
    if not secret or len(secret) < 4 or not text:
        return text
    text = text.replace(secret, "…" + secret[-4:])
    if len(secret) >= 12:
        text = text.replace(secret[:-4], "…")
    return text


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and everything it wraps (cause, context, a ``reason`` exception, args)."""
    seen, todo = set(), [exc]
    while todo:
        item = todo.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        yield item
        for nxt in (
            item.__cause__,
            item.__context__,
            getattr(item, "reason", None),
            *[a for a in getattr(item, "args", ()) if isinstance(a, BaseException)],
        ):
            if isinstance(nxt, BaseException):
                todo.append(nxt)


def map_error(exc: BaseException, provider: str) -> ProviderError:
    """Translate a low-level exception into the ProviderError the client should see."""
    chain = list(_chain(exc))
    if any(isinstance(e, ConnectionRefusedError) for e in chain) or "Connection refused" in str(exc):
        return ProviderUnavailable(f"Connection refused by provider {provider}", provider=provider)
    tls = next((e for e in chain if isinstance(e, ssl.SSLError)), None)
    if tls is not None:  # before the malformed-chunk test: a certificate error is also a ValueError
        detail = getattr(tls, "verify_message", None) or getattr(tls, "reason", None) or tls.__class__.__name__
        return ProviderNetworkError(f"TLS error talking to provider {provider}: {detail}", provider=provider)
    if any(isinstance(e, socket.timeout) for e in chain):  # connect timeouts are ProviderTimeout already
        return ProviderTimeout("Read timeout", provider=provider)
    if any(isinstance(e, ConnectionResetError) for e in chain):
        return ProviderNetworkError(f"Connection reset by provider {provider}", provider=provider)
    if any(isinstance(e, http.client.IncompleteRead) for e in chain):
        return ProviderNetworkError(
            f"Connection closed by provider {provider} before the response was complete", provider=provider
        )
    malformed = (ValueError, UnicodeDecodeError, RecursionError)
    if isinstance(exc, malformed):
        return ProviderProtocolError(f"Malformed chunk from provider {provider}: {exc}", provider=provider)
    return ProviderNetworkError(
        f"Network error talking to provider {provider}: {exc.__class__.__name__}", provider=provider
    )


@contextlib.contextmanager
def provider_errors(provider: str, cancel: Optional[CancelToken] = None) -> Iterator[None]:
    """THE adapter boundary: every failure inside leaves as a ProviderError (or Cancelled)."""
    try:
        yield
    except Cancelled:
        raise
    except ProviderError as exc:
        if cancel is not None and cancel.cancelled:
            raise Cancelled(cancel.reason or "stopped") from None
        if exc.message != repair_text(exc.message):  # a provider's own words may carry half a pair
            exc.message = repair_text(exc.message)
            exc.args = (exc.message,)
        raise
    except (
        http.client.HTTPException,
        OSError,
        ValueError,
        EOFError,
        RecursionError,
    ) as exc:
        if cancel is not None and cancel.cancelled:
            raise Cancelled(cancel.reason or "stopped") from None
        raise map_error(exc, provider) from exc


def retry_after(headers: Any) -> Optional[float]:
    """Seconds from ``Retry-After`` (seconds or HTTP date) or ``retry-after-ms``; None when absent."""
    raw_ms = headers.get("retry-after-ms")
    if raw_ms:
        with contextlib.suppress(ValueError):
            return max(0.0, float(raw_ms) / 1000)
    raw = headers.get("Retry-After")
    if not raw:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(raw) if raw else None
        return None if parsed is None else max(0.0, round(parsed.timestamp() - time.time(), 3))


def error_message(body: bytes) -> str:
    """The human part of a provider's error body (OpenAI, Ollama and Anthropic shapes)."""
    text = body.decode("utf-8", "replace").strip()
    try:
        doc = repair_value(json.loads(text))
    except (ValueError, RecursionError):
        return text[:500]
    err = doc.get("error", doc) if isinstance(doc, dict) else doc
    if isinstance(err, dict):
        return str(err.get("message") or err.get("type") or err)[:500]
    return str(err)[:500]
