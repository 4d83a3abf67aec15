"""Per-connection limits of SSE streams: concurrent streams per user, and bytes queued per connection.

- ``StreamSlots``: at most ``MAX_STREAMS_PER_USER`` open streams per owner in this process;
  one more is refused (the routes answer 429) before anything starts.
- ``metered``: wraps a stream body so that each piece it yields is counted against the
  process ``ByteBudget`` (the one the run logs draw on) from the moment it is handed to the
  server until the generator resumes, which the server does only after writing it. A reader
  that does not read therefore holds one piece (``follow.PIECE_BYTES``) in this process,
  and the run engine sees it in its memory budget. A piece bigger than the cap is sliced.

Both are per worker process (each gunicorn worker keeps its own counters).
"""

from __future__ import annotations

import threading
from typing import Callable, Dict, Iterator, Optional

from .follow import PIECE_BYTES
from .run_log import ByteBudget


class StreamSlots:
    """Counts the open streams of each owner."""

    def __init__(self, limit: int):
        self.limit = limit
        self.open: Dict[str, int] = {}
        self._lock = threading.Lock()

    def acquire(self, owner: str) -> bool:
        """Take a slot for ``owner``; False (nothing taken) when the owner has ``limit`` streams open."""
        with self._lock:
            count = self.open.get(owner, 0)
            if count >= self.limit:
                return False
            self.open[owner] = count + 1
            return True

    def full(self, owner: str) -> bool:
        """True when ``owner`` cannot open one more stream now."""
        return self.open.get(owner, 0) >= self.limit

    def release(self, owner: str) -> None:
        """Give a slot back."""
        with self._lock:
            count = self.open.get(owner, 0) - 1
            if count <= 0:
                self.open.pop(owner, None)
            else:
                self.open[owner] = count


def metered(
    body: Iterator[str],
    budget: Optional[ByteBudget],
    on_close: Optional[Callable[[], None]] = None,
    prefix: str = "",
    limit: int = PIECE_BYTES,
) -> Iterator[str]:
    """Yield ``body`` in pieces of at most ``limit`` characters, each counted in ``budget`` while queued.

    ``prefix`` goes in front of the first piece (the ``retry:`` field); ``on_close`` runs once
    when the stream ends or the client goes away (the generator is closed).
    """
    try:
        for text in body:
            if prefix:
                text, prefix = prefix + text, ""
            for start in range(0, len(text), limit):
                piece = text[start : start + limit] if len(text) > limit else text
                size = len(piece)
                if budget is not None:
                    budget.take(size, force=True)
                try:
                    yield piece
                finally:
                    if budget is not None:
                        budget.give(size)
    finally:
        close = getattr(body, "close", None)
        if close is not None:
            close()
        if on_close is not None:
            on_close()
