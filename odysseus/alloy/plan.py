"""What a workflow turn knows before it starts: limits, each member's setup, the delegate_to tool.

A *plan* is the JSON-able part, saved in the supervisor's loop state (``state["alloy"]``)
so an approval answer or a Continue rebuilds the same workflow even if it was edited or
deleted meanwhile: ``{"workflow": {id, name, supervisor_agent_id, members}, "agents":
{agent_id: {name, model, system_prompt, tools, temperature}}}``. Agents that no longer
existed when the plan was made are simply not in ``agents`` (delegating to one is refused).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable, List, NoReturn, Optional, Tuple

from ..agent.guards import AgentSettings
from ..llm.llm_core import Candidate
from ..tools.registry import Tool, ToolError, ToolRegistry

DELEGATE_TOOL = "delegate_to"
MAX_TASK_CHARS = 20_000


@dataclass(frozen=True)
class AlloySettings:
    """Delegation limits (config keys ``ALLOY_*``)."""

    max_depth: int = 1
    max_parallel: int = 3
    timeout: float = 300.0
    max_rounds: int = 6

    @classmethod
    def from_config(cls, config: dict) -> "AlloySettings":
        """Limits from the flat app config; depth is clamped to 1-3, the others to at least 1."""
        return cls(
            max_depth=min(3, max(1, int(config.get("ALLOY_MAX_DEPTH", 1)))),
            max_parallel=max(1, int(config.get("ALLOY_MAX_PARALLEL_DELEGATIONS", 3))),
            timeout=max(0.1, float(config.get("ALLOY_DELEGATION_TIMEOUT", 300.0))),
            max_rounds=max(1, int(config.get("ALLOY_DELEGATION_MAX_ROUNDS", 6))),
        )


@dataclass
class AgentSetup:
    """How one member runs: its route, tools, settings (prompt, limits) and temperature."""

    agent_id: str
    candidates: List[Candidate]
    registry: ToolRegistry
    settings: AgentSettings
    temperature: Optional[float]


def supervisor_note(workflow: dict) -> str:
    """The system-prompt paragraph that tells the supervisor how delegation works."""
    return (
        f'You lead the workflow "{workflow.get("name")}". Hand a self-contained task to a specialist '
        f"with the {DELEGATE_TOOL} tool: the specialist sees only the task you write (never this "
        "conversation), and its final answer comes back to you as the tool result. Several "
        f"{DELEGATE_TOOL} calls in one reply run at the same time. Then answer the user yourself."
    )


def specialist_note(workflow: dict, agent_id: str) -> str:
    """The system-prompt paragraph of a specialist."""
    return (
        f'You are {agent_id}, a specialist in the workflow "{workflow.get("name")}". You get one task '
        "from the supervisor. Do it and answer with the result; your final answer is all the supervisor sees."
    )


class AgentFactory:
    """Builds each member's ``AgentSetup`` from the plan, the app's router, tools and agent settings."""

    def __init__(
        self,
        plan: dict,
        resolve: Callable[[Optional[str]], List[Candidate]],
        default_candidates: List[Candidate],
        registry: ToolRegistry,
        settings: AgentSettings,
        limits: AlloySettings,
        temperature: Optional[float] = None,
    ):
        self.plan, self.resolve, self.default_candidates = plan, resolve, default_candidates
        self.registry, self.settings, self.limits, self.temperature = registry, settings, limits, temperature

    @property
    def workflow(self) -> dict:
        """The workflow as it was when the plan was made."""
        return self.plan["workflow"]

    def specialists(self) -> List[Tuple[str, Optional[str]]]:
        """(agent_id, delegation_hint) of every specialist that still exists."""
        return [
            (m["agent_id"], m.get("delegation_hint"))
            for m in self.workflow["members"]
            if m["role"] == "specialist" and m["agent_id"] in self.plan["agents"]
        ]

    def setup(self, agent_id: str, depth: int) -> AgentSetup:
        """The member's setup; the supervisor (depth 0) keeps the request's temperature and model choice."""
        config = self.plan["agents"][agent_id]
        candidates = self.default_candidates
        if config.get("model") and not (depth == 0 and self.plan.get("model_from_request")):
            candidates = self.resolve(config["model"])
        registry = self.registry
        if config.get("tools") is not None:
            allowed = set(config["tools"])
            registry = ToolRegistry(t for name, t in self.registry.tools.items() if name in allowed)
        note = supervisor_note(self.workflow) if depth == 0 else specialist_note(self.workflow, agent_id)
        prompt = "\n\n".join(p for p in (config.get("system_prompt"), self.settings.system_prompt, note) if p)
        settings = dataclasses.replace(self.settings, system_prompt=prompt)
        if depth > 0:
            settings = dataclasses.replace(settings, max_rounds=self.limits.max_rounds)
        temperature = self.temperature if depth == 0 and self.temperature is not None else config.get("temperature")
        return AgentSetup(agent_id, candidates, registry, settings, temperature)


def _never(args: dict, ctx) -> NoReturn:
    raise ToolError(f"{DELEGATE_TOOL} is run by the workflow loop, not as a tool")


def delegate_tool(targets: List[Tuple[str, Optional[str]]]) -> Tool:
    """The ``delegate_to`` tool offered to an agent that may delegate to ``targets``."""
    lines = [f"- {agent_id}" + (f": {hint}" if hint else "") for agent_id, hint in targets]
    description = (
        "Delegate a self-contained task to a specialist agent and get its final answer back. "
        "The specialist sees only the task, so include everything it needs. Specialists:\n" + "\n".join(lines)
    )
    parameters = {
        "type": "object",
        "properties": {
            "agent_id": {
                "type": "string",
                "enum": [agent_id for agent_id, _ in targets],
                "description": "the specialist's agent_id",
            },
            "task": {"type": "string", "description": "the complete task for the specialist"},
        },
        "required": ["agent_id", "task"],
    }
    return Tool(
        DELEGATE_TOOL,
        description,
        parameters,
        _never,
        describe=lambda a: f"delegate_to {a.get('agent_id')}: {a.get('task')}",
    )
