"""Exhibits: typed, agent-authored displays (spec: agent-stream-and-detached-runs.md).

``present_exhibit`` is an *internal* tool: a valid call makes the turn emit one
``exhibit`` event (``{schema_version: 1, id, title?, layout: "stack", elements}``) instead
of a tool row; an invalid one emits nothing and its validation error goes back to the
model as the tool result, so it can present again. Known element types (``mermaid``,
``choice``, ``table``, ``citation``) are validated; unknown types pass through for
clients to show as source. ``citation_exhibit`` builds the passive citation that is
captured automatically after a web search.
"""

from __future__ import annotations

import re
import secrets
from typing import Dict, List, Optional

from ..events import EXHIBIT, Event
from .registry import Tool, ToolContext, ToolError, ToolResult

SCHEMA_VERSION = 1
LAYOUTS = ("stack",)
KINDS = ("active", "passive")
SOURCE_TYPES = ("web", "memory", "doc")
EXHIBIT_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,100}$")
MAX_ELEMENTS = 50
MAX_TEXT = 20_000


def _text(value, where: str, required: bool = True, limit: int = MAX_TEXT) -> Optional[str]:
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value.strip()):
        raise ToolError(f"{where} must be a non-empty string")
    if len(value) > limit:
        raise ToolError(f"{where} is longer than {limit} characters")
    return value


def _cell(value, where: str):
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise ToolError(f"{where} must be a string, number, boolean or null")


def _mermaid(el: dict, where: str) -> dict:
    out = {"type": "mermaid", "content": _text(el.get("content"), f"{where}.content")}
    if el.get("title") is not None:
        out["title"] = _text(el["title"], f"{where}.title", limit=300)
    return out


def _choice(el: dict, where: str) -> dict:
    options = el.get("options")
    if not isinstance(options, list) or not 1 <= len(options) <= 20:
        raise ToolError(f"{where}.options must be a list of 1 to 20 strings")
    out: dict = {
        "type": "choice",
        "options": [_text(o, f"{where}.options[{i}]", limit=500) for i, o in enumerate(options)],
    }
    if el.get("prompt") is not None:
        out["prompt"] = _text(el["prompt"], f"{where}.prompt", limit=1000)
    return out


def _table(el: dict, where: str) -> dict:
    columns, rows = el.get("columns"), el.get("rows")
    if not isinstance(columns, list) or not 1 <= len(columns) <= 50:
        raise ToolError(f"{where}.columns must be a list of 1 to 50 column names")
    names = [_text(c, f"{where}.columns[{i}]", limit=200) for i, c in enumerate(columns)]
    if not isinstance(rows, list) or len(rows) > 1000:
        raise ToolError(f"{where}.rows must be a list of at most 1000 rows")
    checked = []
    for r, row in enumerate(rows):
        if not isinstance(row, list) or len(row) != len(names):
            raise ToolError(f"{where}.rows[{r}] must be a list of {len(names)} cells (one per column)")
        checked.append([_cell(v, f"{where}.rows[{r}][{c}]") for c, v in enumerate(row)])
    out: dict = {"type": "table", "columns": names, "rows": checked}
    if el.get("caption") is not None:
        out["caption"] = _text(el["caption"], f"{where}.caption", limit=500)
    return out


def _source(src, where: str) -> dict:
    if not isinstance(src, dict):
        raise ToolError(f"{where} must be an object with a label")
    out = {"label": _text(src.get("label"), f"{where}.label", limit=500)}
    url = src.get("url")
    if url is not None:
        if not isinstance(url, str) or not re.match(r"^https?://\S+$", url):
            raise ToolError(f"{where}.url must be an http(s) URL")
        out["url"] = url
    if src.get("quote") is not None:
        out["quote"] = _text(src["quote"], f"{where}.quote", limit=5000)
    kind = src.get("kind", "passive")
    if kind not in KINDS:
        raise ToolError(f"{where}.kind must be active or passive")
    out["kind"] = kind
    if src.get("source_type") is not None:
        if src["source_type"] not in SOURCE_TYPES:
            raise ToolError(f"{where}.source_type must be one of {', '.join(SOURCE_TYPES)}")
        out["source_type"] = src["source_type"]
    return out


