"""The model's window over HTTP: GET /api/sessions/{id}/context, POST /api/sessions/{id}/compact.

A turn's own window is ``TurnService.window`` (``turns/start.py``); ``init_app`` creates the
app's window book and compactor both use."""

from __future__ import annotations

from typing import List, Optional

from flask import Blueprint, Flask, current_app, jsonify, request

from ..turns.messages import model_messages
from ..context.compaction import CompactionFailed, Compactor, hidden_ids, is_summary, older_half, visible
from ..context.tokens import TokenCounter, correction_from
from ..context.trim import conversation_count
from ..context.window import WindowBook
from ..errors import Conflict, ProviderError
from .auth import current_owner
from .params import body, optional_str

bp = Blueprint("window", __name__)


def _ext(name: str):
    return current_app.extensions[f"odysseus.{name}"]


def _summary_candidates(fallback: List):
    route = str(current_app.config.get("UTILITY_MODEL") or "").strip()
    return _ext("router").resolve(route) if route else fallback


def _session_rows(owner: str, session_id: str) -> List[dict]:
    _ext("store").sessions.get(owner, session_id)  # 404 for unknown or foreign ids
    return _ext("store").messages.recent(owner, session_id, int(current_app.config["HISTORY_CONTEXT_MESSAGES"]))


def _candidates(rows: List[dict], model: Optional[str]):
    """The route asked for; else the one that answered last (when still configured), else the default."""
    router = _ext("router")
    if model:
        return router.resolve(model)
    for row in reversed(rows):
        route = ((row.get("metadata") or {}).get("model_info") or {}).get("route")
        if row.get("role") == "assistant" and route:
            try:
                return router.resolve(route)
            except Exception:  # noqa: BLE001 - no longer configured: the default
                break
    return router.resolve(None)


@bp.get("/api/sessions/<session_id>/context")
def session_context(session_id: str):
    """How much of the model's window the session's next turn would use (an estimate)."""
    owner = current_owner()
    rows = _session_rows(owner, session_id)
    candidates = _candidates(rows, optional_str(dict(request.args), "model", 300))
    length, source = _ext("window.book").length(candidates[0])
    counter = TokenCounter(getattr(candidates[0].provider, "kind", None), correction_from(rows))
    shown = visible(rows)
    last: dict = next(
        (
            r["metadata"]["context"]
            for r in reversed(rows)
            if r.get("role") == "assistant" and isinstance((r.get("metadata") or {}).get("context"), dict)
        ),
        {},
    )
    return jsonify(
        {
            "context_length": length,
            "estimated_tokens": counter.count(model_messages(shown)),
            "model": candidates[0].route_id,
            "source": source,
            "messages": conversation_count([r for r in rows if r["role"] in ("user", "assistant")]),
            "messages_visible": sum(1 for r in shown if not is_summary(r)),
            "summarized_messages": len(hidden_ids(rows)),
            "last_prompt_tokens": last.get("prompt_tokens"),
            "reply_reserve": _ext("window.book").reserve(length),
        }
    )


@bp.post("/api/sessions/<session_id>/compact")
def compact_session(session_id: str):
    """Summarise the older half of the conversation now (409 while a reply is being written)."""
    owner = current_owner()
    data = body()
    rows = _session_rows(owner, session_id)
    run = _ext("runs").for_session(owner, session_id)
    if run is not None and run.status == "running":
        raise Conflict("a reply is being written in this session; compact it when the reply has finished")
    shown = visible(rows)
    compactor = _ext("window.compactor")
    chosen = older_half(shown + [{"role": "user"}])  # no message is being answered: the newest may be summarised
    if sum(1 for r in shown if not is_summary(r)) < max(2, compactor.min_messages) or not chosen:
        raise Conflict("there are not enough messages to compact yet")
    candidates = _candidates(rows, optional_str(data, "model", 300))
    length, _ = _ext("window.book").length(candidates[0])
    counter = TokenCounter(getattr(candidates[0].provider, "kind", None), correction_from(rows))
    before = model_messages(shown)
    try:
        summary = compactor.compact(owner, session_id, chosen, _summary_candidates(candidates), length)
    except (CompactionFailed, ProviderError) as exc:
        return jsonify({"error": exc.message}), 502
    after = model_messages(visible(rows + [summary]))
    return jsonify(
        {
            "compacted": True,
            "context_length": length,
            "message": summary,
            "data": {
                "messages_before": conversation_count(before),
                "messages_after": conversation_count(after),
                "tokens_before": counter.count(before),
                "tokens_after": counter.count(after),
            },
        }
    )


def init_app(app: Flask) -> None:
    """The app's window book (cached reports) and compactor, and the routes."""
    app.extensions["odysseus.window.book"] = WindowBook(app.config)
    app.extensions["odysseus.window.compactor"] = Compactor(app.extensions["odysseus.store"], app.config)
    app.register_blueprint(bp)
