"""Agent Alloy workflows over HTTP: ``/api/alloy/workflows`` (the caller's own only).

Requests carry the workflow object itself; answers wrap it as ``{"workflow": ...}`` (a
list as ``{"workflows": [...]}``). Validation lives in ``store/workflows.py``; another
user's ids answer 404 exactly like unknown ones.
"""

from __future__ import annotations

from flask import Blueprint, jsonify

from ..errors import BadRequest
from .auth import current_owner
from .params import body
from .parts import ext

bp = Blueprint("workflows", __name__)


def _changes() -> dict:
    data = body()
    if not data:
        raise BadRequest("send the workflow fields to change")
    return data


@bp.get("/api/alloy/workflows")
def list_workflows():
    """The caller's workflows."""
    return jsonify({"workflows": ext("store").workflows.list(current_owner())})


@bp.post("/api/alloy/workflows")
def create_workflow():
    """Create a workflow from the caller's agents."""
    workflow = ext("store").workflows.create(current_owner(), body())
    return jsonify({"workflow": workflow}), 201


@bp.get("/api/alloy/workflows/<workflow_id>")
def get_workflow(workflow_id: str):
    """One workflow."""
    return jsonify({"workflow": ext("store").workflows.get(current_owner(), workflow_id)})


@bp.patch("/api/alloy/workflows/<workflow_id>")
def update_workflow(workflow_id: str):
    """Change a workflow: the fields given replace the stored ones; the result is validated whole."""
    owner = current_owner()
    ext("store").workflows.get(owner, workflow_id)  # 404 before any body validation
    return jsonify({"workflow": ext("store").workflows.update(owner, workflow_id, _changes())})


@bp.delete("/api/alloy/workflows/<workflow_id>")
def delete_workflow(workflow_id: str):
    """Delete a workflow (its agents stay)."""
    ext("store").workflows.delete(current_owner(), workflow_id)
    return jsonify({"deleted": True})
