"""One OpenAI-compatible fake model server answering each agent from its own script.

Every agent a test creates carries ``[agent:NAME]`` in its system prompt; ``AgentScripts`` is
a ``FakeProvider`` chooser that reads that marker from the request's system message and
answers with the next reply scripted for that agent (or a plain default). Requests are kept
per agent, with the fake's ``Record`` so a test can see when the client disconnected.
"""

from __future__ import annotations

import json
import re
import threading
from typing import Dict, List, Optional

import requests
from fakeproviders import FakeProvider, Record, Reply, openai_chunk, openai_text

MARKER = re.compile(r"\[agent:([a-z_]+)\]")
USAGE = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}


def text(*pieces: str, delay: float = 0.0) -> Reply:
    """A plain text answer, one chunk per piece, ``delay`` seconds before each chunk."""
    return Reply(chunks=openai_text(*pieces, usage=USAGE), delay=delay)


def tools(*calls: tuple, say: str = "", delay: float = 0.0) -> Reply:
    """An answer calling tools: each call is (call_id, name, arguments dict)."""
    chunks = [openai_chunk({"role": "assistant", "content": ""})]
    if say:
        chunks.append(openai_chunk({"content": say}))
    for index, (call_id, name, args) in enumerate(calls):
        raw = json.dumps(args)
        chunks.append(
            openai_chunk(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call_id,
                            "type": "function",
                            "function": {"name": name, "arguments": raw[: len(raw) // 2]},
                        }
                    ]
                }
            )
        )
        chunks.append(openai_chunk({"tool_calls": [{"index": index, "function": {"arguments": raw[len(raw) // 2 :]}}]}))
    chunks += [openai_chunk({}, "tool_calls"), openai_chunk(None, usage=USAGE), "data: [DONE]\n\n"]
    return Reply(chunks=chunks, delay=delay)


def delegate(call_id: str, agent_id: str, task: str) -> tuple:
    """A delegate_to call."""
    return (call_id, "delegate_to", {"agent_id": agent_id, "task": task})


def stall(*pieces: str) -> Reply:
    """Send some text, then hold the connection open until the client leaves."""
    return Reply(
        chunks=[openai_chunk({"role": "assistant", "content": ""})] + [openai_chunk({"content": p}) for p in pieces],
        end="stall",
    )


class AgentScripts:
    """The chooser: per-agent reply queues, per-agent request records."""

    def __init__(self):
        self.lock = threading.Lock()
        self.queues: Dict[str, List[Reply]] = {}
        self.seen: Dict[str, List[Record]] = {}

    def script(self, agent: str, *replies: Reply) -> "AgentScripts":
        """Queue replies for ``agent``."""
        with self.lock:
            self.queues.setdefault(agent, []).extend(replies)
        return self

    def reset(self) -> None:
        """Forget every script and request."""
        with self.lock:
            self.queues.clear()
            self.seen.clear()

    @staticmethod
    def agent_of(record: Record) -> Optional[str]:
        """The agent named in the request's system message."""
        messages = (record.body or {}).get("messages") or [] if isinstance(record.body, dict) else []
        system = next((m.get("content") or "" for m in messages if m.get("role") == "system"), "")
        found = MARKER.search(system)
        return found.group(1) if found else None

    def requests_of(self, agent: str) -> List[Record]:
        """The requests ``agent`` made so far."""
        with self.lock:
            return list(self.seen.get(agent, []))

    def __call__(self, record: Record) -> Reply:
        agent = self.agent_of(record) or "?"
        with self.lock:
            self.seen.setdefault(agent, []).append(record)
            queue = self.queues.get(agent) or []
            return queue.pop(0) if queue else text(f"({agent} has no script)")


def make_agent(base: str, agent_id: str, prompt: str = "", **fields) -> dict:
    """Create an agent whose requests the fake can tell apart."""
    response = requests.post(
        base + "/api/agents",
        timeout=10,
        json={
            "agent_id": agent_id,
            "name": agent_id,
            "system_prompt": f"[agent:{agent_id}] {prompt}".strip(),
            **fields,
        },
    )
    assert response.status_code in (201, 409), response.text
    return response.json()


def make_workflow(base: str, workflow_id: str, supervisor: str, specialists: List[str], **fields) -> dict:
    """Create (or replace) a workflow of existing agents."""
    requests.delete(f"{base}/api/alloy/workflows/{workflow_id}", timeout=10)
    members = [{"agent_id": supervisor, "role": "supervisor"}] + [
        {"agent_id": a, "role": "specialist", "delegation_hint": f"{a} helps"} for a in specialists
    ]
    response = requests.post(
        base + "/api/alloy/workflows",
        timeout=10,
        json={
            "id": workflow_id,
            "name": workflow_id.title(),
            "supervisor_agent_id": supervisor,
            "members": members,
            **fields,
        },
    )
    assert response.status_code == 201, response.text
    return response.json()["workflow"]


__all__ = ["AgentScripts", "FakeProvider", "delegate", "make_agent", "make_workflow", "stall", "text", "tools"]
