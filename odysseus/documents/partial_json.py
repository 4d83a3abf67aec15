"""An incremental reader of chosen string fields of a JSON object that is still arriving.

A model streams a tool call's arguments as fragments of one JSON text, split anywhere:
inside a key, between a backslash and the character it escapes, in the middle of a
``\\uXXXX`` sequence or between the two halves of a surrogate pair. ``PartialFields``
is fed those fragments in order and keeps, for each wanted top-level key, the decoded
string so far and whether it has ended. It never re-reads what it has seen (each
``feed`` is linear in its fragment) and never raises: text that is not JSON simply
stops producing values. Non-string values and nested objects are skipped, string-aware.
"""

from __future__ import annotations

from typing import Dict, Iterable, List, Optional, Set

_SIMPLE_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_WS = " \t\r\n"

# states of the top-level scan
_BEFORE_KEY, _KEY, _COLON, _BEFORE_VALUE, _STRING, _OTHER, _AFTER_VALUE, _START, _DONE = range(9)


class PartialFields:
    """Decoded values of the wanted string fields of a streamed JSON object; see module doc."""

    def __init__(self, fields: Iterable[str]):
        self.fields = set(fields)
        self.values: Dict[str, List[str]] = {}
        self.complete: Set[str] = set()
        self.broken = False
        self._state = _START
        self._key: List[str] = []
        self._current: Optional[List[str]] = None  # where string characters go (None: discarded)
        self._current_key: Optional[str] = None
        self._escape: Optional[str] = None  # pending escape text after a backslash ("\\", "\\u12", ...)
        self._high: Optional[int] = None  # a high surrogate waiting for its low half
        self._depth = 0  # nesting inside a skipped non-string value
        self._in_nested_string = False
        self._nested_escape = False

    # ------------------------------------------------------------------ reading
    def value(self, name: str) -> Optional[str]:
        """The decoded text of ``name`` so far, or None when its string has not started."""
        parts = self.values.get(name)
        return None if parts is None else "".join(parts)

    def started(self, name: str) -> bool:
        """Whether ``name``'s string value has begun."""
        return name in self.values

    def done(self, name: str) -> bool:
        """Whether ``name``'s string value has ended."""
        return name in self.complete

    # ------------------------------------------------------------------ feeding
    def feed(self, text: str) -> None:
        """Consume the next fragment of the JSON text."""
        i, n = 0, len(text)
        while i < n and not self.broken and self._state != _DONE:
            state = self._state
            if state in (_KEY, _STRING):
                i = self._string(text, i)
                continue
            if state == _OTHER:
                i = self._skip(text, i)
                continue
            ch = text[i]
            i += 1
            if ch in _WS:
                continue
            if state == _START:
                self._expect(ch == "{", _BEFORE_KEY)
            elif state == _BEFORE_KEY:
                if ch == '"':
                    self._key = []
                    self._current, self._current_key, self._state = self._key, None, _KEY
                elif ch == "}":
                    self._state = _DONE
                else:
                    self.broken = True
            elif state == _COLON:
                self._expect(ch == ":", _BEFORE_VALUE)
            elif state == _BEFORE_VALUE:
                key = "".join(self._key)
                if ch == '"':
                    if key in self.fields:
                        self.values[key] = []
                        self._current, self._current_key = self.values[key], key
                    else:
                        self._current, self._current_key = None, None
                    self._state = _STRING
                else:
                    self._depth = 1 if ch in "{[" else 0
                    self._state = _OTHER
                    if self._depth == 0:  # a number, true, false or null: its first character
                        i -= 1
            elif state == _AFTER_VALUE:
                if ch == ",":
                    self._state = _BEFORE_KEY
                elif ch == "}":
                    self._state = _DONE
                else:
                    self.broken = True

    def _expect(self, ok: bool, next_state: int) -> None:
        if ok:
            self._state = next_state
        else:
            self.broken = True

    def _string(self, text: str, i: int) -> int:
        """Inside a key or a value string: copy runs of plain text, decode escapes; return the new index."""
        n = len(text)
        out = self._current
        while i < n:
            if self._escape is not None:
                i = self._continue_escape(text, i)
                continue
            stop = i
            while stop < n and text[stop] != '"' and text[stop] != "\\":
                stop += 1
            if stop > i:
                self._flush_high()
                if out is not None:
                    out.append(text[i:stop])
                i = stop
            if i >= n:
                break
            if text[i] == "\\":
                self._escape = "\\"
                i += 1
                continue
            # the closing quote
            self._flush_high()
            i += 1
            if self._state == _KEY:
                self._state = _COLON
            else:
                if self._current_key is not None:
                    self.complete.add(self._current_key)
                self._state = _AFTER_VALUE
            self._current, self._current_key = None, None
            return i
        return i

    def _continue_escape(self, text: str, i: int) -> int:
        """Extend the pending escape with characters from ``text[i:]``; emit it when whole."""
        n = len(text)
        esc = self._escape
        assert esc is not None  # called only while an escape is pending
        if esc == "\\":
            ch = text[i]
            i += 1
            if ch == "u":
                self._escape = "\\u"
                return i
            self._escape = None
            if ch not in _SIMPLE_ESCAPES:
                self.broken = True
                return n
            self._flush_high()
            self._emit(_SIMPLE_ESCAPES[ch])
            return i
        need = 6 - len(esc)  # "\\u" + 4 hex digits
        take = text[i : i + need]
        esc += take
        i += len(take)
        if len(esc) < 6:
            self._escape = esc
            return i
        self._escape = None
        try:
            code = int(esc[2:], 16)
        except ValueError:
            self.broken = True
            return n
        if 0xD800 <= code <= 0xDBFF:
            self._flush_high()
            self._high = code
        elif 0xDC00 <= code <= 0xDFFF:
            if self._high is not None:
                self._emit(chr(0x10000 + ((self._high - 0xD800) << 10) + (code - 0xDC00)))
                self._high = None
            else:
                self._emit("\ufffd")
        else:
            self._flush_high()
            self._emit(chr(code))
        return i

    def _flush_high(self) -> None:
        """A high surrogate not followed by its low half stands for U+FFFD."""
        if self._high is not None:
            self._high = None
            self._emit("\ufffd")

    def _emit(self, text: str) -> None:
        if self._current is not None:
            self._current.append(text)

    def _skip(self, text: str, i: int) -> int:
        """Skip a non-string value (nested containers string-aware); return the new index."""
        n = len(text)
        while i < n:
            ch = text[i]
            if self._in_nested_string:
                if self._nested_escape:
                    self._nested_escape = False
                elif ch == "\\":
                    self._nested_escape = True
                elif ch == '"':
                    self._in_nested_string = False
                i += 1
                continue
            if self._depth == 0:  # a scalar: ends at a delimiter, which the main loop reads
                if ch in ",}" or ch in _WS:
                    self._state = _AFTER_VALUE
                    return i
                i += 1
                continue
            if ch == '"':
                self._in_nested_string = True
            elif ch in "{[":
                self._depth += 1
            elif ch in "}]":
                self._depth -= 1
                if self._depth == 0:
                    self._state = _AFTER_VALUE
                    return i + 1
            i += 1
        return i
