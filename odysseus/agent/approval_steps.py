"""Approvals inside an agent turn: asking (the state saved, ``ask_user``, the turn ends) and applying the
user's answer to the one call it was bound to. A part of ``AgentLoop`` (which mixes it in); the
attributes and methods below are the loop's."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generator, Iterator, List, Optional

from ..errors import OdysseusError
from ..events import ASK_USER, TOOL_APPROVAL_RESOLVED, Event
from ..runs.run import RunContext
from ..tools.registry import ToolRegistry, short_command
from .approvals import DECISIONS, KIND, call_hash, public_call

if TYPE_CHECKING:
    from .agent_loop import AgentHooks, Resolution


class ApprovalSteps:
    """``AgentLoop``'s approval steps (see the module docstring)."""

    registry: ToolRegistry
    hooks: "AgentHooks"
    ctx: RunContext
    state: dict
    meta: dict
    term: dict
    messages: List[dict]
    resolution: Optional["Resolution"]
    text_len: int

    if TYPE_CHECKING:  # provided by AgentLoop and ToolSteps

        def snapshot(self) -> dict: ...
        def _note(self, text: str) -> Iterator[Event]: ...
        def _execute(self, call: dict) -> Iterator[Event]: ...
        def _run_pending(self) -> Generator[Event, None, bool]: ...

    def _ask(self, call: dict) -> Iterator[Event]:
        """Persist the state with an approval request, emit ``ask_user`` and end the turn."""
        tool = self.registry.get(call["name"])
        full = tool.full_command(call["arguments"]) if tool else call["name"]
        info = self.hooks.request_approval(self.ctx, call, self.snapshot())
        data = {
            "kind": KIND,
            "approval_id": info["approval_id"],
            "call": public_call(call),
            "call_hash": call_hash(call),
            "tool": call["name"],
            "command": short_command(full),
            "full_command": full,
            "expires_at": info["expires_at"],
            "decisions": list(DECISIONS),
            "round": self.state["round"],
        }
        if tool is not None and tool.origin:  # an MCP server's tool: the card names the server and its tool
            data["mcp"] = dict(tool.origin)
        yield Event(ASK_USER, {"data": data})
        self._end_awaiting(call, info, **({"mcp": dict(tool.origin)} if tool is not None and tool.origin else {}))
        yield from self._note(f"[Waiting for your approval to run {call['name']}: {short_command(full, 80)}]")

    def _end_awaiting(self, call: dict, info: dict, **ids: Any) -> None:
        """Mark the turn as ended awaiting ``info``'s approval of ``call`` (the reply's meta and terminal).

        ``ids`` name where in a workflow the call was asked for (a delegation's ids), if anywhere.
        """
        self.meta["awaiting_approval"] = {
            "approval_id": info["approval_id"],
            "call": public_call(call),
            "expires_at": info["expires_at"],
            **ids,
        }
        self.term["completion"] = "awaiting_approval"
        self.term["approval_id"] = info["approval_id"]

    def _resolve(self) -> Generator[Event, None, bool]:
        """Apply the user's answer to the pending call; returns True when the turn ended again."""
        res = self.resolution
        assert res is not None  # _body resolves only with an answer
        pending = self.state["pending"]
        if (
            not pending
            or pending[0].get("server_id") != res.call.get("server_id")
            or call_hash(pending[0]) != call_hash(res.call)
        ):
            raise OdysseusError("the saved task does not match this approval", status=409)
        call = pending[0]
        yield Event(
            TOOL_APPROVAL_RESOLVED,
            {
                "decision": res.decision,
                "approval_id": res.approval_id,
                "call_id": call["id"],
                "server_id": call.get("server_id"),
                "tool": call["name"],
            },
        )
        self.meta["approval"] = {
            "approval_id": res.approval_id,
            "decision": res.decision,
            "call_id": call["id"],
            "server_id": call.get("server_id"),
        }
        if res.decision == "deny":
            pending.pop(0)
            self.messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call["id"],
                    "content": "The user denied this tool call; it was not run.",
                }
            )
            self.meta["tools"].append(
                {
                    "call_id": call["id"],
                    "tool": call["name"],
                    "denied": True,
                    "round": self.state["round"],
                    "text_offset": self.text_len,
                }
            )
        else:
            if res.decision == "approve_task" and call["name"] not in self.state["task_approved"]:
                self.state["task_approved"].append(call["name"])
            self.ctx.cancel.raise_if_cancelled()
            # The approved call itself runs here, by identity: nothing is remembered that
            # another call (one with the same provider id, say) could match.
            pending.pop(0)
            yield from self._execute(call)
        return (yield from self._run_pending())
