"""Splitting text into overlapping chunks on sentence boundaries, and a free-text query into FTS5 terms."""

from __future__ import annotations

import re
from typing import List

SENTENCE_END = re.compile(r"(?<=[.!?…。])\s+|\n\s*\n+")
WORD = re.compile(r"\w+", re.UNICODE)
#: words too common to say anything about which chunk fits (English; other languages pass through)
STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before
being below between both but by can could did do does doing down during each few for from further had has have
having he her here hers herself him himself his how i if in into is it its itself just me more most my myself no
nor not now of off on once only or other our ours ourselves out over own same she should so some such than that
the their theirs them themselves then there these they this those through to too under until up very was we
were what when where which while who whom why will with would you your yours yourself yourselves tell say says
please show give explain describe know file document""".split()
)
MAX_TERMS = 32


def sentences(text: str) -> List[str]:
    """``text`` cut after sentence ends and at paragraph breaks (whitespace kept out)."""
    return [s.strip() for s in SENTENCE_END.split(text) if s and s.strip()]


def _hard_split(sentence: str, size: int) -> List[str]:
    """A sentence longer than ``size`` cut at spaces (or anywhere, for one long word)."""
    pieces, current = [], ""
    for word in sentence.split(" "):
        while len(word) > size:
            if current:
                pieces.append(current)
                current = ""
            pieces.append(word[:size])
            word = word[size:]
        if current and len(current) + 1 + len(word) > size:
            pieces.append(current)
            current = word
        else:
            current = f"{current} {word}" if current else word
    if current:
        pieces.append(current)
    return pieces


def chunk_text(text: str, size: int = 1000, overlap: int = 150) -> List[str]:
    """Chunks of about ``size`` characters made of whole sentences; each begins with the previous one's
    last sentences up to ``overlap`` characters, so a fact cut by a boundary is whole in one chunk."""
    size = max(100, size)
    overlap = max(0, min(overlap, size // 2))
    units: List[str] = []
    for sentence in sentences(text):
        units.extend(_hard_split(sentence, size) if len(sentence) > size else [sentence])
    chunks: List[str] = []
    current: List[str] = []
    length = 0
    fresh = 0  # units in ``current`` that are not overlap carried from the previous chunk
    for unit in units:
        if current and fresh and length + 1 + len(unit) > size:
            chunks.append(" ".join(current))
            carried: List[str] = []
            kept = 0
            for previous in reversed(current):
                if kept + len(previous) + 1 > overlap or len(carried) + 1 >= len(current):
                    break
                carried.insert(0, previous)
                kept += len(previous) + 1
            while carried and kept + len(unit) + 1 > size:
                kept -= len(carried.pop(0)) + 1
            current, length, fresh = carried, max(0, kept - 1), 0
        current.append(unit)
        length += len(unit) + (1 if length else 0)
        fresh += 1
    if current and fresh:
        chunks.append(" ".join(current))
    return chunks


def query_terms(text: str) -> List[str]:
    """Distinct lower-case words of ``text`` worth searching for (no stopwords, no single letters)."""
    seen: List[str] = []
    for word in WORD.findall(text.lower()):
        if (len(word) > 1 or not word.isascii()) and word not in STOPWORDS and word not in seen:
            seen.append(word)
        if len(seen) >= MAX_TERMS:
            break
    return seen


def fts_query(terms: List[str]) -> str:
    """An FTS5 MATCH expression: any of ``terms``, each quoted (so no term is read as an operator)."""
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)
