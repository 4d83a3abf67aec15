"""Agent mode: the builder of an agent turn, and how a tool call gets approved.

Three kinds of agent request reach ``build_agent_turn``:

- a new task: ``message`` (the user's message is stored as usual);
- an approval answer (``TurnRequest.approval``: ``tool_approval_id`` + ``tool_approval_decision``,
  optionally ``tool_approval_call``, the call as shown, which must match). The approval is
  checked (``agent.approvals.check``) and consumed inside the start transaction, so a start that
  fails leaves it unused; the stored user message is a short readable line ("Approved: shell")
  with the decision in its metadata. The loop then resumes from the state saved with the
  approval request (``agent.approval_steps``);
- ``continue`` (``TurnRequest.resume``) after ``rounds_exhausted``: the state saved in the last
  assistant message's metadata is picked up; an optional ``message`` is passed to the model.

A task naming a workflow, or continuing one, is an Agent Alloy turn (``turns/workflow.py``).
The tools offered come from the app's toolbox for this owner and profile (``agent/toolbox.py``).
"""

from __future__ import annotations

import copy
import dataclasses
import time
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional

from ..agent.agent_loop import Resolution, agent_turn, initial_state
from ..agent.approvals import check, refused
from ..agent.service import AgentService
from ..context.agent_context import with_context
from ..errors import BadRequest
from ..events import AGENT_TERMINAL
from ..llm.llm_core import Candidate
from ..runs.engine import Turn
from ..store.approvals import ApprovalRepo
from . import document, workflow
from .messages import model_messages
from .registry import PreparedTurn, register_mode
from .request import TurnRequest

if TYPE_CHECKING:
    from .start import TurnService

DECISION_LABELS = {"approve": "Approved", "approve_task": "Approved for this task", "deny": "Denied"}


def _attached_only(history: List[Dict[str, Any]]) -> Turn:
    """The turn of a retried approval answer: the engine attaches to the one it started, never calls this."""
    raise RuntimeError("a retried approval answer starts no new turn")


def build_agent_turn(
    turns: "TurnService", request: TurnRequest, candidates: List[Candidate], owner: str
) -> PreparedTurn:
    """Validate an agent request (approval answer, continue, or new task); store nothing."""
    service, store = turns.agent, turns.store
    session_id = request.session_id
    state: Optional[Dict[str, Any]] = None
    resolution: Optional[Resolution] = None
    message = request.message
    user_metadata: Optional[Dict[str, Any]] = None
    in_transaction: List[Callable[[Any], None]] = []
    approval = request.approval
    if approval is not None:
        approval_id, decision = approval.approval_id, approval.decision
        row = store.approvals.get(approval_id)
        if (
            row is not None
            and row.get("used_at")
            and row["owner"] == owner
            and request.client_message_id
            and session_id is not None
            and session_id == row["session_id"]
            and store.messages.by_client_id(owner, session_id, request.client_message_id)
        ):
            # A retried answer: the engine attaches to the turn it already started.
            return PreparedTurn("", request.client_message_id, _attached_only, terminal_type=AGENT_TERMINAL)
        check(
            row,
            owner=owner,
            session_id=session_id,
            decision=decision,
            presented=approval.presented_call,
            now=time.time(),
        )
        assert row is not None  # check refuses an unknown approval
        # consumed inside the start transaction: a start that fails (503 at capacity) leaves it unused
        in_transaction.append(lambda db: consume_in(db, approval_id, owner, decision))
        state, resolution = row["state"], Resolution(approval_id, decision, row["call"])
        message = f"{DECISION_LABELS[decision]}: {row['call'].get('name')}"
        user_metadata = {
            "agent_action": {
                "tool_approval": {
                    "approval_id": approval_id,
                    "decision": decision,
                    "call_id": row["call"].get("id"),
                    "server_id": row["call"].get("server_id"),
                }
            }
        }
    elif request.resume:
        if not session_id:
            raise BadRequest("continue needs the session_id of the paused task", reason="invalid")
        last = store.messages.latest(owner, session_id, "assistant")
        saved = ((last or {}).get("metadata") or {}).get("agent", {}).get("continuation")
        if not saved:
            raise BadRequest("there is no paused agent task to continue in this session", reason="invalid")
        state = copy.deepcopy(saved)
        text = (message or "").strip()
        if text:
            state["messages"].append({"role": "user", "content": text})
        message = text or "Continue"
        user_metadata = {"agent_action": {"continue": True, "task_id": state.get("task_id")}}
    elif not (message or "").strip():
        raise BadRequest("message is required and must be a non-empty string")
    # Agent Alloy: a task for a workflow's supervisor, or the continuation of one (turns/workflow.py)
    if workflow.wants_workflow(request, state):
        return workflow.build_workflow_turn(
            turns, request, candidates, owner, state, resolution, message, user_metadata
        )
    return _task(turns, service, request, candidates, owner, state, resolution, message, user_metadata, in_transaction)


