"""Splits inline ``<think>...</think>`` reasoning out of streamed content (pure).

Reasoning models served by llama.cpp, vLLM or LM Studio often send their reasoning
as ordinary content wrapped in ``<think>`` tags. The tags may be cut anywhere across
chunks (``"<thi"`` + ``"nk>"``), so the splitter holds back any tail that could still
become a tag and releases it once it cannot. The opening tag counts only at the very
start of the reply (after whitespace): a reply that *talks about* ``<think>`` later on
is left alone. Some templates put ``<think>`` in the prompt, so the reply starts inside
the reasoning and only ``</think>`` appears: ``starts_thinking=True`` handles that.
"""

from __future__ import annotations

from typing import List, Tuple

OPEN = "<think>"
CLOSE = "</think>"

Piece = Tuple[str, bool]  # (text, is_thinking)


def _partial_suffix(text: str, tag: str) -> int:
    """Length of the longest suffix of ``text`` that is a proper prefix of ``tag``."""
    for size in range(min(len(text), len(tag) - 1), 0, -1):
        if tag.startswith(text[-size:]):
            return size
    return 0


class ThinkSplitter:
    """Feed content chunks; get ``(text, thinking)`` pieces back in order."""

    def __init__(self, starts_thinking: bool = False):
        self.state = "thinking" if starts_thinking else "start"  # start -> thinking -> content
        self.buffer = ""
        self.strip_leading = False  # drop the blank lines models put right after </think>

    def passthrough(self, text: str) -> bool:
        """True when ``feed(text)`` would return ``[(text, False)]``: past the reasoning, nothing held.

        The per-token fast path of the adapters (no list, no merge for the common chunk).
        """
        return self.state == "content" and not self.buffer and not self.strip_leading

    def feed(self, text: str) -> List[Piece]:
        """Split one chunk; may hold back a possible tag fragment until the next call."""
        self.buffer += text
        out: List[Piece] = []
        while self.buffer:
            if self.state == "start":
                stripped = self.buffer.lstrip()
                if stripped.startswith(OPEN):
                    self.buffer = stripped[len(OPEN) :]
                    self.state = "thinking"
                    continue
                if not stripped or OPEN.startswith(stripped):
                    break  # could still become <think>: wait for more
                self.state = "content"
                continue
            if self.state == "thinking":
                end = self.buffer.find(CLOSE)
                if end >= 0:
                    if end:
                        out.append((self.buffer[:end], True))
                    self.buffer = self.buffer[end + len(CLOSE) :]
                    self.state, self.strip_leading = "content", True
                    continue
                keep = _partial_suffix(self.buffer, CLOSE)
                ready = self.buffer[: len(self.buffer) - keep]
                if ready:
                    out.append((ready, True))
                self.buffer = self.buffer[len(self.buffer) - keep :]
                break
            # content: no tags any more
            if self.strip_leading:
                self.buffer = self.buffer.lstrip()
                if not self.buffer:
                    break
                self.strip_leading = False
            out.append((self.buffer, False))
            self.buffer = ""
        return _merge(out)

    def flush(self) -> List[Piece]:
        """End of stream: release whatever is held back."""
        if not self.buffer:
            return []
        text, self.buffer = self.buffer, ""
        if self.state == "thinking":
            return [(text, True)]
        if self.strip_leading:
            text = text.lstrip()
        return [(text, False)] if text else []


def _merge(pieces: List[Piece]) -> List[Piece]:
    merged: List[Piece] = []
    for text, thinking in pieces:
        if merged and merged[-1][1] == thinking:
            merged[-1] = (merged[-1][0] + text, thinking)
        else:
            merged.append((text, thinking))
    return merged
