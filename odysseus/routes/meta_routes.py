"""Health and model listing."""

from __future__ import annotations

from flask import Blueprint, current_app, jsonify

bp = Blueprint("meta", __name__)


@bp.get("/api/health")
def health():
    """Liveness plus a few engine counters."""
    manager = current_app.extensions["odysseus.runs"]
    return jsonify({"ok": True, "active_runs": manager.active_count(), "runs_in_memory": len(manager.runs),
                    "log_bytes": manager.budget.used})


@bp.get("/api/models")
def models():
    """The configured providers' models (the demo model when none is configured)."""
    router = current_app.extensions["odysseus.router"]
    result = []
    for provider in router.providers.values():
        try:
            names = provider.list_models()
            error = None
        except Exception as exc:  # one unreachable provider must not fail the list
            names, error = [], getattr(exc, "message", str(exc))
        for name in names:
            result.append({"id": f"{provider.name}/{name}", "provider": provider.name, "model": name,
                           "kind": provider.kind})
        if error:
            result.append({"provider": provider.name, "kind": provider.kind, "error": error})
    return jsonify({"models": [m for m in result if "id" in m],
                    "errors": [m for m in result if "error" in m]})
