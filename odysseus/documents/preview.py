"""The live preview of a ``create_document`` / ``update_document`` call while its arguments stream.

Fed the call's argument fragments (``tool_call_delta``), it yields ``doc_stream_open``
once the title is known (for an update: the active document's title, as soon as the
content starts) and then ``doc_stream_delta`` with the *whole* content so far, at most
every ``interval`` seconds; ``finish`` sends the final content when the last preview
lagged behind. A preview is only a preview: the document is written, and ``doc_update``
sent, by the tool after the call is complete and accepted.

Each delta repeats the whole content, so a long document streamed slowly would fill the
run log quadratically. After a free allowance (``FREE_BYTES`` of previews) a delta is
sent only when the content grew by a sixteenth of what the previews already carried:
the total stays within a few times the document's size however slowly it streams.
"""

from __future__ import annotations

import time
from typing import Callable, List, Optional

from ..events import DOC_STREAM_DELTA, DOC_STREAM_OPEN, Event
from .partial_json import PartialFields
from .service import normalise_language

FREE_BYTES = 256 * 1024


class DocumentPreview:
    """The preview of one streaming call; ``kind`` is ``create`` or ``update``."""

    def __init__(
        self,
        kind: str,
        *,
        interval: float,
        max_chars: int,
        active: Callable[[], Optional[dict]] = lambda: None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.kind = kind
        self.interval = interval
        self.max_chars = max_chars
        self.active = active
        self.clock = clock
        self.reader = PartialFields(("title", "language", "content"))
        self.opened = False
        self.disabled = False
        self.sent_len = -1
        self.sent_total = 0
        self.last_at = float("-inf")

    def feed(self, fragment: str) -> List[Event]:
        """Consume the next fragment of the arguments; the preview events it warrants."""
        if self.disabled or not fragment:
            return []
        self.reader.feed(fragment)
        events: List[Event] = []
        if not self.opened:
            opening = self._open()
            if opening is None:
                return events
            events.append(opening)
        content = self.reader.value("content")
        if content is not None and self._due(len(content)):
            events.append(self._delta(content))
        return events

    def finish(self) -> List[Event]:
        """The call is complete: the final content, if the previews have not shown it yet."""
        if not self.opened or self.disabled:
            return []
        content = self.reader.value("content")
        if content is None or len(content) == self.sent_len or len(content) > self.max_chars:
            return []
        return [self._delta(content)]

    def _open(self) -> Optional[Event]:
        reader = self.reader
        if self.kind == "create":
            if not reader.done("title"):
                return None
            if not (reader.done("language") or reader.started("content")):
                return None  # wait a little: the language usually follows the title
            title, language = reader.value("title"), reader.value("language")
        else:
            if not reader.started("content"):
                return None
            doc = self.active()
            if doc is None:  # nothing to update: the tool will say so
                self.disabled = True
                return None
            title, language = doc["title"], doc["language"]
        self.opened = True
        return Event(
            DOC_STREAM_OPEN,
            {"title": " ".join((title or "").split())[:200] or "Untitled", "language": normalise_language(language)},
        )

    def _due(self, length: int) -> bool:
        if length == self.sent_len or length > self.max_chars:
            return False
        if self.clock() - self.last_at < self.interval:
            return False
        grown = length - max(self.sent_len, 0)
        return self.sent_total < FREE_BYTES or grown >= (self.sent_total - FREE_BYTES) / 16

    def _delta(self, content: str) -> Event:
        self.sent_len = len(content)
        self.sent_total += len(content)
        self.last_at = self.clock()
        return Event(DOC_STREAM_DELTA, {"content": content})
