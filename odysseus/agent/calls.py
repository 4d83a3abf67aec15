"""A task's calls as the agent loop keeps them: the initial state, server ids, normalised provider calls
and the assistant message that pairs a round's calls with their results (by call id)."""

from __future__ import annotations

import json
import secrets
from typing import List

from ..turns.messages import model_messages
from .guards import AgentSettings


def initial_state(history: List[dict], settings: AgentSettings) -> dict:
    """The state of a new task: model messages from the session history."""
    return {
        "task_id": "task_" + secrets.token_urlsafe(8),
        "messages": model_messages(history, settings.system_prompt),
        "pending": [],
        "round": 0,
        "task_approved": [],
        "loop": [],
    }


def cap(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, saying how many more there were."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[truncated: {len(text) - limit} more characters]"


def new_server_id() -> str:
    """A server-side tool call id (96 random bits); the provider's id is never trusted to be unique."""
    return "tc_" + secrets.token_urlsafe(12)


def normalize_call(data: dict, round_no: int) -> dict:
    """A provider tool call as the loop keeps it: ids, name, parsed arguments (or the parse error)."""
    call = {
        "id": data.get("id") or f"call_{round_no}_{data.get('index', 0)}",
        "server_id": new_server_id(),
        "name": data.get("name") or "",
    }
    args = data.get("arguments")
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError:
            call["error"] = "the arguments were not valid JSON"
            args = {"_raw": args[:2000]}
    if not isinstance(args, dict):
        call["error"] = "the arguments must be a JSON object"
        args = {"_raw": args}
    call["arguments"] = args
    return call


def assistant_message(text: str, calls: List[dict]) -> dict:
    """The assistant message of a round that called tools (the model messages' pairing, by call id)."""
    return {
        "role": "assistant",
        "content": text or None,
        "tool_calls": [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": json.dumps(c["arguments"], ensure_ascii=False)},
            }
            for c in calls
        ],
    }
