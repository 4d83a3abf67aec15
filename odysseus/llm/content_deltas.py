"""A reply's content text as delta events, with inline ``<think>`` reasoning split out (adapters' per-token path).

Every adapter that can see ``<think>`` tags in content (OpenAI-compatible servers, Ollama) turns each
content piece into delta events the same way: through a ``ThinkSplitter`` until the reply is past its
reasoning, and from then on one ``delta(content)`` per piece with no splitter work at all.

Invariant: once ``plain`` is true it stays true; the caller yields ``delta(content)`` itself on that
path (no list built per token) and calls ``split`` only while ``plain`` is false.
"""

from __future__ import annotations

from typing import List, Optional

from ..events import Event, delta
from .think_splitter import ThinkSplitter


class ContentDeltas:
    """The content pieces of one streamed reply, split at think tags while reasoning may still be open."""

    __slots__ = ("_splitter", "plain")

    def __init__(self, think_tags: bool, starts_thinking: bool = False):
        self._splitter: Optional[ThinkSplitter] = ThinkSplitter(starts_thinking) if think_tags else None
        #: no tags to look for (any more): every content piece is one plain delta, as it is
        self.plain = self._splitter is None

    def split(self, content: str) -> List[Event]:
        """The delta events of one content piece (call only while ``plain`` is false)."""
        splitter = self._splitter
        assert splitter is not None, "split() after the reply went plain"
        if splitter.passthrough(content):  # past the reasoning for good: it would pass every later piece as it is
            self._splitter, self.plain = None, True
            return [delta(content)]
        return [delta(text, thinking=is_thinking) for text, is_thinking in splitter.feed(content)]

    def flush(self) -> List[Event]:
        """What the splitter still holds back at the end of the stream (a tag fragment that never completed)."""
        if self._splitter is None:
            return []
        return [delta(text, thinking=is_thinking) for text, is_thinking in self._splitter.flush()]
