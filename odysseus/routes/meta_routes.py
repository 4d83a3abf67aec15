"""Health, model listing and the OpenAPI description."""

from __future__ import annotations

import os

from flask import Blueprint, current_app, jsonify, request

from .. import openapi
from . import code_tools_routes
from ..llm.catalog import ModelCatalog
from .auth import public

bp = Blueprint("meta", __name__)


@bp.get("/api/health")
def health():
    """Liveness plus a few engine counters, whether the code tools work (and why not), the MCP servers' states."""
    engine = current_app.extensions["odysseus.runs"]
    return jsonify(
        {
            "ok": True,
            "active_runs": engine.active_count(),
            "runs_in_memory": len(engine.runs),
            "log_bytes": engine.budget.used,
            "draining": engine.draining,
            "worker": engine.worker,
            "pid": os.getpid(),
            "durable_log": engine.durable.stats(),
            "run_backend": engine.backend.stats(),
            "code_tools": code_tools_routes.health_info(),
            "mcp_servers": current_app.extensions["odysseus.mcp"].status(sync=False),
        }
    )


def model_listing(refresh: bool = False) -> dict:
    """The page's model list: ``models`` (provider/model), ``errors`` and ``routes`` (also read by /v1/models)."""
    router = current_app.extensions["odysseus.router"]
    catalog = current_app.extensions.get("odysseus.models")
    if catalog is None:
        catalog = current_app.extensions.setdefault(
            "odysseus.models",
            ModelCatalog(router.providers.values(), ttl=float(current_app.config["MODELS_CACHE_SECONDS"])),
        )
    listing = catalog.list(refresh=refresh)
    return {**listing, "routes": {name: list(items) for name, items in router.routes.items()}}


@bp.get("/api/models")
def models():
    """The configured providers' models, cached MODELS_CACHE_SECONDS; unreachable providers under ``errors``."""
    return jsonify(model_listing(refresh=request.args.get("refresh") in ("1", "true")))


@bp.get("/api/openapi.json")
@public
def openapi_json():
    """The OpenAPI description of the JSON API (public: it describes no data)."""
    doc = current_app.extensions.get("odysseus.openapi")
    if doc is None:
        doc = current_app.extensions.setdefault("odysseus.openapi", openapi.build())
    return jsonify(doc)