def _citation(el: dict, where: str) -> dict:
    sources = el.get("sources")
    if not isinstance(sources, list) or not 1 <= len(sources) <= 100:
        raise ToolError(f"{where}.sources must be a list of 1 to 100 sources")
    return {"type": "citation", "sources": [_source(s, f"{where}.sources[{i}]") for i, s in enumerate(sources)]}


VALIDATORS = {"mermaid": _mermaid, "choice": _choice, "table": _table, "citation": _citation}


def validate_exhibit(args: dict) -> dict:
    """The normalised exhibit for a ``present_exhibit`` call; raises ToolError naming what is wrong."""
    if not isinstance(args, dict):
        raise ToolError("present_exhibit takes an object with elements")
    exhibit_id = args.get("id")
    if exhibit_id is None:
        exhibit_id = "exh_" + secrets.token_urlsafe(8)
    elif not isinstance(exhibit_id, str) or not EXHIBIT_ID.match(exhibit_id):
        raise ToolError("id must be 1-100 characters of letters, digits, _ . : -")
    layout = args.get("layout", "stack")
    if layout not in LAYOUTS:
        raise ToolError(f"layout must be one of {', '.join(LAYOUTS)}")
    elements = args.get("elements")
    if not isinstance(elements, list) or not 1 <= len(elements) <= MAX_ELEMENTS:
        raise ToolError(f"elements must be a list of 1 to {MAX_ELEMENTS} elements")
    checked = []
    for i, el in enumerate(elements):
        where = f"elements[{i}]"
        if not isinstance(el, dict) or not isinstance(el.get("type"), str) or not el["type"]:
            raise ToolError(f"{where} must be an object with a type")
        validator = VALIDATORS.get(el["type"])
        checked.append(validator(el, where) if validator else dict(el))  # unknown types pass through
    exhibit = {"schema_version": SCHEMA_VERSION, "id": exhibit_id, "layout": layout, "elements": checked}
    if args.get("title") is not None:
        exhibit["title"] = _text(args["title"], "title", limit=300)
    return exhibit


def present_exhibit(args: dict, ctx: ToolContext) -> ToolResult:
    """Validate and publish an exhibit."""
    exhibit = validate_exhibit(args)
    return ToolResult(
        f"Exhibit {exhibit['id']} presented to the user.",
        events=[Event(EXHIBIT, exhibit)],
        meta={"exhibit_id": exhibit["id"]},
    )


def citation_exhibit(tool_call_id: str, rows: List[Dict]) -> Optional[dict]:
    """The passive web citation for a search's result rows (deduplicated by URL), or None."""
    seen, sources = set(), []
    for row in rows:
        url = row.get("url") if isinstance(row, dict) else None
        if not isinstance(url, str) or not re.match(r"^https?://\S+$", url) or url in seen:
            continue
        seen.add(url)
        source = {"label": (row.get("title") or url)[:500], "url": url, "kind": "passive", "source_type": "web"}
        snippet = row.get("snippet") or row.get("content")
        if isinstance(snippet, str) and snippet.strip():
            source["quote"] = snippet.strip()[:1000]
        sources.append(source)
    if not sources:
        return None
    return {
        "schema_version": SCHEMA_VERSION,
        "id": f"exh_src_{tool_call_id}",
        "layout": "stack",
        "elements": [{"type": "citation", "sources": sources}],
    }


ELEMENT_DOC = (
    "Element types: mermaid {content, title?}; choice {prompt?, options[]} (a click sends the option "
    "as the user's next message); table {columns[], rows[][], caption?}; citation {sources: [{label, "
    "url?, quote?, kind: active|passive (default passive), source_type?: web|memory|doc}]}. "
    "Re-using an id amends that exhibit in place."
)


def exhibit_tools() -> List[Tool]:
    """The internal ``present_exhibit`` tool."""
    return [
        Tool(
            name="present_exhibit",
            description="Show the user a typed exhibit (diagram, choices, table, citations) instead of plain text. "
            + ELEMENT_DOC,
            parameters={
                "type": "object",
                "properties": {
                    "id": {"type": "string", "description": "stable id; re-use it to amend an exhibit"},
                    "title": {"type": "string"},
                    "layout": {"type": "string", "enum": list(LAYOUTS)},
                    "elements": {"type": "array", "items": {"type": "object"}, "minItems": 1},
                },
                "required": ["elements"],
            },
            run=present_exhibit,
            internal=True,
        )
    ]
