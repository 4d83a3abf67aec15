"""What a share link shows: a chat's title and the messages of its selected branch, as they are now.

A snapshot is taken once, when the link is made, and stored with it: later messages, edits and
renames never reach it. It keeps only what the chat's reader saw as the conversation: each user
and assistant message's ``role`` and ``content``, and an assistant message's exhibits (tables,
diagrams, choices, citations). Nothing else of the owner's leaves with it: no reasoning, tool
calls or their output, attachments, documents, memories, run or model details, ids or owner.
No Flask, no SQL.
"""

from __future__ import annotations

from typing import Any, Dict, List

from ..errors import BadRequest

#: the longest chat a link is made for (its selected branch), like an import's limit
MAX_SHARED_MESSAGES = 5000
SHOWN_ROLES = ("user", "assistant")


def _exhibits(metadata: Dict[str, Any]) -> List[dict]:
    """The message's exhibit cards (the page's registry renders them; unknown ones show as source)."""
    exhibits = metadata.get("exhibits")
    if not isinstance(exhibits, list):
        return []
    return [exhibit for exhibit in exhibits if isinstance(exhibit, dict)]


def _hidden(message: dict) -> bool:
    """Messages the page does not show as conversation: approval answers, notes, empty replies."""
    if message.get("role") not in SHOWN_ROLES:
        return True  # system notes (a compaction's summary) are not part of what was said
    metadata = message.get("metadata") or {}
    if (metadata.get("agent_action") or {}).get("tool_approval"):
        return True  # "Approve" sent by a button: the page shows no bubble for it either
    return message["role"] == "assistant" and not (message.get("content") or "").strip() and not _exhibits(metadata)


def build_snapshot(title: str, messages: List[dict]) -> Dict[str, Any]:
    """``{title, messages: [{role, content, exhibits?}]}`` from the selected branch's messages, in order.

    BadRequest when nothing would be shown (an empty chat).
    """
    shown: List[Dict[str, Any]] = []
    for message in messages:
        if _hidden(message):
            continue
        item: Dict[str, Any] = {"role": message["role"], "content": message.get("content") or ""}
        exhibits = _exhibits(message.get("metadata") or {}) if message["role"] == "assistant" else []
        if exhibits:
            item["exhibits"] = exhibits
        shown.append(item)
    if not shown:
        raise BadRequest("this chat has no messages to share yet")
    return {"title": title, "messages": shown}
