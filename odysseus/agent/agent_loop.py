"""agent_loop: the model calls tools, sees their results and continues until it answers.

Invariants:

- Tool calls and results are paired by the provider's call id *inside the model
  messages* (an assistant message with ``tool_calls``, then one ``tool`` message per
  id). ``tool_start`` / ``tool_output`` are UI projections of that pairing, never the
  pairing itself; a continuation rebuilds the model messages from the saved state.
  A provider id repeated within one round is replaced (for the pairing) by the call's
  server id, so every call of a round keeps its own result.
- Every call gets a server-side id (``server_id``, unguessable) when the model makes it.
  An approval is bound to that id and the hash of the exact call; the answered call is
  the one that runs, and no other call ever runs on its approval (a repeated provider id,
  in the same round or a later one, asks again). ``approve_task`` additionally lets later
  calls of the same tool in this task run without asking, as its button says.
- Every call the model makes is either executed exactly once (its result appended),
  denied (a result saying so), or left pending in a saved state awaiting approval.
  Replay and resume read the run log; they never reach this code, so no tool re-runs.
- Each guard ends the turn with its own event and a short note in the reply that says
  why; ``ctx.metadata["agent"]`` and ``ctx.terminal`` always describe how far it got,
  so the engine's one terminal record carries the completion state even on failure.
- No Flask, no SQL: storage arrives as ``AgentHooks`` callbacks.
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass
from typing import Callable, Generator, Iterator, List, Optional, Tuple

from ..cancel import Cancelled
from ..turns.messages import model_messages
from ..errors import OdysseusError, ProviderError
from ..documents.service import record_touch
from ..events import (
    AGENT_PREP,
    AGENT_STEP,
    ASK_USER,
    BUDGET_EXCEEDED,
    DELTA,
    DOC_SUGGESTIONS,
    DOC_UPDATE,
    EXHIBIT,
    FINISH,
    INTENT_NUDGE_EXHAUSTED,
    LOOP_BREAKER_TRIGGERED,
    MODEL_INFO,
    ROUNDS_EXHAUSTED,
    TOOL_APPROVAL_RESOLVED,
    TOOL_CALL,
    TOOL_CALL_DELTA,
    TOOL_OUTPUT,
    TOOL_START,
    USAGE,
    WEB_SOURCES,
    Event,
    delta,
)
from ..llm.base import ChatRequest
from ..llm.llm_core import Candidate, stream_route
from ..runs.run import RunContext
from ..tools.exhibits import citation_exhibit
from ..tools.registry import ToolContext, ToolRegistry, ToolResult, short_command
from .approvals import DECISIONS, KIND, call_hash, public_call
from .guards import LAST_ROUND, NUDGE, AgentSettings, LoopBreaker, announces_action, call_signature, sanitize
from .tool_runner import run_tool

#: tools whose results are captured as a passive citation exhibit
CITATION_TOOLS = ("web_search", "web_research")


@dataclass
class AgentHooks:
    """What the loop needs done outside itself: storing approvals, a tool context per run."""

    #: (ctx, call, state) -> {"approval_id": ..., "expires_at": ...}; persists the approval
    request_approval: Callable[[RunContext, dict, dict], dict]
    tool_context: Callable[[RunContext], ToolContext]
    #: (ctx, exhibit) -> None; amends an exhibit with the same id saved in earlier replies
    amend_exhibit: Callable[[RunContext, dict], None] = lambda ctx, exhibit: None


@dataclass
class Resolution:
    """The user's answer to an approval, already validated and consumed by the route."""

    approval_id: str
    decision: str
    call: dict


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


def _cap(text: str, limit: int) -> str:
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


def _assistant_message(text: str, calls: List[dict]) -> dict:
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


