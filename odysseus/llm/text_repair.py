"""Repairing model text at the adapter boundary: UTF-16 surrogates that JSON carries but UTF-8 cannot.

JSON spells characters outside the BMP as two ``\\uXXXX`` escapes (a surrogate pair), and
``json.loads`` happily returns a ``str`` holding half a pair (``"A\\ud83dB"``), or the two
halves in two different chunks of a stream. Such a string cannot be encoded as UTF-8: the
SSE write, the run log's serialised payload and every SQLite write of it would raise
``UnicodeEncodeError`` far away from the provider that sent it.

Invariants:

- Every event leaving ``HTTPProvider.stream`` is free of surrogates: ``repaired`` wraps the
  adapter's events once, so nothing downstream (engine, log, store, projections) checks.
- A pair split across two ``delta`` events of the same channel (content or thinking) is
  joined: the trailing high surrogate is held back and prepended to the next delta of that
  channel. A held half still alone at a tool call, at the finish or at the end of the
  stream becomes U+FFFD, as does every other lone surrogate.
- Text without surrogates passes through unchanged and uncopied (one regex search).
"""

from __future__ import annotations

import re
from typing import Any, Dict, Iterator

from ..events import DELTA, FINISH, TOOL_CALL, Event

REPLACEMENT = "\ufffd"
_SURROGATE = re.compile("[\ud800-\udfff]")
_HIGH = ("\ud800", "\udbff")


def has_surrogate(text: str) -> bool:
    """True when ``text`` holds any UTF-16 surrogate code point (paired or not)."""
    return _SURROGATE.search(text) is not None


def repair_text(text: str) -> str:
    """``text`` with adjacent surrogate pairs joined into one character and lone halves as U+FFFD."""
    if not has_surrogate(text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def repair_value(value: Any) -> Any:
    """A JSON-like value with every string (and dict key) repaired; the same object when nothing changed."""
    if isinstance(value, str):
        return repair_text(value)
    if isinstance(value, dict):
        items = [(repair_value(k), repair_value(v)) for k, v in value.items()]
        if all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(items, value.items(), strict=True)):
            return value
        return dict(items)
    if isinstance(value, (list, tuple)):
        repaired_items = [repair_value(v) for v in value]
        if all(a is b for a, b in zip(repaired_items, value, strict=True)):
            return value
        return type(value)(repaired_items)
    return value


def _ends_high(text: str) -> bool:
    return bool(text) and _HIGH[0] <= text[-1] <= _HIGH[1]


def repaired(events: Iterator[Event]) -> Iterator[Event]:
    """Yield ``events`` with surrogates repaired and split pairs joined across deltas (see module doc).

    A half held back when the adapter raises is dropped with the failure: the partial
    reply then ends one (unrepresentable) character short.
    """
    held: Dict[bool, str] = {}

    def flush() -> Iterator[Event]:
        for thinking in sorted(held):
            yield Event(DELTA, {"delta": REPLACEMENT, "thinking": True} if thinking else {"delta": REPLACEMENT})
        held.clear()

    for event in events:
        if event.type == DELTA:
            thinking = bool(event.data.get("thinking"))
            text = event.data.get("delta", "")
            if not isinstance(text, str):
                yield event
                continue
            pending = held.pop(thinking, "")
            if not pending and not has_surrogate(text):
                yield event  # the common case: untouched
                continue
            text = pending + text
            if _ends_high(text):
                held[thinking] = text[-1]
                text = text[:-1]
            text = repair_text(text)
            if text:
                yield Event(DELTA, {**event.data, "delta": text}, event.seq)
            continue
        if event.type in (TOOL_CALL, FINISH) and held:
            yield from flush()
        data = repair_value(event.data)
        yield event if data is event.data else Event(event.type, data, event.seq)
    yield from flush()
