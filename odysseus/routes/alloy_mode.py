"""Flask glue of Agent Alloy: which workflow answers, and the agent-mode turn that runs it.

Two entry points, each one call from existing code:

- ``apply_workflow_routing`` (agent API routing): ``workflow_id`` wins over
  ``target_agent_id`` and profiles; an unknown or foreign workflow is a 404 before the
  stream starts; the choice is recorded as ``routed_by: "workflow_id"``.
- ``build_workflow_turn`` (agent mode's builder, both /api/chat_stream and the agent API):
  a new task with ``workflow_id``, or the continuation of a workflow task (an approval
  answer or Continue, recognised by ``state["alloy"]``). It validates everything and
  stores nothing; the supervisor's model is resolved here, so a bad one is a 404 too.
"""

from __future__ import annotations

from typing import Optional

from flask import current_app

from ..agent.agent_loop import Resolution, initial_state
from ..alloy.plan import AgentFactory, AlloySettings
from ..alloy.workflow_loop import workflow_turn
from ..errors import BadRequest, NotFound
from ..events import AGENT_TERMINAL
from . import code_tools_routes
from .turn_registry import PreparedTurn
from .turn_start import ext

AGENT_FIELDS = ("name", "model", "temperature", "system_prompt", "tools")


def _workflow_id(data: dict) -> str:
    value = data.get("workflow_id")
    if not isinstance(value, str) or not value.strip() or len(value) > 100:
        raise BadRequest("workflow_id must be a workflow's id (a non-empty string)")
    return value


def _label(workflow: dict) -> dict:
    return {"workflow_id": workflow["id"], "agent_id": workflow["supervisor_agent_id"], "routed_by": "workflow_id"}


def apply_workflow_routing(store, owner: str, req: dict) -> dict:
    """Route an agent-API turn to a workflow (404 for unknown or foreign ids); return the label."""
    workflow = store.workflows.get(owner, _workflow_id(req["data"]))
    req["agent"] = _label(workflow)
    return req["agent"]


def wants_workflow(data: dict, state: Optional[dict]) -> bool:
    """True for a new task naming a workflow, or a continuation of a workflow task."""
    if state is not None:
        return bool(state.get("alloy"))
    return data.get("workflow_id") not in (None, "")


def _agent_config(store, owner: str, agent_id: str) -> Optional[dict]:
    try:
        agent = store.agents.get(owner, agent_id)
    except NotFound:
        return None
    base = {}
    if agent.get("profile_id"):
        try:
            base = store.profiles.get(owner, agent["profile_id"])
        except NotFound:
            base = {}
    return {k: agent.get(k) if agent.get(k) is not None else base.get(k) for k in AGENT_FIELDS}


def make_plan(store, owner: str, workflow: dict) -> dict:
    """The JSON-able plan of a workflow turn (see alloy/plan.py); the supervisor must still exist."""
    agents = {}
    for member in workflow["members"]:
        config = _agent_config(store, owner, member["agent_id"])
        if config is not None:
            agents[member["agent_id"]] = config
    if workflow["supervisor_agent_id"] not in agents:
        raise NotFound(
            f"the supervisor agent {workflow['supervisor_agent_id']!r} of workflow {workflow['id']!r} no longer exists"
        )
    return {
        "workflow": {k: workflow.get(k) for k in ("id", "name", "supervisor_agent_id", "members")},
        "agents": agents,
    }


def build_workflow_turn(
    req: dict,
    candidates,
    owner: str,
    state: Optional[dict] = None,
    resolution: Optional[Resolution] = None,
    message: Optional[str] = None,
    user_metadata: Optional[dict] = None,
) -> PreparedTurn:
    """The PreparedTurn of a workflow task (new, or continued from ``state`` after an answer)."""
    service = current_app.extensions["odysseus.agent"]
    if state is None:
        workflow = ext("store").workflows.get(owner, _workflow_id(req["data"]))
        plan = make_plan(ext("store"), owner, workflow)
        message = req["message"]
    else:
        plan = state["alloy"]
    plan["model_from_request"] = bool(req["data"].get("model"))
    # every agent of the workflow gets the code tools only when the admin allows them for this user (no network)
    registry, _network = code_tools_routes.offer(service.registry, owner, None)
    factory = AgentFactory(
        plan,
        ext("router").resolve,
        candidates,
        registry,
        service.settings,
        AlloySettings.from_config(current_app.config),
        req.get("temperature"),
    )
    setup = factory.setup(plan["workflow"]["supervisor_agent_id"], 0)  # a bad model is a 404 now
    req["agent"] = _label(plan["workflow"])

    def make_turn(history):
        start = state
        if start is None:
            start = initial_state(history, setup.settings)
            start["alloy"] = plan
        return workflow_turn(factory, setup, service.hooks, start, resolution)

    return PreparedTurn(
        message, req["client_message_id"], make_turn, terminal_type=AGENT_TERMINAL, user_metadata=user_metadata
    )
