"""The streaming self-test: ``GET /api/diagnostics/stream`` (see ``odysseus.diagnostics``)."""

from __future__ import annotations

from flask import Blueprint, request

from .. import diagnostics
from ..errors import BadRequest
from .auth import public
from .streaming import sse_response

bp = Blueprint("diagnostics", __name__)


def _bounded(name: str, default: float, low: float, high: float) -> float:
    raw = request.args.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise BadRequest(f"{name} must be a number") from None
    if not (low <= value <= high):
        raise BadRequest(f"{name} must be between {low:g} and {high:g}")
    return value


@bp.get("/api/diagnostics/stream")
@public
def stream():
    """``count`` (2-10) timestamped frames ``interval_ms`` (50-1000) apart; public: it carries no data."""
    count = int(_bounded("count", diagnostics.DEFAULT_COUNT, 2, 10))
    interval = _bounded("interval_ms", diagnostics.DEFAULT_INTERVAL * 1000, 50, 1000) / 1000
    return sse_response(diagnostics.frames(count, interval))