def _task(
    turns: "TurnService",
    service: AgentService,
    request: TurnRequest,
    candidates: List[Candidate],
    owner: str,
    state: Optional[Dict[str, Any]],
    resolution: Optional[Resolution],
    message: str,
    user_metadata: Optional[Dict[str, Any]],
    in_transaction: List[Any],
) -> PreparedTurn:
    """The PreparedTurn of a one-agent task: its tools, prompt, context and window."""
    docs = turns.documents
    active = document.active_document(docs, request, owner)
    settings = service.settings
    if request.system_prompt:  # an agent profile's prompt comes first; the tool guidance stays
        settings = dataclasses.replace(settings, system_prompt=f"{request.system_prompt}\n\n{settings.system_prompt}")
    # the app's tools, the sources' for this owner and profile, the document tools; then the profile's list and
    # the code-tools policy (code tools only for whom the admin allows them; network only where a profile allows it)
    profile_id = request.agent.profile_id if request.agent is not None else None
    registry, network = service.toolbox.for_turn(
        owner, profile_id, extra=document.tools_of(docs, active), only=request.tools
    )
    hooks = dataclasses.replace(service.hooks, tool_context=lambda ctx: service.tool_context(ctx, network=network))
    gather = turns.gather(owner, request) if state is None else None  # a continued task gathers nothing new
    window = turns.window(request, candidates)  # the model's window: compaction, trimming (issue 17)

    def make_turn(history: List[Dict[str, Any]]) -> Turn:
        start = state if state is not None else initial_state(history, settings)
        with_doc = document.document_adder(docs, active, owner, history)  # the active document, read now
        if state is None:
            start["messages"] = with_doc(start["messages"])

        def build(
            rows: List[Dict[str, Any]],
        ) -> List[Dict[str, Any]]:  # the new task's messages from the rows the model sees (after a summary)
            return with_doc(model_messages(rows, settings.system_prompt))

        turn = agent_turn(
            candidates, registry, settings, hooks, start, resolution, request.temperature, budget=window.room
        )
        # context pipeline (odysseus.context): attachments, retrieval, memories, workspace, ... gathered and
        # announced before the loop's first round (a continued task gathers nothing new)
        return with_context(turn, start, gather, window=window, history=history, build=build)

    return PreparedTurn(
        message,
        request.client_message_id,
        make_turn,
        terminal_type=AGENT_TERMINAL,
        user_metadata=user_metadata,
        in_transaction=in_transaction,
    )


def consume_in(db: Any, approval_id: str, owner: str, decision: str) -> None:
    """Mark the approval used inside the caller's transaction; a racing answer that won rolls this start back."""
    if not ApprovalRepo.consume_with(db, approval_id, owner, decision, time.time()):
        raise refused("invalid", "this approval has already been answered")


def init_app(app: Any) -> None:
    """Build the app's agent service from its config and register agent mode."""
    service = app.extensions["odysseus.agent"] = AgentService(app.extensions["odysseus.store"], app.config)
    app.extensions["odysseus.runs"].hooks.session_deleted.connect(service.forget_session)
    register_mode(app, "agent", build_agent_turn)
