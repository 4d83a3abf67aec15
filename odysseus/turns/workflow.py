"""Agent Alloy: the agent-mode turn that runs a workflow (a supervisor delegating to specialists).

``build_workflow_turn`` is reached from agent mode's builder (``turns/agent.py``), on
/api/chat_stream and the agent API alike: a new task with ``workflow_id``, or the continuation
of a workflow task (an approval answer or Continue, recognised by ``state["alloy"]``). It
validates everything and stores nothing; the supervisor's model is resolved here, so a bad one
is a 404 too. (Which workflow answers an agent-API turn is routing: ``turns/routing.py``.)
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, TYPE_CHECKING

from ..agent.agent_loop import Resolution, initial_state
from ..alloy.plan import AgentFactory, AlloySettings
from ..alloy.workflow_loop import workflow_turn
from ..errors import NotFound
from ..events import AGENT_TERMINAL
from ..llm.llm_core import Candidate
from ..runs.start import Turn
from .registry import PreparedTurn
from .request import RoutedAgent, TurnRequest

if TYPE_CHECKING:
    from ..store import Store
    from .start import TurnService

AGENT_FIELDS = ("name", "model", "temperature", "system_prompt", "tools")


def wants_workflow(request: TurnRequest, state: Optional[Dict[str, Any]]) -> bool:
    """True for a new task naming a workflow, or a continuation of a workflow task."""
    if state is not None:
        return bool(state.get("alloy"))
    return request.workflow_id is not None


def _agent_config(store: "Store", owner: str, agent_id: str) -> Optional[Dict[str, Any]]:
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


def make_plan(store: "Store", owner: str, workflow: Dict[str, Any]) -> Dict[str, Any]:
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
    turns: "TurnService",
    request: TurnRequest,
    candidates: List[Candidate],
    owner: str,
    state: Optional[Dict[str, Any]] = None,
    resolution: Optional[Resolution] = None,
    message: Optional[str] = None,
    user_metadata: Optional[Dict[str, Any]] = None,
) -> PreparedTurn:
    """The PreparedTurn of a workflow task (new, or continued from ``state`` after an answer)."""
    service = turns.agent
    if state is None:
        assert request.workflow_id is not None  # wants_workflow
        workflow = turns.store.workflows.get(owner, request.workflow_id)
        plan = make_plan(turns.store, owner, workflow)
        message = request.message
    else:
        plan = state["alloy"]
    plan["model_from_request"] = bool(request.model)
    # every agent of the workflow gets the code tools only when the admin allows them for this user (no network)
    registry, _network = service.toolbox.for_turn(owner, None)
    factory = AgentFactory(
        plan,
        turns.router.resolve,
        candidates,
        registry,
        service.settings,
        AlloySettings.from_config(turns.config),
        request.temperature,
    )
    setup = factory.setup(plan["workflow"]["supervisor_agent_id"], 0)  # a bad model is a 404 now
    chosen = plan["workflow"]
    agent = RoutedAgent("workflow_id", agent_id=chosen["supervisor_agent_id"], workflow_id=chosen["id"])

    def make_turn(history: List[Dict[str, Any]]) -> Turn:
        start = state
        if start is None:
            start = initial_state(history, setup.settings)
            start["alloy"] = plan
        return workflow_turn(factory, setup, service.hooks, start, resolution)

    return PreparedTurn(
        message,
        request.client_message_id,
        make_turn,
        terminal_type=AGENT_TERMINAL,
        user_metadata=user_metadata,
        agent=agent,
    )
