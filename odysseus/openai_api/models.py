"""``GET /v1/models``: what ``model`` accepts, in OpenAI's list shape.

Every id the page's model picker offers (route names first, then ``provider/model``), then the
caller's named agents as ``agent:<agent_id>`` and workflows as ``workflow:<workflow_id>``.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List

from .parse import AGENT_PREFIX, WORKFLOW_PREFIX


def _model(model_id: str, owned_by: str, created: int, **extra: Any) -> Dict[str, Any]:
    return {"id": model_id, "object": "model", "created": created, "owned_by": owned_by, **extra}


def model_list(
    listing: Dict[str, Any], agents: Iterable[Dict[str, Any]], workflows: Iterable[Dict[str, Any]]
) -> List[Dict[str, Any]]:
    """The ``data`` of ``/v1/models`` from the page's listing (``meta_routes.model_listing``) and the caller's
    agents and workflows; each id once."""
    out: List[Dict[str, Any]] = []
    seen = set()

    def add(entry: Dict[str, Any]) -> None:
        if entry["id"] not in seen:
            seen.add(entry["id"])
            out.append(entry)

    for name in listing.get("routes") or {}:
        add(_model(name, "odysseus", 0))
    for model in listing.get("models") or []:
        add(_model(model["id"], model.get("provider") or "odysseus", 0))
    for agent in agents:
        add(_model(AGENT_PREFIX + agent["agent_id"], "odysseus", int(agent.get("created_at") or 0)))
    for workflow in workflows:
        add(_model(WORKFLOW_PREFIX + workflow["id"], "odysseus", int(workflow.get("created_at") or 0)))
    return out
