"""One delegation (a specialist's child turn) and the book of every delegation of a run.

``Delegation`` is owned by the worker that drives the child loop: ``relabel`` turns the
child's canonical events into the parent's delegation events (text -> ``delegation_chunk``,
tool rows -> ``delegation_tool_call`` / ``delegation_tool_result``), keeps usage and cost,
and passes through what the user must see at top level (exhibits, the approval card,
nested delegation events). Everything else a child produces (model_info, usage, finish,
progress) stays inside it, so the run's own model and usage records remain the supervisor's.

``DelegationBook`` is the fold of the delegation events the run actually logged: the
saved reply's ``metadata["delegations"]`` is built from exactly what a live client saw,
so history renders the same as live.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from typing import Dict, List, Optional

from ..cancel import CancelToken
from ..events import (
    ASK_USER,
    DELEGATION_CHUNK,
    DELEGATION_COMPLETE,
    DELEGATION_EVENTS,
    DELEGATION_START,
    DELEGATION_TOOL_CALL,
    DELEGATION_TOOL_RESULT,
    DELTA,
    EXHIBIT,
    METRICS,
    TOOL_APPROVAL_RESOLVED,
    TOOL_OUTPUT,
    TOOL_START,
    USAGE,
    Event,
)

PREVIEW = 500
#: characters of a specialist's streamed text kept in the saved record
CONTENT_CAP = 100_000
#: child events shown at top level as they are (with the delegation named)
PASS_THROUGH = frozenset({EXHIBIT, ASK_USER, TOOL_APPROVAL_RESOLVED}) | DELEGATION_EVENTS


def new_delegation_id() -> str:
    """An unguessable delegation id."""
    return "dlg_" + secrets.token_urlsafe(12)


def _text(value) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


class Delegation:
    """A specialist's child turn: identity, cancel token, timing, and what it produced."""

    def __init__(
        self,
        *,
        call_id: str,
        target: str,
        task: str,
        depth: int,
        supervisor: str,
        parent_delegation_id: Optional[str],
        delegation_id: Optional[str] = None,
        resume: Optional[dict] = None,
    ):
        self.id = delegation_id or new_delegation_id()
        self.call_id, self.target, self.task, self.depth = call_id, target, task, depth
        self.supervisor, self.parent_delegation_id = supervisor, parent_delegation_id
        self.resume = resume  # {"state": child loop state} when continuing after an approval
        self.token = CancelToken()
        self.started = 0.0
        self.deadline = 0.0
        self.timed_out = False
        self.abandoned = False
        self.status: Optional[str] = None  # success | failed, set by the worker before it reports done
        self.error: Optional[str] = None
        self.result = ""  # the final text: the supervisor's tool result
        self.text_parts: List[str] = []
        self.tokens_input = 0
        self.tokens_output = 0
        self.cost: Optional[float] = None
        self.tool_started: Dict[Optional[str], float] = {}  # by call id (a provider may send none)
        self.approval: Optional[dict] = None  # {"call", "state"} when the child asked for an approval
        self.ask: Optional[Event] = None  # the child's ask_user, held until the approval is stored

    @property
    def ids(self) -> dict:
        """The two fields every delegation event carries."""
        return {"delegation_id": self.id, "target_agent_id": self.target}

    def start_event(self) -> Event:
        """``delegation_start``."""
        data = {
            **self.ids,
            "task": self.task,
            "depth": self.depth,
            "tool_call_id": self.call_id,
            "supervisor_agent_id": self.supervisor,
        }
        if self.parent_delegation_id:
            data["parent_delegation_id"] = self.parent_delegation_id
        if self.resume is not None:
            data["resumed"] = True
        return Event(DELEGATION_START, data)

    def complete_event(self) -> Event:
        """``delegation_complete`` from the outcome the worker (or the timeout) recorded."""
        data = {
            **self.ids,
            "status": self.status or "failed",
            "result_preview": self.result[:PREVIEW],
            "tokens_input": self.tokens_input,
            "tokens_output": self.tokens_output,
            "duration_ms": round((time.monotonic() - self.started) * 1000, 1),
            "tool_call_id": self.call_id,
        }
        if self.error:
            data["error"] = self.error
        if self.cost is not None:
            data["cost"] = round(self.cost, 8)
        return Event(DELEGATION_COMPLETE, data)

    def defer_approval(self, ctx, call: dict, state: dict) -> dict:
        """The child's ``request_approval`` hook: remember the call; the supervisor stores it after the round."""
        self.approval = {"call": call, "state": state}
        return {"approval_id": "pending", "expires_at": 0}

    def relabel(self, event: Event) -> List[Event]:
        """The parent's events for one child event (often none)."""
        kind, data = event.type, event.data
        if kind == DELTA:
            if data.get("thinking"):
                return []
            self.text_parts.append(data["delta"])
            return [Event(DELEGATION_CHUNK, {**self.ids, "content": data["delta"]})]
        if kind == TOOL_START:
            self.tool_started[data.get("call_id")] = time.monotonic()
            return [
                Event(
                    DELEGATION_TOOL_CALL,
                    {
                        **self.ids,
                        "tool": data.get("tool"),
                        "arguments": data.get("arguments", {}),
                        "tool_call_id": data.get("call_id"),
                        "command": data.get("command"),
                    },
                )
            ]
        if kind == TOOL_OUTPUT:
            began = self.tool_started.pop(data.get("call_id"), time.monotonic())
            return [
                Event(
                    DELEGATION_TOOL_RESULT,
                    {
                        **self.ids,
                        "tool": data.get("tool"),
                        "content": _text(data.get("output"))[:PREVIEW],
                        "success": data.get("exit_code") in (0, None),
                        "duration_ms": round((time.monotonic() - began) * 1000, 1),
                        "tool_call_id": data.get("call_id"),
                    },
                )
            ]
        if kind == USAGE:
            usage = data.get("data") or {}
            self.tokens_input += usage.get("input_tokens") or 0
            self.tokens_output += usage.get("output_tokens") or 0
            return []
        if kind == METRICS:
            cost = (data.get("data") or {}).get("cost")
            if isinstance(cost, (int, float)):
                self.cost = (self.cost or 0.0) + cost
            return []
        if kind == ASK_USER:
            self.ask = Event(kind, {"data": {**(data.get("data") or {}), **self.ids}})
            return [self.ask]
        if kind == TOOL_APPROVAL_RESOLVED:
            return [Event(kind, {**data, **self.ids})]
        if kind in PASS_THROUGH:
            return [event]
        return []

    @property
    def text(self) -> str:
        """Everything the specialist wrote."""
        return "".join(self.text_parts)


