"""Where to go after signing in: the ``next=`` target, only ever a path on this site.

Browsers are lenient with URLs in ways that turn a harmless-looking path into another
site: they drop tabs and line breaks anywhere (``/\\t/evil.example`` is
``//evil.example``), read ``\\`` as ``/``, and a second round of percent-decoding can
happen in proxies or client code. So a target is accepted only if it starts with a
single ``/`` and still does after removing tabs/line breaks, turning backslashes into
slashes and percent-decoding repeatedly; anything else falls back to ``/``. A target
with a line break (raw or encoded) is refused outright (400), as header injection.
"""

from __future__ import annotations

from typing import Optional
from urllib.parse import unquote, urlsplit

from ..errors import BadRequest

FALLBACK = "/"
MAX_LENGTH = 2000
_DECODE_ROUNDS = 4


def _decodings(target: str):
    """``target`` and its successive percent-decodings, until stable (bounded)."""
    seen = target
    yield seen
    for _ in range(_DECODE_ROUNDS):
        decoded = unquote(seen)
        if decoded == seen:
            return
        seen = decoded
        yield seen


def _is_local_path(text: str) -> bool:
    cleaned = text.replace("\t", "").replace("\r", "").replace("\n", "").replace("\\", "/")
    if any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in cleaned) or cleaned != cleaned.strip():
        return False
    if not cleaned.startswith("/") or cleaned.startswith("//"):
        return False
    parts = urlsplit(cleaned)
    return not parts.scheme and not parts.netloc


def local_target(raw: Optional[str]) -> str:
    """``raw`` when it is a same-site path under every normalisation above, else ``/``; BadRequest on line breaks."""
    if not raw:
        return FALLBACK
    forms = list(_decodings(raw))
    if any("\r" in form or "\n" in form for form in forms):
        raise BadRequest("next must not contain line breaks")
    if len(raw) > MAX_LENGTH or not all(_is_local_path(form) for form in forms):
        return FALLBACK
    if raw != raw.replace("\t", "").replace("\\", "/"):
        return FALLBACK  # harmless after cleaning, but nobody needs a tab or backslash in a return path
    return raw
