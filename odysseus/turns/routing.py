"""Who answers a turn, and the owner's defaults: the request made whole before its mode is built.

The agent API routes (``TurnRequest.route``): ``workflow_id`` > ``target_agent_id`` >
``agent_profile_id``/``profile_id`` > the owner's default profile. An unknown id is a 404 with a
clear message, never a silent fall back to the default. The chosen agent's model and
temperature fill what the request left out; its prompt and tools replace the request's. Then
(``owner_defaults``) the owner's own system prompt and temperature fill what is still empty, so
an agent's own prompt and temperature win.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Dict, Mapping

from ..preferences import effective
from .request import RoutedAgent, TurnRequest

if TYPE_CHECKING:
    from ..store import Store

AGENT_FIELDS = ("model", "temperature", "system_prompt", "tools")


def _merge(request: TurnRequest, source: Mapping[str, Any], agent: RoutedAgent) -> TurnRequest:
    """The request with its unset model/temperature, and its prompt and tools, taken from ``source``."""
    changes: Dict[str, Any] = {"agent": agent}
    if not request.model and source.get("model"):
        changes["model"] = source["model"]
    if request.temperature is None and source.get("temperature") is not None:
        changes["temperature"] = source["temperature"]
    if source.get("system_prompt"):
        changes["system_prompt"] = source["system_prompt"]
    if source.get("tools") is not None:
        changes["tools"] = tuple(source["tools"])
    return dataclasses.replace(request, **changes)


def route_agent(store: "Store", owner: str, request: TurnRequest) -> TurnRequest:
    """The request with the agent or profile that answers it (unchanged without ``route``)."""
    choice = request.route
    if choice is None:
        return request
    request = dataclasses.replace(request, route=None)
    if request.workflow_id is not None:  # Agent Alloy (turns/workflow.py)
        workflow = store.workflows.get(owner, request.workflow_id)  # NotFound for unknown or foreign ids
        routed = RoutedAgent("workflow_id", agent_id=workflow["supervisor_agent_id"], workflow_id=workflow["id"])
        return dataclasses.replace(request, agent=routed)
    if choice.target_agent_id:
        agent = store.agents.get(owner, choice.target_agent_id)  # NotFound names the id
        base = store.profiles.get(owner, agent["profile_id"]) if agent.get("profile_id") else {}
        merged = {k: agent.get(k) if agent.get(k) is not None else base.get(k) for k in AGENT_FIELDS}
        routed = RoutedAgent("target_agent_id", agent_id=choice.target_agent_id, profile_id=agent.get("profile_id"))
        return _merge(request, merged, routed)
    if choice.profile_id:
        profile = store.profiles.get(owner, choice.profile_id)
        return _merge(request, profile, RoutedAgent("profile_id", profile_id=choice.profile_id))
    default = store.profiles.default(owner)
    if default:
        return _merge(request, default, RoutedAgent("default", profile_id=default["id"]))
    return request


def with_owner_defaults(store: "Store", owner: str, request: TurnRequest) -> TurnRequest:
    """Fill the system prompt and temperature the request left empty from the owner's settings.

    The default model and mode are the page's pre-selection (a stale model id must not make
    every API request fail), so they are not filled here.
    """
    if not request.owner_defaults:
        return request
    # [startpath, issue 22] only the two stored values it fills: one statement, not the memories switch too
    stored = effective(store.user_settings.get_all(owner))
    changes: Dict[str, Any] = {"owner_defaults": False}
    if not request.system_prompt and stored["system_prompt"]:
        changes["system_prompt"] = stored["system_prompt"]
    if request.temperature is None and stored["temperature"] is not None:
        changes["temperature"] = stored["temperature"]
    return dataclasses.replace(request, **changes)
