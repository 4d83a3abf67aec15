"""Which agent answers an agent-API turn: workflow_id > target_agent_id > agent_profile_id/profile_id > default.

An unknown id is a 404 with a clear message, never a silent fall back to the default.
"""

from __future__ import annotations

from typing import Optional

from .alloy_mode import apply_workflow_routing
from .params import optional_str


def _merge(req: dict, source: dict, label: dict) -> None:
    """Fill the request's unset model/temperature and its prompt and tools from ``source``."""
    if not req.get("model") and source.get("model"):
        req["model"] = source["model"]
    if req.get("temperature") is None and source.get("temperature") is not None:
        req["temperature"] = source["temperature"]
    if source.get("system_prompt"):
        req["system_prompt"] = source["system_prompt"]
    if source.get("tools") is not None:
        req["tools"] = list(source["tools"])
    req["agent"] = label


def apply_agent_routing(store, owner: str, req: dict) -> Optional[dict]:
    """Resolve the agent or profile for ``req`` in place; return what was chosen (or None)."""
    data = req["data"]
    target = optional_str(data, "target_agent_id", 100)
    profile_id = optional_str(data, "agent_profile_id", 100) or optional_str(data, "profile_id", 100)
    if data.get("workflow_id") not in (None, ""):  # Agent Alloy (routes/alloy_mode.py)
        return apply_workflow_routing(store, owner, req)
    if target:
        agent = store.agents.get(owner, target)  # NotFound names the id
        base = store.profiles.get(owner, agent["profile_id"]) if agent.get("profile_id") else {}
        merged = {
            k: agent.get(k) if agent.get(k) is not None else base.get(k)
            for k in ("model", "temperature", "system_prompt", "tools")
        }
        _merge(req, merged, {"agent_id": target, "profile_id": agent.get("profile_id"), "routed_by": "target_agent_id"})
        return req["agent"]
    if profile_id:
        profile = store.profiles.get(owner, profile_id)
        _merge(req, profile, {"profile_id": profile_id, "routed_by": "profile_id"})
        return req["agent"]
    default = store.profiles.default(owner)
    if default:
        _merge(req, default, {"profile_id": default["id"], "routed_by": "default"})
        return req["agent"]
    return None
