"""Repairing model text at the adapter boundary: UTF-16 surrogates that JSON carries but UTF-8 cannot.

JSON spells characters outside the BMP as two ``\\uXXXX`` escapes (a surrogate pair), and
``json.loads`` happily returns a ``str`` holding half a pair (``"A\\ud83dB"``), or the two
halves in two different chunks of a stream. Such a string cannot be encoded as UTF-8: the
SSE write, the run log's serialised payload and every SQLite write of it would raise
``UnicodeEncodeError`` far away from the provider that sent it.

Invariants:

- Every event leaving ``HTTPProvider.stream`` is free of surrogates: its loop passes the
  adapter's events through one ``Repair`` (``repaired`` is the same as a generator), so nothing
  downstream (engine, log, store, projections) checks.
- A pair split across two ``delta`` events of the same channel (content or thinking) is
  joined: the trailing high surrogate is held back and prepended to the next delta of that
  channel. A held half still alone at a tool call, at the finish or at the end of the
  stream becomes U+FFFD, as does every other lone surrogate.
- Text without surrogates passes through unchanged and uncopied (one regex search).
"""

from __future__ import annotations

import re
from typing import Any, Dict, Iterator, List

from ..events import DELTA, FINISH, TOOL_CALL, Event

REPLACEMENT = "\ufffd"
_SURROGATE = re.compile("[\ud800-\udfff]")
_HIGH = ("\ud800", "\udbff")


def has_surrogate(text: str) -> bool:
    """True when ``text`` holds any UTF-16 surrogate code point (paired or not)."""
    return not text.isascii() and _SURROGATE.search(text) is not None  # isascii: the common case, in C


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


class Repair:
    """The repair state of one stream: the high surrogate held back per channel (see module doc).

    ``clean(event)`` is the per-token test a stream loop makes first: a delta with nothing held
    and no surrogate passes as it is. Everything else goes through ``feed``, which returns the
    events to pass on in its place (none, the event, or repaired copies); ``flush`` ends the stream.
    """

    __slots__ = ("held",)

    def __init__(self) -> None:
        self.held: Dict[bool, str] = {}

    def clean(self, event: Event) -> bool:
        """True when ``event`` is a delta that passes untouched (the common case, a few C calls)."""
        if event.type != DELTA or self.held:
            return False
        text = event.data.get("delta")
        return type(text) is str and (text.isascii() or _SURROGATE.search(text) is None)

    def feed(self, event: Event) -> List[Event]:
        """The events that stand for ``event`` once repaired (split pairs joined across deltas)."""
        held = self.held
        if event.type == DELTA:
            thinking = bool(event.data.get("thinking"))
            text = event.data.get("delta", "")
            if not isinstance(text, str):
                return [event]
            pending = held.pop(thinking, "")
            if not pending and not has_surrogate(text):
                return [event]
            text = pending + text
            if _ends_high(text):
                held[thinking] = text[-1]
                text = text[:-1]
            text = repair_text(text)
            return [Event(DELTA, {**event.data, "delta": text}, event.seq)] if text else []
        out = self.flush() if event.type in (TOOL_CALL, FINISH) and held else []
        data = repair_value(event.data)
        out.append(event if data is event.data else Event(event.type, data, event.seq))
        return out

    def flush(self) -> List[Event]:
        """Each half still held, as U+FFFD (content before thinking); nothing is held after."""
        out = [
            Event(DELTA, {"delta": REPLACEMENT, "thinking": True} if thinking else {"delta": REPLACEMENT})
            for thinking in sorted(self.held)
        ]
        self.held.clear()
        return out


def repaired(events: Iterator[Event]) -> Iterator[Event]:
    """Yield ``events`` with surrogates repaired and split pairs joined across deltas (see module doc).

    A half held back when the adapter raises is dropped with the failure: the partial
    reply then ends one (unrepresentable) character short. ``HTTPProvider.stream`` uses
    ``Repair`` directly (no generator layer per event); this is the same as a generator.
    """
    repair = Repair()
    for event in events:
        if repair.clean(event):
            yield event
        else:
            yield from repair.feed(event)
    yield from repair.flush()
