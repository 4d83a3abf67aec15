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

The loop is three parts: this module (the driver, model rounds, guards and endings),
``tool_steps`` (one call's execution) and ``approval_steps`` (asking and applying an answer);
``calls`` keeps the task's state and call helpers.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Callable, Generator, Iterator, List, Optional, Tuple

from ..cancel import Cancelled
from ..errors import OdysseusError, ProviderError
from ..events import (
    AGENT_PREP,
    AGENT_STEP,
    BUDGET_EXCEEDED,
    DELTA,
    FINISH,
    INTENT_NUDGE_EXHAUSTED,
    LOOP_BREAKER_TRIGGERED,
    MODEL_INFO,
    NOTICE,
    ROUNDS_EXHAUSTED,
    TOOL_CALL,
    TOOL_CALL_DELTA,
    USAGE,
    Event,
    delta,
)
from ..llm.base import ChatRequest
from ..llm.llm_core import Candidate, stream_route
from ..runs.run import RunContext
from ..tools.registry import ToolContext, ToolRegistry
from .approval_steps import ApprovalSteps
from .calls import assistant_message, initial_state, normalize_call
from .guards import LAST_ROUND, NUDGE, AgentSettings, LoopBreaker, announces_action, call_signature, sanitize
from .tool_steps import ToolSteps

#: the names other modules import from here (the calls' helpers live in ``calls``)
__all__ = ["AgentHooks", "AgentLoop", "Resolution", "agent_turn", "initial_state"]


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


#: the least reply a round must have room for, after its messages and tool schemas (by estimate)
MIN_REPLY_TOKENS = 256


class AgentLoop(ToolSteps, ApprovalSteps):
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
        budget: Optional[Callable[[List[dict], Optional[List[dict]]], int]] = None,
    ):
        self.candidates, self.registry, self.settings, self.hooks = candidates, registry, settings, hooks
        self.temperature = temperature
        #: the reply budget of each model request (TurnWindow.room): every round carries max_tokens
        self.budget = budget
        self.state, self.ctx, self.resolution = state, ctx, resolution
        self.messages: List[dict] = state["messages"]
        self.loop = LoopBreaker(settings.loop_repeats, state.get("loop"))
        self.used = 0
        self.nudges = 0
        self.any_text = False
        #: characters (code points) of the reply's text so far: a tool row's ``text_offset``, where it ran
        self.text_len = 0
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
            tools = yield from self._fitting_tools(self.registry.specs() or None)
            text, calls = yield from self._model_round(tools)
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
                # the model stopped at the reply budget, not at its own end: incomplete, and said so
                stopped_at_budget = self.term["rounds"][-1].get("finish_reason") == "length"
                self.term["completion"] = "incomplete" if stopped_at_budget else "complete"
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
            self.messages.append(assistant_message(text, calls))
            self.state["pending"] = list(calls)
            if (yield from self._run_pending()):
                return

    # ------------------------------------------------------------------ model
    def _fitting_tools(self, tools: Optional[List[dict]]) -> Generator[Event, None, Optional[List[dict]]]:
        """The tool schemas that fit the window with room for a reply (MIN_REPLY_TOKENS, or the turn's
        own ``max_tokens`` when smaller): the tools listed
        last (AGENT_TOOLS' order, a profile's list) are left out first, and a notice says which, once.
        With none left the round is a plain answer; a request known not to fit is never sent."""
        if not tools or self.budget is None:
            return tools
        kept = list(tools)
        dropped: List[str] = []
        # room for a reply: MIN_REPLY_TOKENS, or the whole budget when the turn asked for less than that
        wanted = min(MIN_REPLY_TOKENS, self.budget(self.messages, None))
        while kept and self.budget(self.messages, kept) < wanted:
            dropped.append(str(kept.pop().get("function", {}).get("name", "?")))
        if dropped and not self.meta.get("tools_left_out"):
            self.meta["tools_left_out"] = dropped
            names = ", ".join(reversed(dropped))
            yield Event(
                NOTICE,
                {"message": f"Left out to fit the model's window: the tools {names}.", "source": "window"},
            )
        return kept or None

    def _model_round(self, tools: Optional[List[dict]]) -> Generator[Event, None, Tuple[str, List[dict]]]:
        """One completion; returns (text, calls). Text of later rounds is separated by a blank line."""
        self.state["round"] += 1
        round_no = self.state["round"]
        yield Event(AGENT_STEP, {"round": round_no})
        messages = list(self.messages)
        request = ChatRequest(
            model=self.candidates[0].model,
            messages=messages,
            tools=tools,
            temperature=self.temperature,
            max_tokens=self.budget(messages, tools) if self.budget is not None else None,
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
                        self.text_len += 2
                        yield delta("\n\n")
                    parts.append(event.data["delta"])
                    self.text_len += len(event.data["delta"])
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

    def snapshot(self) -> dict:
        """The JSON-able state a continuation rebuilds the model messages from."""
        self.state["loop"] = self.loop.history
        return json.loads(json.dumps(self.state))

    # ------------------------------------------------------------------ endings
    def _note(self, text: str) -> Iterator[Event]:
        text = ("\n\n" if self.any_text else "") + text
        self.text_len += len(text)
        yield delta(text)
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
    budget: Optional[Callable[[List[dict], Optional[List[dict]]], int]] = None,
):
    """Return a turn generator function for the run engine (``budget``: each round's max_tokens)."""

    def turn(ctx: RunContext) -> Iterator[Event]:
        yield from AgentLoop(candidates, registry, settings, hooks, state, ctx, resolution, temperature, budget).run()

    return turn
