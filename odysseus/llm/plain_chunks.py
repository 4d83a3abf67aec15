"""Reading the common OpenAI-compatible token chunk without JSON decoding.

A streaming server sends every token as the same document with only the content string
changed; ``PlainContent`` recognises that case by text comparison (see its doc) and hands the
adapter the new content, which then does exactly what a full parse of the chunk would have
made it do. Every other chunk is parsed in full.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Optional

#: the delta keys the adapter reads or knowingly ignores (others are kept as provider_meta)
KNOWN_DELTA_KEYS = {"role", "content", "reasoning_content", "reasoning", "tool_calls", "refusal", "function_call"}

#: what a JSON string body cannot hold raw: a quote, a backslash, a control character
_NOT_PLAIN = re.compile(r'[\x00-\x1f"\\]')
_CONTENT_KEY = '"content":"'


class _Template:
    """The text around one raw string body of the last template chunk (``head``; None: no template)."""

    __slots__ = ("head", "tail")

    def __init__(self) -> None:
        self.head: Optional[str] = None
        self.tail = ""

    def content(self, data: str) -> Optional[str]:
        """The content of ``data`` when it is the template with another raw body; else None."""
        head, tail = self.head, self.tail
        if head is None or not data.startswith(head) or not data.endswith(tail):
            return None
        end = len(data) - len(tail)
        if end < len(head):
            return None
        body = data[len(head) : end]
        return None if _NOT_PLAIN.search(body) else body


class PlainContent(_Template):
    """The text around the content string of the last *plain* chunk, to read the next one without JSON.

    Servers send each token as the same document with only the content string changed (same
    ``id``, ``created``, ``model``...). A chunk is plain when it changed nothing but produced one
    content delta: one choice, no finish reason, usage, reasoning, tool calls, error or unknown
    key, and its content string written raw (no escape) exactly once. A later chunk that is that
    chunk's text with another raw string body in the same place (``head + body + tail``, the body
    without quote, backslash or control character) parses, by the grammar of JSON, to the same
    document with only the content changed: its only effect is a content delta of ``body``.
    Anything else (a new ``id``, an escape, a key more) is parsed in full and may become the
    template for the next chunk.
    """

    __slots__ = ()

    def learn(self, data: str, chunk: dict, extra: Optional[dict]) -> None:
        """Take ``data`` (parsed as ``chunk``) as the template when it is a plain chunk; else forget it."""
        self.head = None
        choices = chunk.get("choices")
        if extra or chunk.get("usage") or type(choices) is not list or len(choices) != 1:
            return
        choice = choices[0]
        if type(choice) is not dict or choice.get("finish_reason"):
            return
        piece = choice.get("delta") or choice.get("message") or {}
        if type(piece) is not dict or not piece.keys() <= KNOWN_DELTA_KEYS:
            return
        text = piece.get("content")
        if (
            type(text) is not str
            or not text
            or piece.get("reasoning_content")
            or piece.get("reasoning")
            or piece.get("tool_calls")
            or data.count(_CONTENT_KEY) != 1
        ):
            return
        start = data.find(_CONTENT_KEY) + len(_CONTENT_KEY)
        end = start + len(text)
        if data[start:end] != text or data[end : end + 1] != '"' or _NOT_PLAIN.search(text):
            return
        # Proof by one probe (once per template, not per token): another body in that place changes
        # this delta's content and nothing else.
        head, tail = data[:start], data[end:]
        try:
            probe = json.loads(head + "\x7f" + tail)
            choice = probe["choices"][0]
            piece = choice.get("delta") or choice.get("message")
            if piece.get("content") != "\x7f":
                return
            piece["content"] = text
        except (ValueError, RecursionError, LookupError, TypeError, AttributeError):
            return
        if probe == chunk:
            self.head, self.tail = head, tail


class FieldTemplate(_Template):
    """``PlainContent`` for one string field of any stream's documents (the Anthropic text delta).

    ``learn`` takes a chunk whose only effect was the text of one field (the caller knows
    which chunks those are); a later chunk that is the same text with another raw string body
    in that place (``content``, the same test as ``PlainContent``) has, by the grammar of JSON,
    that field's new text as its only difference, checked once per template by a probe.
    """

    __slots__ = ()

    def forget(self) -> None:
        """The last chunk did something else: parse the next one in full."""
        self.head = None

    def learn(
        self, data: str, doc: Any, key: str, text: Any, get: Callable[[Any], Any], put: Callable[[Any, str], None]
    ) -> None:
        """Take ``data`` (parsed as ``doc``, whose ``key`` field ``get`` reads and ``put`` sets) as the template."""
        self.head = None
        marker = '"' + key + '":"'
        if type(text) is not str or not text or _NOT_PLAIN.search(text) or data.count(marker) != 1:
            return
        start = data.find(marker) + len(marker)
        end = start + len(text)
        if data[start:end] != text or data[end : end + 1] != '"':
            return
        head, tail = data[:start], data[end:]
        try:
            probe = json.loads(head + "\x7f" + tail)
            if get(probe) != "\x7f":
                return
            put(probe, text)
        except (ValueError, RecursionError, LookupError, TypeError, AttributeError):
            return
        if probe == doc:
            self.head, self.tail = head, tail