class DelegationBook:
    """Every delegation record of one run (any depth), folded from the logged delegation events."""

    def __init__(self, records: List[dict]):
        self.records = records  # the list saved as metadata["delegations"]
        self._by_id: Dict[str, dict] = {r["delegation_id"]: r for r in records if r.get("delegation_id")}
        self.lock = threading.Lock()

    def get(self, delegation_id: str) -> Optional[dict]:
        """The record of a delegation, if it started."""
        return self._by_id.get(delegation_id)

    def apply(self, event: Event) -> None:
        """Fold one delegation event into its record."""
        data = event.data
        with self.lock:
            record = self._by_id.get(data.get("delegation_id") or "")
            if event.type == DELEGATION_START or record is None:
                record = {
                    "delegation_id": data.get("delegation_id"),
                    "target_agent_id": data.get("target_agent_id"),
                    "status": "running",
                    "content": "",
                    "tools": [],
                }
                for key in ("task", "depth", "tool_call_id", "supervisor_agent_id", "parent_delegation_id", "resumed"):
                    if key in data:
                        record[key] = data[key]
                self.records.append(record)
                self._by_id[record["delegation_id"]] = record
            if event.type == DELEGATION_CHUNK:
                if len(record["content"]) < CONTENT_CAP:
                    record["content"] = (record["content"] + data.get("content", ""))[:CONTENT_CAP]
            elif event.type == DELEGATION_TOOL_CALL:
                record["tools"].append({k: data.get(k) for k in ("tool_call_id", "tool", "arguments", "command")})
            elif event.type == DELEGATION_TOOL_RESULT:
                row = next(
                    (
                        r
                        for r in reversed(record["tools"])
                        if r.get("tool_call_id") == data.get("tool_call_id") and "success" not in r
                    ),
                    None,
                )
                if row is None:
                    row = {"tool_call_id": data.get("tool_call_id"), "tool": data.get("tool")}
                    record["tools"].append(row)
                row.update({k: data.get(k) for k in ("content", "success", "duration_ms")})
            elif event.type == DELEGATION_COMPLETE:
                for key in (
                    "status",
                    "error",
                    "result_preview",
                    "tokens_input",
                    "tokens_output",
                    "duration_ms",
                    "cost",
                    "refused",
                    "task",
                    "depth",
                    "tool_call_id",
                    "supervisor_agent_id",
                    "parent_delegation_id",
                ):
                    if key in data:
                        record[key] = data[key]

    def mark_open(self, status: str) -> None:
        """Give every record still running ``status`` (a stop, an approval pause)."""
        with self.lock:
            for record in self.records:
                if record.get("status") == "running":
                    record["status"] = status

    def totals(self) -> dict:
        """Tokens and cost over every delegation (a stopped one counts what it had used)."""
        with self.lock:
            done = list(self.records)
            cost = [r["cost"] for r in done if isinstance(r.get("cost"), (int, float))]
            return {
                "input_tokens": sum(r.get("tokens_input") or 0 for r in done),
                "output_tokens": sum(r.get("tokens_output") or 0 for r in done),
                "cost": round(sum(cost), 8) if cost else None,
            }
