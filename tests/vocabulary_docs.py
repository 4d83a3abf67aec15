"""Readers of the documents the event vocabulary is checked against: docs/protocol.md's tables, the page's
handler table (static/js/stream_events.js). Used by tests/test_event_vocabulary.py."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, FrozenSet, List, Optional

#: first-column headers of docs/protocol.md's event tables (other tables: endpoints, statuses, phases, ...)
EVENT_HEADERS = {"`type` (or shape)", "`type`", "event"}
SHAPES = {
    '{"delta": "..."}': "delta",
    '{"delta": "...", "thinking": true}': "delta",
    "[DONE]": "done",
    "event: error": "error",
}
_SPAN = re.compile(r"`([^`]*)`")
_NAME = re.compile(r"([a-z_][a-z0-9_]*)\??(?:$|[:\[ ])")


@dataclass
class Row:
    """One row of an event table: its event names, the fields its second column lists (None: not listed)."""

    table: str  # the header line, to say where a mismatch is
    names: List[str]
    fields: Optional[FrozenSet[str]]
    cells: List[str]


def split_row(line: str) -> List[str]:
    """The cells of a markdown table row (``\\|`` is a literal bar)."""
    cells = re.split(r"(?<!\\)\|", line.strip())[1:-1]
    return [cell.strip() for cell in cells]


def tables(markdown: str) -> List[List[List[str]]]:
    """Every table: a list of rows (header first, separator dropped), each a list of cells."""
    found, current = [], []
    for line in markdown.splitlines() + [""]:
        if line.startswith("|"):
            if not re.fullmatch(r"\|[-| :]+\|", line.strip()):
                current.append(split_row(line))
        elif current:
            found.append(current)
            current = []
    return found


def _top_level_keys(obj: str) -> FrozenSet[str]:
    """``{a, b: [{x}], c?}`` -> {a, b, c}."""
    inner, depth, parts, part = obj.strip()[1:-1], 0, [], ""
    for ch in inner:
        depth += ch in "[{"
        depth -= ch in "]}"
        if ch == "," and depth == 0:
            parts.append(part)
            part = ""
        else:
            part += ch
    parts.append(part)
    keys = set()
    for item in parts:
        match = _NAME.match(item.strip() + " ")
        if match:
            keys.add(match.group(1))
    return frozenset(keys)


def cell_fields(cell: str) -> Optional[FrozenSet[str]]:
    """The field names a fields/data cell lists, or None when it lists none (``as in ...``, a shape, text)."""
    text = cell.strip()
    if not text or text.startswith("as in") or text == "text":
        return None
    if text in ("—", "-"):
        return frozenset()
    spans = _SPAN.findall(text)
    if spans and spans[0].startswith("{") and text.startswith("`{"):
        return _top_level_keys(spans[0])
    while True:  # parenthesised remarks name values and examples, not fields
        stripped = re.sub(r"\([^()]*\)", "", text)
        if stripped == text:
            break
        text = stripped
    names = set()
    for span in _SPAN.findall(text):
        match = _NAME.match(span + " ")
        if match:
            names.add(match.group(1))
    return frozenset(names) if names else None


def row_names(cell: str) -> List[str]:
    """The event names of a first cell: code spans, shapes mapped to their event."""
    names = []
    for span in _SPAN.findall(cell):
        if span in SHAPES:
            names.append(SHAPES[span])
        elif re.fullmatch(r"[a-z_][a-z0-9_]*", span):
            names.append(span)
    return names


def event_rows(markdown: str) -> Dict[str, List[Row]]:
    """Rows of the event tables, by kind: ``canonical`` (type/event tables) and ``agent`` (the agent projection's)."""
    out: Dict[str, List[Row]] = {"canonical": [], "agent": []}
    for table in tables(markdown):
        header = table[0]
        if header[0] not in EVENT_HEADERS:
            continue
        kind = "agent" if header[-1] == "from canonical event" else "canonical"
        label = " | ".join(header)
        for cells in table[1:]:
            names = row_names(cells[0])
            shape = any(span in SHAPES and span != "event: error" for span in _SPAN.findall(cells[0]))
            fields = cell_fields(cells[1]) if len(names) == 1 and not shape else None  # [DONE] has no fields
            out[kind].append(Row(label, names, fields, cells))
    return out


def js_handlers(source: str) -> Dict[str, str]:
    """``STREAM_HANDLERS`` of static/js/stream_events.js: event type -> ``handler`` or ``ignore``.

    A ``handler`` line reads ``type: (view, event) => view[.part].on_type(event),``."""
    body = re.search(r"export const STREAM_HANDLERS = \{\n(.*?)\n\};", source, re.S)
    if body is None:
        raise AssertionError("STREAM_HANDLERS table not found")
    table = {}
    for line in body.group(1).splitlines():
        line = line.strip()
        if not line or line.startswith("//"):
            continue
        # a handler calls on_<type> of the view itself or of one of its parts (view.agent, view.docs, ...)
        match = re.match(r"([a-z_][a-z0-9_]*): (ignore|\(view, event\) => view(?:\.[a-z]+)?\.on_\1\(event\)),", line)
        if match is None:
            raise AssertionError(f"unexpected line in STREAM_HANDLERS: {line!r}")
        table[match.group(1)] = "ignore" if match.group(2) == "ignore" else "handler"
    return table
