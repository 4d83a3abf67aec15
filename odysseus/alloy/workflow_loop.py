"""workflow_loop: the agent loop of a workflow member, where ``delegate_to`` runs a specialist.

Invariants:

- A delegation is a child turn of the same run: an ``AgentLoop`` of the specialist (its
  own prompt, tools and model; only its task as input, never the conversation) driven by
  a worker greenlet. Its events reach the parent generator through one queue, relabelled
  (``delegation.Delegation.relabel``), so they enter the run's single log in the order
  they were produced: concurrent delegations interleave, each one stays in order.
- Every ``delegate_to`` call ends in exactly one ``delegation_complete`` (a refusal sends
  only that) and one tool result the model sees, in call order — or, at the top level,
  in the one delegation paused for an approval, which the continuation completes.
- A child's cancel token is linked to its parent's: stopping the run cancels every
  descendant at once (their provider connections are closed by the cancel callbacks).
  A delegation past its timeout is cancelled; one that does not settle within
  ``ABANDON_GRACE`` after that is reported failed and its later output dropped.
- Only the top-level loop (the supervisor, depth 0) folds delegation events into the
  run's ``metadata["delegations"]`` and stores approvals; deeper pauses fail instead.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from typing import Callable, Dict, Generator, Iterator, List, Optional, Tuple

from ..agent.agent_loop import AgentHooks, AgentLoop, Resolution, initial_state
from ..agent.guards import sanitize
from ..cancel import Cancelled
from ..errors import OdysseusError
from ..events import ASK_USER, DELEGATION_COMPLETE, DELEGATION_EVENTS, EXHIBIT, METRICS, TOOL_APPROVAL_RESOLVED, Event
from ..runs.run import RunContext
from ..tools.registry import ToolRegistry
from .delegation import PREVIEW, Delegation, DelegationBook, new_delegation_id
from .plan import DELEGATE_TOOL, MAX_TASK_CHARS, AgentFactory, AgentSetup, delegate_tool

log = logging.getLogger(__name__)

POLL = 0.1  # seconds between deadline and cancel checks while delegations run
ABANDON_GRACE = 2.0  # seconds a timed-out delegation may take to stop before it is abandoned
ENDINGS = {  # a specialist's completion (agent_terminal) -> why the delegation failed
    "rounds_exhausted": "it used all its model rounds without finishing",
    "budget_exceeded": "it used up its tool-call budget",
    "intent_nudge_exhausted": "it kept announcing an action without calling a tool",
    "failed": "its model failed",
}


def _cap(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"\n[truncated: {len(text) - limit} more characters]"


class WorkflowLoop(AgentLoop):
    """An ``AgentLoop`` that may delegate; the supervisor's loop is depth 0."""

    def __init__(
        self,
        factory: AgentFactory,
        book: DelegationBook,
        setup: AgentSetup,
        hooks: AgentHooks,
        state: dict,
        ctx: RunContext,
        resolution: Optional[Resolution] = None,
        depth: int = 0,
        chain: Tuple[str, ...] = (),
        delegation_id: Optional[str] = None,
    ):
        self.factory, self.book, self.limits = factory, book, factory.limits
        self.agent_id, self.depth, self.chain, self.delegation_id = setup.agent_id, depth, chain, delegation_id
        targets = [t for t in factory.specialists() if t[0] != setup.agent_id and t[0] not in chain]
        registry = setup.registry
        if depth < self.limits.max_depth and targets:
            registry = ToolRegistry(list(setup.registry.tools.values()) + [delegate_tool(targets)])
        super().__init__(setup.candidates, registry, setup.settings, hooks, state, ctx, resolution, setup.temperature)
        self.supervisor_cost: Optional[float] = None
        if depth == 0:
            workflow = factory.workflow
            ctx.metadata["alloy"] = {
                "workflow_id": workflow["id"],
                "workflow_name": workflow.get("name"),
                "supervisor_agent_id": setup.agent_id,
            }

    # ------------------------------------------------------------------ driver
    def run(self) -> Iterator[Event]:
        """The member's turn; at depth 0 also the fold of delegation events and the summed usage."""
        if self.depth > 0:
            yield from super().run()
            return
        try:
            for event in super().run():
                if event.type in DELEGATION_EVENTS:
                    self.book.apply(event)
                elif event.type == METRICS:
                    cost = (event.data.get("data") or {}).get("cost")
                    if isinstance(cost, (int, float)):
                        self.supervisor_cost = (self.supervisor_cost or 0.0) + cost
                yield event
        except BaseException:
            self.book.mark_open("stopped" if self.ctx.cancel.cancelled else "failed")
            raise
        finally:
            self._totals()

    def _totals(self) -> None:
        """Usage and cost of the supervisor plus every delegation, in the terminal record and metadata."""
        children = self.book.totals()
        total = {
            "input_tokens": self.usage_total["input_tokens"] + children["input_tokens"],
            "output_tokens": self.usage_total["output_tokens"] + children["output_tokens"],
        }
        costs = [c for c in (self.supervisor_cost, children["cost"]) if c is not None]
        if costs:
            total["cost"] = round(sum(costs), 8)
        self.term["usage_total"] = total
        self.ctx.metadata["alloy"].update(
            usage_total=total, supervisor_usage=dict(self.usage_total), delegations=len(self.book.records)
        )

    # ------------------------------------------------------------------ tools
    def _run_pending(self) -> Generator[Event, None, bool]:
        """As ``AgentLoop._run_pending``, but consecutive ``delegate_to`` calls run together as one batch."""
        while self.state["pending"]:
            self.ctx.cancel.raise_if_cancelled()
            pending = self.state["pending"]
            if pending[0]["name"] == DELEGATE_TOOL:
                batch: List[dict] = []
                for call in pending:
                    if call["name"] != DELEGATE_TOOL:
                        break
                    batch.append(call)
                if (yield from self._delegate(batch)):
                    return True
                continue
            call = pending[0]
            tool = self.registry.get(call["name"])
            if (
                tool is not None
                and tool.needs_approval
                and not call.get("error")
                and call["name"] not in self.state["task_approved"]
            ):
                yield from self._ask(call)
                return True
            pending.pop(0)
            yield from self._execute(call)
        return False

    def _refusal(self, call: dict) -> Optional[str]:
        """Why this delegate_to call may not run, or None."""
        if call.get("error"):
            return call["error"]
        if self.depth >= self.limits.max_depth:
            return (
                f"the delegation depth limit ({self.limits.max_depth}) is reached: "
                f"{self.agent_id} cannot delegate further"
            )
        args = call["arguments"]
        target, task = args.get("agent_id"), args.get("task")
        if not isinstance(target, str) or not target:
            return "agent_id must name one of the workflow's specialists"
        if not isinstance(task, str) or not task.strip():
            return "task must be a non-empty string"
        if len(task) > MAX_TASK_CHARS:
            return f"task is longer than {MAX_TASK_CHARS} characters"
        if target == self.agent_id:
            return f"{target} cannot delegate to itself"
        if target in self.chain:
            return f"{target} is above {self.agent_id} in this delegation chain; delegation never goes back up"
        specialists = {agent_id for agent_id, _ in self.factory.specialists()}
        if target not in specialists:
            return f"{target} is not a specialist of workflow {self.factory.workflow['id']}"
        return None

    def _delegate(
        self, batch: List[dict], prepared: Optional[Dict[str, Delegation]] = None
    ) -> Generator[Event, None, bool]:
        """Run a batch of delegate_to calls; returns True when the turn ended awaiting an approval."""
        prepared = prepared or {}
        results: Dict[str, str] = {}
        runs: List[Delegation] = []
        for call in batch:
            if call["id"] in prepared:
                runs.append(prepared[call["id"]])
                continue
            reason = self._refusal(call)
            args = call["arguments"]
            if reason is not None:
                target = args.get("agent_id") if isinstance(args.get("agent_id"), str) else None
                data = {
                    "delegation_id": new_delegation_id(),
                    "target_agent_id": target,
                    "status": "failed",
                    "error": reason,
                    "result_preview": "",
                    "tokens_input": 0,
                    "tokens_output": 0,
                    "duration_ms": 0,
                    "tool_call_id": call["id"],
                    "refused": True,
                    "depth": self.depth + 1,
                    "supervisor_agent_id": self.agent_id,
                }
                if self.delegation_id:
                    data["parent_delegation_id"] = self.delegation_id
                if isinstance(args.get("task"), str):
                    data["task"] = args["task"][:PREVIEW]
                yield Event(DELEGATION_COMPLETE, data)
                results[call["id"]] = f"Error: the delegation was refused: {reason}."
                continue
            runs.append(
                Delegation(
                    call_id=call["id"],
                    target=args["agent_id"],
                    task=args["task"],
                    depth=self.depth + 1,
                    supervisor=self.agent_id,
                    parent_delegation_id=self.delegation_id,
                )
            )
        paused = yield from self._run_all(runs, results)
        handled = [c for c in batch if paused is None or c["id"] != paused.call_id]
        for call in handled:
            self.messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call["id"],
                    "content": _cap(results[call["id"]], self.settings.output_cap),
                }
            )
        self.used += len(handled)
        self.term["tool_calls"] = self.used
        done = {c["id"] for c in handled}
        self.state["pending"] = [c for c in self.state["pending"] if c["id"] not in done]
        if paused is not None:
            yield from self._pause(paused)
            return True
        return False

    # ------------------------------------------------------------------ concurrency
    def _run_all(self, runs: List[Delegation], results: Dict[str, str]) -> Generator[Event, None, Optional[Delegation]]:
        """Drive the delegations (at most max_parallel at once), merging their events; returns the paused one."""
        events: "queue.Queue" = queue.Queue()
        waiting = list(runs)
        active: Dict[str, Delegation] = {}
        paused: List[Delegation] = []
        try:
            while waiting or active:
                while waiting and len(active) < self.limits.max_parallel:
                    fresh = waiting.pop(0)
                    active[fresh.id] = fresh
                    yield fresh.start_event()
                    self._spawn(fresh, events)
                try:
                    kind, delegation, event = events.get(timeout=POLL)
                except queue.Empty:
                    kind = delegation = event = None
                self.ctx.cancel.raise_if_cancelled()
                if delegation is not None and delegation.id in active:
                    if kind == "event":
                        yield from self._forward(delegation, event)
                    else:
                        del active[delegation.id]
                        yield from self._finished(delegation, results, paused)
                yield from self._deadlines(active, results)
        finally:
            for delegation in active.values():  # stopped, or the generator was closed: stop every child
                delegation.token.cancel(self.ctx.cancel.reason or "stopped")
                record = self.book.get(delegation.id)
                if record is not None:
                    record.update(tokens_input=delegation.tokens_input, tokens_output=delegation.tokens_output)
        return paused[0] if paused else None

    def _spawn(self, delegation: Delegation, events: "queue.Queue") -> None:
        delegation.started = time.monotonic()
        delegation.deadline = delegation.started + self.limits.timeout
        parent = self.ctx.cancel
        unlink = parent.on_cancel(lambda: delegation.token.cancel(parent.reason or "stopped"))

        def work() -> None:
            try:
                self._work(delegation, events)
            finally:
                unlink()
                events.put(("done", delegation, None))

        threading.Thread(target=work, name=f"delegation-{delegation.id}", daemon=True).start()

    def _work(self, delegation: Delegation, events: "queue.Queue") -> None:
        """The worker: drive the specialist's loop, relabel its events, record its outcome."""
        loop: Optional[AgentLoop] = None
        try:
            loop = self._child(delegation)
            for event in loop.run():
                for out in delegation.relabel(event):
                    events.put(("event", delegation, out))
            completion = loop.term.get("completion")
            rounds = loop.term.get("rounds") or []
            final = (rounds[-1].get("text") if rounds else "") or delegation.text
            if completion == "awaiting_approval" and delegation.approval is not None:
                delegation.status = None  # paused: the supervisor decides
            elif completion in ("complete", "loop_breaker_triggered"):
                delegation.status, delegation.result = "success", final.strip() or "(the specialist gave no text)"
            else:
                self._fail(delegation, ENDINGS.get(completion or "", f"it ended as {completion}"))
        except Cancelled as exc:
            self._fail(delegation, self._timeout_text() if delegation.timed_out else f"stopped ({exc.reason})")
        except OdysseusError as exc:
            self._fail(delegation, self._timeout_text() if delegation.timed_out else sanitize(exc.message))
        except Exception as exc:  # a bug in one child must not take the others down
            log.exception("delegation %s crashed", delegation.id)
            self._fail(delegation, f"internal error ({type(exc).__name__})")

    def _timeout_text(self) -> str:
        return f"timed out after {self.limits.timeout:g} s"

    @staticmethod
    def _fail(delegation: Delegation, error: str) -> None:
        delegation.status, delegation.error = "failed", error
        partial = delegation.text.strip()
        delegation.result = f"Error: the specialist {delegation.target} failed: {error}." + (
            f"\nIts partial output:\n{partial}" if partial else ""
        )

    def _child(self, delegation: Delegation) -> AgentLoop:
        """The specialist's loop over a child context sharing the run id, session and (linked) cancel."""
        setup = self.factory.setup(delegation.target, delegation.depth)
        ctx = RunContext(self.ctx.run_id, self.ctx.session_id, self.ctx.owner, delegation.token)
        hooks = AgentHooks(request_approval=delegation.defer_approval, tool_context=self.hooks.tool_context)
        if delegation.resume is not None:
            state, resolution = delegation.resume["state"], self.resolution
        else:
            state, resolution = initial_state([{"role": "user", "content": delegation.task}], setup.settings), None
        return WorkflowLoop(
            self.factory,
            self.book,
            setup,
            hooks,
            state,
            ctx,
            resolution,
            delegation.depth,
            self.chain + (self.agent_id,),
            delegation.id,
        )

    def _forward(self, delegation: Delegation, event: Event) -> Iterator[Event]:
        """A relabelled child event into this loop's stream (an approval card waits for the round's end)."""
        if event.type == ASK_USER:
            return
        if event.type == EXHIBIT:
            self._record_exhibit(event.data)
        elif event.type == TOOL_APPROVAL_RESOLVED:
            self.meta["approval"] = {
                k: event.data.get(k) for k in ("approval_id", "decision", "call_id", "delegation_id", "target_agent_id")
            }
        yield event

    def _finished(self, delegation: Delegation, results: Dict[str, str], paused: List[Delegation]) -> Iterator[Event]:
        if delegation.status is None:  # waiting for an approval
            if self.depth == 0 and not paused:
                paused.append(delegation)
                return
            tool = (delegation.approval or {}).get("call", {}).get("name", "a tool")
            self._fail(
                delegation,
                f"it needed your approval to run {tool}, which is only possible for one "
                "specialist at a time called by the supervisor directly; delegate it again",
            )
        results[delegation.call_id] = delegation.result
        yield delegation.complete_event()

    def _deadlines(self, active: Dict[str, Delegation], results: Dict[str, str]) -> Iterator[Event]:
        now = time.monotonic()
        for delegation in list(active.values()):
            if not delegation.timed_out and now >= delegation.deadline:
                delegation.timed_out = True
                delegation.token.cancel("timeout")
            elif delegation.timed_out and now >= delegation.deadline + ABANDON_GRACE:
                delegation.abandoned = True
                del active[delegation.id]
                self._fail(delegation, self._timeout_text())
                results[delegation.call_id] = delegation.result
                yield delegation.complete_event()

    # ------------------------------------------------------------------ approvals
    def _pause(self, delegation: Delegation) -> Iterator[Event]:
        """Store the approval a specialist asked for, with the whole workflow state, and end the turn."""
        assert delegation.approval is not None  # only a delegation that asked for an approval pauses
        call = delegation.approval["call"]
        state = self.snapshot()
        state["alloy"]["paused"] = {
            "delegation_id": delegation.id,
            "tool_call_id": delegation.call_id,
            "agent_id": delegation.target,
            "task": delegation.task,
            "depth": delegation.depth,
            "state": delegation.approval["state"],
        }
        info = self.hooks.request_approval(self.ctx, call, state)
        card = dict((delegation.ask.data.get("data") if delegation.ask else None) or {})
        card.update(approval_id=info["approval_id"], expires_at=info["expires_at"], **delegation.ids)
        yield Event(ASK_USER, {"data": card})
        self._end_awaiting(call, info, **delegation.ids)
        record = self.book.get(delegation.id)
        if record is not None:
            record.update(
                status="awaiting_approval", tokens_input=delegation.tokens_input, tokens_output=delegation.tokens_output
            )
        yield from self._note(f"[Waiting for your approval: {delegation.target} wants to run {call.get('name')}]")

    def _resolve(self) -> Generator[Event, None, bool]:
        """An approval answer: for a paused delegation, continue the specialist; else as AgentLoop."""
        paused = (self.state.get("alloy") or {}).pop("paused", None) if self.depth == 0 else None
        if paused is None:
            return (yield from super()._resolve())
        pending = self.state["pending"]
        if not pending or pending[0]["id"] != paused["tool_call_id"]:
            raise OdysseusError("the saved workflow task does not match this approval", status=409)
        call = pending[0]
        delegation = Delegation(
            call_id=call["id"],
            target=paused["agent_id"],
            task=paused["task"],
            depth=paused.get("depth", 1),
            supervisor=self.agent_id,
            parent_delegation_id=None,
            delegation_id=paused["delegation_id"],
            resume={"state": paused["state"]},
        )
        if (yield from self._delegate([call], {call["id"]: delegation})):
            return True
        return (yield from self._run_pending())


def workflow_turn(
    factory: AgentFactory, setup: AgentSetup, hooks: AgentHooks, state: dict, resolution: Optional[Resolution] = None
) -> Callable[[RunContext], Iterator[Event]]:
    """Return the run engine's turn generator for the workflow's supervisor (``setup``)."""

    def turn(ctx: RunContext) -> Iterator[Event]:
        book = DelegationBook(ctx.metadata.setdefault("delegations", []))
        yield from WorkflowLoop(factory, book, setup, hooks, state, ctx, resolution).run()

    return turn
