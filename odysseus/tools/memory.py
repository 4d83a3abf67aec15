"""``manage_memory``: the agent lists, adds, edits, deletes and searches the user's memories.

The tool only sees ``ctx.memory`` (a ``MemoryBook`` bound to the run's owner), so it can never
reach another user's memories; an unknown id is an error result the model reads.
"""

from __future__ import annotations

import json
from typing import List

from ..errors import BadRequest, NotFound
from .registry import Tool, ToolContext, ToolError, ToolResult

ACTIONS = ("list", "add", "edit", "delete", "search")
LIST_LIMIT = 100


def _lines(rows: List[dict]) -> str:
    if not rows:
        return "(no memories)"
    return "\n".join(
        f"{r['id']} [{r['category']}]{' (pinned)' if r['pinned'] else ''}: {r['text']}" for r in rows[:LIST_LIMIT]
    )


def manage_memory(args: dict, ctx: ToolContext) -> ToolResult:
    """Run one memory action for the run's owner."""
    book = ctx.memory
    if book is None:
        raise ToolError("memories are not available here")
    action = args.get("action")
    if action not in ACTIONS:
        raise ToolError(f"action must be one of {', '.join(ACTIONS)}")
    fields = {k: args[k] for k in ("text", "category", "pinned") if k in args and args[k] is not None}
    try:
        if action == "list":
            rows = book.list()
            return ToolResult(_lines(rows), meta={"count": len(rows)})
        if action == "search":
            query = args.get("query")
            if not isinstance(query, str) or not query.strip():
                raise ToolError("search needs a query")
            rows = book.search(query)
            return ToolResult(_lines(rows), meta={"count": len(rows)})
        if action == "add":
            row = book.add(fields)
            return ToolResult(f"Saved memory {row['id']}: {row['text']}", meta={"id": row["id"]})
        memory_id = args.get("id")
        if not isinstance(memory_id, str) or not memory_id:
            raise ToolError(f"{action} needs the memory's id (see list or search)")
        if action == "edit":
            row = book.edit(memory_id, fields)
            return ToolResult(
                f"Updated memory {row['id']}: {json.dumps(row['text'], ensure_ascii=False)}", meta={"id": row["id"]}
            )
        book.delete(memory_id)
        return ToolResult(f"Deleted memory {memory_id}.", meta={"id": memory_id})
    except (BadRequest, NotFound) as exc:
        raise ToolError(exc.message) from None


def memory_tools() -> List[Tool]:
    """``manage_memory``."""
    return [
        Tool(
            "manage_memory",
            "Manage the user's long-term memories (short facts and preferences kept across chats): list them, "
            "search them, add one when the user asks you to remember something, edit or delete one by id.",
            {
                "type": "object",
                "properties": {
                    "action": {"type": "string", "enum": list(ACTIONS)},
                    "text": {"type": "string", "description": "the fact (add, edit)"},
                    "category": {"type": "string", "description": "a short category such as preferences (add, edit)"},
                    "pinned": {"type": "boolean", "description": "always include it in context (add, edit)"},
                    "id": {"type": "string", "description": "the memory id (edit, delete)"},
                    "query": {"type": "string", "description": "words to search for (search)"},
                },
                "required": ["action"],
            },
            manage_memory,
            describe=lambda a: f"{a.get('action', '')} {a.get('text') or a.get('query') or a.get('id') or ''}".strip(),
        )
    ]
