"""CRUD for agent profiles and named agents (the caller's own only), and the tools they may list."""

from __future__ import annotations

from flask import Blueprint, jsonify

from ..documents.tools import ActiveDocument
from ..errors import BadRequest
from ..store.agents import clean_fields
from ..turns import document
from .auth import current_owner
from .params import body, optional_str
from .parts import ext, turns

bp = Blueprint("profiles", __name__)


def _is_default(data: dict):
    value = data.get("is_default")
    if value is not None and not isinstance(value, bool):
        raise BadRequest("is_default must be true or false")
    return value


@bp.get("/api/agent/profiles")
def list_profiles():
    """The caller's agent profiles."""
    return jsonify({"profiles": ext("store").profiles.list(current_owner())})


@bp.post("/api/agent/profiles")
def create_profile():
    """Create a profile (``is_default`` makes it the caller's default)."""
    data = body()
    profile = ext("store").profiles.create(current_owner(), clean_fields(data, partial=False), bool(_is_default(data)))
    return jsonify(profile), 201


@bp.get("/api/agent/profiles/<profile_id>")
def get_profile(profile_id: str):
    """One profile."""
    return jsonify(ext("store").profiles.get(current_owner(), profile_id))


@bp.patch("/api/agent/profiles/<profile_id>")
def update_profile(profile_id: str):
    """Change a profile."""
    data = body()
    return jsonify(
        ext("store").profiles.update(current_owner(), profile_id, clean_fields(data, partial=True), _is_default(data))
    )


@bp.delete("/api/agent/profiles/<profile_id>")
def delete_profile(profile_id: str):
    """Delete a profile."""
    ext("store").profiles.delete(current_owner(), profile_id)
    return jsonify({"deleted": True})


@bp.get("/api/agent/tools")
def list_tools():
    """The tools the caller's agent turns can be offered (an agent's ``tools`` list picks among them)."""
    docs = turns().documents
    registry, _ = ext("agent").toolbox.for_turn(
        current_owner(), None, extra=document.tools_of(docs, ActiveDocument(docs))
    )
    return jsonify(
        {
            "tools": [
                {"name": tool.name, "description": tool.description, "needs_approval": tool.needs_approval}
                for tool in registry.tools.values()
            ]
        }
    )


@bp.get("/api/agents")
def list_agents():
    """The caller's agents."""
    return jsonify({"agents": ext("store").agents.list(current_owner())})


@bp.post("/api/agents")
def create_agent():
    """Create an agent; ``agent_id`` is generated Docker-style when not given."""
    owner = current_owner()
    data = body()
    profile_id = optional_str(data, "profile_id", 100)
    if profile_id:
        ext("store").profiles.get(owner, profile_id)
    fields = clean_fields(data, partial=True)
    agent = ext("store").agents.create(owner, fields, optional_str(data, "agent_id", 100), profile_id)
    return jsonify(agent), 201


@bp.get("/api/agents/<agent_id>")
def get_agent(agent_id: str):
    """One agent."""
    return jsonify(ext("store").agents.get(current_owner(), agent_id))


@bp.patch("/api/agents/<agent_id>")
def update_agent(agent_id: str):
    """Change an agent."""
    owner = current_owner()
    data = body()
    fields = clean_fields(data, partial=True)
    if "profile_id" in data:
        profile_id = optional_str(data, "profile_id", 100)
        if profile_id:
            ext("store").profiles.get(owner, profile_id)
        fields["profile_id"] = profile_id
    if not fields:
        raise BadRequest("nothing to change")
    return jsonify(ext("store").agents.update(owner, agent_id, fields))


@bp.delete("/api/agents/<agent_id>")
def delete_agent(agent_id: str):
    """Delete an agent."""
    ext("store").agents.delete(current_owner(), agent_id)
    return jsonify({"deleted": True})
