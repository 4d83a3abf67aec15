"""How much Python heap a kept object holds, measured with tracemalloc (the memory tests' one way)."""

from __future__ import annotations

import tracemalloc
from typing import Callable


def held_bytes_each(build: Callable[[], object], count: int) -> float:
    """Bytes of Python heap each of ``count`` objects made by ``build`` holds while all of them are kept."""
    kept = []
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(count):
            kept.append(build())
        return (tracemalloc.get_traced_memory()[0] - before) / count
    finally:
        tracemalloc.stop()
