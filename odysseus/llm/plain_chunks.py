"""Reading the common OpenAI-compatible token chunk without JSON decoding.

A streaming server sends every token as the same document with only the content string
changed; ``PlainContent`` recognises that case by text comparison (see its doc) and hands the
adapter the new content, which then does exactly what a full parse of the chunk would have
made it do. Every other chunk is parsed in full.
"""

from __future__ import annotations

import json
import re
from typing import Optional

#: the delta keys the adapter reads or knowingly ignores (others are kept as provider_meta)
KNOWN_DELTA_KEYS = {"role", "content", "reasoning_content", "reasoning", "tool_calls", "refusal", "function_call"}

#: what a JSON string body cannot hold raw: a quote, a backslash, a control character
_NOT_PLAIN = re.compile(r'[\x00-\x1f"\\]')
_CONTENT_KEY = '"content":"'


class PlainContent:
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
