"""What the model is shown of an MCP tool: a name within providers' rules and an input schema they accept.

Names: ``mcp__<server>__<tool>``, only ``[a-zA-Z0-9_-]`` (anything else becomes ``_``), at most
64 characters (OpenAI's and Anthropic's limit). A tool whose name, cleaned or cut, meets one already
taken gets ``_2``, ``_3``, ... within the same 64 characters; the mapping back to the server's own
name is kept by the caller, never re-derived from the exposed name.

Schemas (``sanitize``): always an object schema at the top (providers refuse anything else there;
a top-level ``anyOf``/``oneOf``/``allOf``/``not``/``enum`` is dropped), local ``$ref``\\ s
(``#``, ``#/$defs/...``, ``#/definitions/...``) resolved inline, a reference back into itself (a
loop) or past ``MAX_DEPTH`` replaced by an empty schema (anything), only the keywords in ``KEEP``
kept (``$schema``, ``$id``, ``if``/``then``/``else``, ``patternProperties``, vendor ``x-*`` and the
like are what some provider refuses), ``required`` limited to listed properties, and at most
``MAX_NODES`` schema nodes in all.
"""

from __future__ import annotations

import re
from typing import Any, Dict, Iterable, List, Optional, Set, Tuple

MAX_NAME = 64
PREFIX = "mcp"
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
MAX_DEPTH = 12
MAX_NODES = 2000
MAX_DESCRIPTION = 1000
#: keywords every provider we speak to accepts in a function's parameters
KEEP = frozenset(
    {
        "type",
        "properties",
        "required",
        "items",
        "enum",
        "const",
        "description",
        "title",
        "default",
        "anyOf",
        "oneOf",
        "allOf",
        "additionalProperties",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minLength",
        "maxLength",
        "pattern",
        "format",
        "minItems",
        "maxItems",
        "uniqueItems",
        "nullable",
    }
)
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf")
TOP_LEVEL_REFUSED = ("anyOf", "oneOf", "allOf", "enum", "const", "not")


def clean_part(text: str) -> str:
    """``text`` with every character outside ``[A-Za-z0-9_-]`` replaced by ``_``."""
    return _UNSAFE.sub("_", text) or "_"


def exposed_names(server: str, tools: Iterable[str]) -> Dict[str, str]:
    """The server's tool name -> the name the model sees (unique, safe, at most 64 characters)."""
    taken: Set[str] = set()
    out: Dict[str, str] = {}
    for tool in tools:
        if tool in out:
            continue
        base = f"{PREFIX}__{clean_part(server)}__{clean_part(tool)}"[:MAX_NAME]
        name, n = base, 1
        while name in taken:
            n += 1
            suffix = f"_{n}"
            name = base[: MAX_NAME - len(suffix)] + suffix
        taken.add(name)
        out[tool] = name
    return out


def description(server: str, title: str, text: str) -> str:
    """The tool's description for the model: the server's own, naming the server, bounded."""
    body = (text or title or "").strip()
    said = f"[MCP server {server}] {body}" if body else f"A tool of the MCP server {server}."
    return said[:MAX_DESCRIPTION]


class _Sanitizer:
    """One schema's walk: ``$ref`` resolution against its root, loop and size guards."""

    def __init__(self, root: Dict[str, Any]):
        self.root = root
        self.nodes = 0

    def resolve(self, ref: str) -> Optional[Any]:
        """The schema a local reference points at, or None (remote, malformed or missing)."""
        if ref == "#":
            return self.root
        if not ref.startswith("#/"):
            return None
        node: Any = self.root
        for raw in ref[2:].split("/"):
            part = raw.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, dict) or part not in node:
                return None
            node = node[part]
        return node

    def walk(self, schema: Any, depth: int, path: Tuple[str, ...]) -> Dict[str, Any]:
        """A cleaned copy of ``schema`` (``path``: the refs being expanded above it)."""
        self.nodes += 1
        if self.nodes > MAX_NODES or depth > MAX_DEPTH or not isinstance(schema, dict):
            return {}  # true, or past the bounds: any value
        ref = schema.get("$ref")
        if isinstance(ref, str):
            target = self.resolve(ref)
            if target is None or ref in path:  # unresolvable, or a loop: what is said beside the $ref, if anything
                return self._own(schema, depth, path)
            merged = self.walk(target, depth + 1, path + (ref,))
            merged.update(self._own(schema, depth, path))  # siblings of $ref refine it
            return merged
        return self._own(schema, depth, path)

    def _own(self, schema: Dict[str, Any], depth: int, path: Tuple[str, ...]) -> Dict[str, Any]:
        out: Dict[str, Any] = {}
        for key, value in schema.items():
            if key not in KEEP:
                continue
            if key == "properties":
                if isinstance(value, dict):
                    out[key] = {str(n)[:128]: self.walk(s, depth + 1, path) for n, s in list(value.items())[:500]}
            elif key == "items":
                if isinstance(value, dict):
                    out[key] = self.walk(value, depth + 1, path)
            elif key in _SCHEMA_LISTS:
                if isinstance(value, list):
                    items = [self.walk(s, depth + 1, path) for s in value[:50] if isinstance(s, dict)]
                    if items:
                        out[key] = items
            elif key == "additionalProperties":
                if isinstance(value, bool):
                    out[key] = value
                elif isinstance(value, dict):
                    out[key] = self.walk(value, depth + 1, path)
            elif key == "required":
                if isinstance(value, list):
                    out[key] = [str(v) for v in value if isinstance(v, str)]
            elif key == "type":
                if isinstance(value, str) or (isinstance(value, list) and all(isinstance(t, str) for t in value)):
                    out[key] = value
            elif key in ("description", "title"):
                if isinstance(value, str):
                    out[key] = value[:MAX_DESCRIPTION]
            else:
                out[key] = value
        if "required" in out:
            listed = out.get("properties") or {}
            out["required"] = [name for name in out["required"] if name in listed]
            if not out["required"]:
                del out["required"]
        return out


def sanitize(schema: Any) -> Dict[str, Any]:
    """An MCP tool's input schema as every provider accepts it (see the module docstring)."""
    root = schema if isinstance(schema, dict) else {}
    walker = _Sanitizer(root)
    cleaned = walker.walk(root, 0, ("#",))
    for key in TOP_LEVEL_REFUSED:
        cleaned.pop(key, None)
    cleaned["type"] = "object"
    if not isinstance(cleaned.get("properties"), dict):
        cleaned["properties"] = {}
    cleaned.pop("items", None)
    return cleaned


def selected(tools: List[Dict[str, Any]], allow: Optional[Iterable[str]], cap: int) -> List[Dict[str, Any]]:
    """The tools offered: the allow-list's (in the server's order), else all, then at most ``cap``."""
    if allow is not None:
        wanted = set(allow)
        tools = [tool for tool in tools if tool.get("name") in wanted]
    return tools[: max(cap, 0)]