class AgentLoop:
    """One agent turn over a run context; ``run`` is the generator the engine drives."""

    def __init__(
        self,
        candidates: List[Candidate],
        registry: ToolRegistry,
        settings: AgentSettings,
        hooks: AgentHooks,
        state: dict,
        ctx: RunContext,
        resolution: Optional[Resolution] = None,
        temperature: Optional[float] = None,
    ):
        self.candidates, self.registry, self.settings, self.hooks = candidates, registry, settings, hooks
        self.temperature = temperature
        self.state, self.ctx, self.resolution = state, ctx, resolution
        self.messages: List[dict] = state["messages"]
        self.loop = LoopBreaker(settings.loop_repeats, state.get("loop"))
        self.used = 0
        self.nudges = 0
        self.any_text = False
        self.tool_ctx: Optional[ToolContext] = None
        self.usage_total = {"input_tokens": 0, "output_tokens": 0}
        self.model_ms = self.tools_ms = 0.0
        self.meta = ctx.metadata.setdefault("agent", {})
        self.meta.update({"task_id": state["task_id"], "tools": [], "rounds": [], "nudges": 0})
        self.term = ctx.terminal
        self.term.update(
            {"completion": "running", "rounds": [], "routes": [], "tool_calls": 0, "task_id": state["task_id"]}
        )

    # ------------------------------------------------------------------ driver
    def run(self) -> Iterator[Event]:
        """The turn: prep, optional approval resolution, then rounds until an answer or a guard."""
        started = time.monotonic()
        self.tool_ctx = self.hooks.tool_context(self.ctx)
        prep_ms = round((time.monotonic() - started) * 1000, 2)
        yield Event(
            AGENT_PREP,
            {
                "data": {
                    "prep_ms": prep_ms,
                    "messages": len(self.messages),
                    "tools": self.registry.names(),
                    "continued": self.state["round"] > 0,
                    "max_rounds": self.settings.max_rounds,
                    "max_tool_calls": self.settings.max_tool_calls,
                }
            },
        )
        try:
            yield from self._body()
        except Cancelled:
            self.term["completion"] = "stopped"
            raise
        except ProviderError as exc:
            clean = sanitize(exc.message)
            self._failed(type(exc).__name__, clean, exc.status, retry_after=exc.retry_after)
            if clean != exc.message:
                raise type(exc)(clean, status=exc.status, retry_after=exc.retry_after, provider=exc.provider) from None
            raise
        except OdysseusError as exc:
            self._failed(type(exc).__name__, sanitize(exc.message), exc.status)
            raise
        except Exception as exc:
            self._failed("internal_error", sanitize(type(exc).__name__), 500)
            raise
        finally:
            self.term["usage_total"] = self.usage_total
            self.term["agent_timing"] = {
                "model_ms": round(self.model_ms, 1),
                "tools_ms": round(self.tools_ms, 1),
                "total_ms": round((time.monotonic() - started) * 1000, 1),
            }
            self.term["tool_calls"] = self.used
            self.meta["nudges"] = self.nudges

    def _failed(self, kind: str, message: str, status: Optional[int], retry_after=None) -> None:
        failure = {"kind": kind, "message": message, "status": status, "round": self.state["round"]}
        if retry_after is not None:
            failure["retry_after"] = retry_after
        self.term["completion"] = "failed"
        self.term["failure"] = failure
        self.meta["failure"] = failure

    def _body(self) -> Iterator[Event]:
        settings = self.settings
        if self.resolution is not None:
            if (yield from self._resolve()):
                return
        elif self.state["pending"] and (yield from self._run_pending()):
            return
        rounds_here = 0
        while True:
            self.ctx.cancel.raise_if_cancelled()
            if rounds_here >= settings.max_rounds:
                yield from self._rounds_exhausted(rounds_here)
                return
            rounds_here += 1
            text, calls = yield from self._model_round(self.registry.specs() or None)
            round_no = self.state["round"]
            if not calls:
                self.loop.reset_streak()
                if len(self.registry.names()) and settings.max_nudges and announces_action(text):
                    if self.nudges < settings.max_nudges:
                        self.nudges += 1
                        self.meta["nudges"] = self.nudges
                        self.messages.append({"role": "assistant", "content": text})
                        self.messages.append({"role": "user", "content": NUDGE})
                        continue
                    yield Event(
                        INTENT_NUDGE_EXHAUSTED,
                        {
                            "nudges": self.nudges,
                            "limit": settings.max_nudges,
                            "round": round_no,
                            "text": text.strip()[-200:],
                        },
                    )
                    yield from self._end(
                        "intent_nudge_exhausted",
                        {"nudges": self.nudges},
                        "[Stopped: the model kept announcing an action without calling a tool.]",
                    )
                    return
                self.messages.append({"role": "assistant", "content": text})
                self.term["completion"] = "complete"
                return
            trigger = self.loop.observe(round_no, [call_signature(c["name"], c["arguments"]) for c in calls], text)
            if trigger is not None:
                yield Event(LOOP_BREAKER_TRIGGERED, trigger)
                self.meta["guard"] = {"type": "loop_breaker_triggered", **trigger}
                yield from self._last_round()
                return
            if self.used + len(calls) > settings.max_tool_calls:
                data = {"limit": settings.max_tool_calls, "used": self.used, "requested": len(calls)}
                yield Event(BUDGET_EXCEEDED, data)
                yield from self._end(
                    "budget_exceeded",
                    data,
                    f"[Stopped: the tool-call budget of {settings.max_tool_calls} calls for one request was used up.]",
                )
                return
            self.messages.append(_assistant_message(text, calls))
            self.state["pending"] = list(calls)
            if (yield from self._run_pending()):
                return

    # ------------------------------------------------------------------ model
    def _model_round(self, tools: Optional[List[dict]]) -> Generator[Event, None, Tuple[str, List[dict]]]:
        """One completion; returns (text, calls). Text of later rounds is separated by a blank line."""
        self.state["round"] += 1
        round_no = self.state["round"]
        yield Event(AGENT_STEP, {"round": round_no})
        request = ChatRequest(
            model=self.candidates[0].model, messages=list(self.messages), tools=tools, temperature=self.temperature
        )
        parts: List[str] = []
        calls: List[dict] = []
        previews: dict = {}  # call index -> streaming state of a tool with a preview (documents)
        record = {"round": round_no, "text": "", "tool_calls": [], "finish_reason": None, "route": None}
        self.term["rounds"].append(record)
        started = time.monotonic()
        try:
            for event in stream_route(self.candidates, request, self.ctx.cancel):
                if event.type == TOOL_CALL_DELTA:  # provider-level: only a tool's preview makes events of it
                    if tools:
                        yield from self._preview(previews, event.data)
                    continue
                if event.type == DELTA and not event.data.get("thinking"):
                    if not parts and self.any_text:
                        yield delta("\n\n")
                    parts.append(event.data["delta"])
                    record["text"] = "".join(parts)
                elif event.type == TOOL_CALL and tools:
                    yield from self._preview_done(previews, event.data.get("index", 0))
                    call = normalize_call(event.data, round_no)
                    if any(c["id"] == call["id"] for c in calls):  # a repeated provider id in this round
                        call["provider_id"], call["id"] = call["id"], call["server_id"]
                    calls.append(call)
                    record["tool_calls"].append({"id": call["id"], "name": call["name"]})
                elif event.type == FINISH:
                    record["finish_reason"] = event.data.get("reason")
                elif event.type == MODEL_INFO:
                    record["route"] = event.data.get("route")
                    if record["route"] and record["route"] not in self.term["routes"]:
                        self.term["routes"].append(record["route"])
                elif event.type == USAGE:
                    for key in ("input_tokens", "output_tokens"):
                        value = (event.data.get("data") or {}).get(key)
                        if isinstance(value, int):
                            self.usage_total[key] += value
                yield event
        finally:
            self.model_ms += (time.monotonic() - started) * 1000
        text = "".join(parts)
        if text.strip():
            self.any_text = True
        self.meta["rounds"].append({"round": round_no, "tool_calls": [c["id"] for c in calls]})
        return text, calls

    def _preview(self, previews: dict, data: dict) -> Iterator[Event]:
        """Feed a streaming tool call's argument fragment to its tool's preview, if it has one."""
        entry = previews.setdefault(data.get("index", 0), {"name": "", "pending": "", "preview": None})
        if data.get("name"):
            entry["name"] = data["name"]
        fragment = entry["pending"] + (data.get("arguments_delta") or "")
        if entry["preview"] is None:
            tool = self.registry.get(entry["name"]) if entry["name"] else None
            if tool is None or tool.preview is None:
                entry["pending"] = fragment if not entry["name"] else ""
                return
            assert self.tool_ctx is not None  # set by run() before the first round
            entry["preview"] = tool.preview(self.tool_ctx)
        entry["pending"] = ""
        yield from entry["preview"].feed(fragment)

    def _preview_done(self, previews: dict, index: int) -> Iterator[Event]:
        """The call is complete: its preview's last events."""
        entry = previews.pop(index, None)
        if entry and entry["preview"] is not None:
            yield from entry["preview"].finish()

    def _last_round(self) -> Iterator[Event]:
        """After the loop breaker: one more round without tools so the model can answer."""
        self.messages.append({"role": "user", "content": LAST_ROUND})
        text, _ = yield from self._model_round(None)
        if not text.strip():
            yield from self._note("[Stopped: the model repeated the same tool call without progress.]")
        self.term["completion"] = "loop_breaker_triggered"

    # ------------------------------------------------------------------ tools
    def _run_pending(self) -> Generator[Event, None, bool]:
        """Execute pending calls in order; returns True when the turn ended awaiting an approval."""
        while self.state["pending"]:
            self.ctx.cancel.raise_if_cancelled()
            call = self.state["pending"][0]
            tool = self.registry.get(call["name"])
            if (
                tool is not None
                and tool.needs_approval
                and not call.get("error")
                and call["name"] not in self.state["task_approved"]
            ):
                yield from self._ask(call)
                return True
            self.state["pending"].pop(0)
            yield from self._execute(call)
        return False

    def _execute(self, call: dict) -> Iterator[Event]:
        tool = self.registry.get(call["name"])
        round_no = self.state["round"]
        full = tool.full_command(call["arguments"]) if tool else f"{call['name']}(...)"
        command = short_command(full)
        internal = tool is not None and tool.internal  # e.g. present_exhibit: its events only, no tool row
        if not internal:
            yield Event(
                TOOL_START,
                {
                    "tool": call["name"],
                    "command": command,
                    "full_command": full,
                    "round": round_no,
                    "call_id": call["id"],
                    "server_id": call.get("server_id"),
                    "arguments": call["arguments"],
                },
            )
        started = time.monotonic()
        if tool is None:
            result = ToolResult(
                f"Error: there is no tool named {call['name']!r}. Available: {', '.join(self.registry.names())}",
                exit_code=1,
            )
        elif call.get("error"):
            result = ToolResult(f"Error: {call['error']}", exit_code=1)
        else:
            timeout = tool.timeout if tool.timeout is not None else self.settings.tool_timeout
            assert self.tool_ctx is not None  # set by run() before the first round
            try:
                result = yield from run_tool(
                    tool,
                    call["arguments"],
                    self.tool_ctx,
                    self.ctx.cancel,
                    timeout=timeout,
                    progress_interval=self.settings.progress_interval,
                    round_no=round_no,
                )
            except Cancelled:  # the run was stopped mid-tool: the saved reply still shows the row
                self.meta["tools"].append(
                    {
                        "call_id": call["id"],
                        "server_id": call.get("server_id"),
                        "tool": call["name"],
                        "command": command,
                        "full_command": full,
                        "round": round_no,
                        "cancelled": True,
                    }
                )
                raise
        self.tools_ms += (time.monotonic() - started) * 1000
        self.used += 1
        self.term["tool_calls"] = self.used
        for event in result.events:
            if event.type == EXHIBIT:
                self._record_exhibit(event.data)
            elif event.type in (DOC_UPDATE, DOC_SUGGESTIONS):  # the saved reply names the documents it touched
                record_touch(self.ctx.metadata, event)
            yield event
        display = _cap(result.output, self.settings.display_cap)
        self.messages.append(
            {"role": "tool", "tool_call_id": call["id"], "content": _cap(result.output, self.settings.output_cap)}
        )
        if internal:
            return
        yield Event(
            TOOL_OUTPUT,
            {
                "tool": call["name"],
                "command": command,
                "output": display,
                "exit_code": result.exit_code,
                "round": round_no,
                "call_id": call["id"],
                "server_id": call.get("server_id"),
            },
        )
        yield from self._capture_citations(call, result)
        row = {
            "call_id": call["id"],
            "server_id": call.get("server_id"),
            "tool": call["name"],
            "command": command,
            "full_command": full,
            "output": display,
            "exit_code": result.exit_code,
            "round": round_no,
        }
        for key in ("plan", "url"):
            if key in result.meta:
                row[key] = result.meta[key]
        self.meta["tools"].append(row)
        if "plan" in result.meta:
            self.meta["plan"] = result.meta["plan"]

    def _record_exhibit(self, exhibit: dict) -> None:
        """Keep the newest version of each exhibit id in the saved reply; amend older replies too."""
        saved = self.ctx.metadata.setdefault("exhibits", [])
        for index, old in enumerate(saved):
            if old.get("id") == exhibit.get("id"):
                saved[index] = exhibit
                break
        else:
            saved.append(exhibit)
        self.hooks.amend_exhibit(self.ctx, exhibit)

    def _capture_citations(self, call: dict, result: ToolResult) -> Iterator[Event]:
        """After a web search's result: a passive citation exhibit of its sources (config flag)."""
        if not self.settings.auto_capture_citations or call["name"] not in CITATION_TOOLS or result.exit_code:
            return
        rows = next((e.data.get("data") for e in result.events if e.type == WEB_SOURCES), None) or []
        exhibit = citation_exhibit(call["id"], rows)
        if exhibit is not None:
            self._record_exhibit(exhibit)
            yield Event(EXHIBIT, exhibit)

    # ------------------------------------------------------------------ approvals
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
        yield Event(ASK_USER, {"data": data})
        self.meta["awaiting_approval"] = {
            "approval_id": info["approval_id"],
            "call": public_call(call),
            "expires_at": info["expires_at"],
        }
        self.term["completion"] = "awaiting_approval"
        self.term["approval_id"] = info["approval_id"]
        yield from self._note(f"[Waiting for your approval to run {call['name']}: {short_command(full, 80)}]")

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
                {"call_id": call["id"], "tool": call["name"], "denied": True, "round": self.state["round"]}
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

    def snapshot(self) -> dict:
        """The JSON-able state a continuation rebuilds the model messages from."""
        self.state["loop"] = self.loop.history
        return json.loads(json.dumps(self.state))

    # ------------------------------------------------------------------ endings
    def _note(self, text: str) -> Iterator[Event]:
        yield delta(("\n\n" if self.any_text else "") + text)
        self.any_text = True

    def _end(self, guard: str, data: dict, note: str) -> Iterator[Event]:
        self.meta["guard"] = {"type": guard, **data}
        self.term["completion"] = guard
        yield from self._note(note)

    def _rounds_exhausted(self, rounds: int) -> Iterator[Event]:
        self.meta["continuation"] = self.snapshot()
        yield Event(ROUNDS_EXHAUSTED, {"rounds": rounds, "total_rounds": self.state["round"], "can_continue": True})
        yield from self._end(
            "rounds_exhausted",
            {"rounds": rounds},
            f"[Paused after {rounds} rounds (the round limit). Send continue to pick up where I left off.]",
        )


def agent_turn(
    candidates: List[Candidate],
    registry: ToolRegistry,
    settings: AgentSettings,
    hooks: AgentHooks,
    state: dict,
    resolution: Optional[Resolution] = None,
    temperature: Optional[float] = None,
):
    """Return a turn generator function for the run engine."""

    def turn(ctx: RunContext) -> Iterator[Event]:
        yield from AgentLoop(candidates, registry, settings, hooks, state, ctx, resolution, temperature).run()

    return turn
