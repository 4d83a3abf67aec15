"""/api/chat_stream and its companions: stream_status, resume, stop (spec: chat-stream-events.md)."""

from __future__ import annotations

from typing import Iterator, List, Optional

from flask import Blueprint, current_app, jsonify, request

from ..cancel import CancelToken
from ..chat_turn import chat_turn, model_messages
from ..errors import BadRequest, NotFound
from ..events import CHAT_TERMINAL, DELTA, Event
from ..llm.base import ChatRequest
from ..llm.llm_core import Candidate, stream_route
from ..sse import chat_frame, comment
from .auth import current_owner
from .params import body, cursor, optional_float, optional_str
from .streaming import run_stream, sse_response
from .turn_registry import build_turn

bp = Blueprint("chat", __name__)

MODES = ("chat", "agent", "compare")


def _ext(name: str):
    return current_app.extensions[f"odysseus.{name}"]


def _parse_chat_request() -> dict:
    """Validate the /api/chat_stream body; raises BadRequest before anything is stored."""
    data = body()
    message = data.get("message")
    if not isinstance(message, str) or not message.strip():
        raise BadRequest("message is required and must be a non-empty string")
    if len(message) > int(current_app.config["MAX_MESSAGE_CHARS"]):
        raise BadRequest("message is too long")
    mode = data.get("mode") or "chat"
    if mode not in MODES:
        raise BadRequest(f"unknown mode {mode!r}; expected one of {', '.join(MODES)}")
    session_id = optional_str(data, "session") or optional_str(data, "session_id")
    return {
        "data": data, "message": message, "mode": mode, "session_id": session_id,
        "model": optional_str(data, "model"),
        "temperature": optional_float(data, "temperature", 0.0, 2.0),
        "client_message_id": optional_str(data, "client_message_id", 200),
    }


@bp.post("/api/chat_stream")
def chat_stream():
    """Start a turn (or attach to the one a repeated ``client_message_id`` started) and stream it."""
    owner = current_owner()
    req = _parse_chat_request()
    store, manager, router = _ext("store"), _ext("runs"), _ext("router")
    candidates = router.resolve(req["model"])
    if req["session_id"]:
        store.sessions.get(owner, req["session_id"])  # 404 for unknown or foreign ids
    if req["mode"] == "compare":
        return _compare_stream(candidates, req, owner)

    prepared = build_turn(req, candidates, owner)  # validates mode-specific input; stores nothing
    if req["client_message_id"] and not req["session_id"]:
        # a retry whose first attempt died before the session header arrived: find that session
        req["session_id"] = store.messages.session_of_client_id(owner, req["client_message_id"])
    session_id = req["session_id"] or store.sessions.create(owner, _title(req["message"]))["id"]
    headers = {"X-Odysseus-Session-Id": session_id}
    with manager.session_lock(owner, session_id):
        if req["client_message_id"]:
            existing = _existing_turn(owner, session_id, req["client_message_id"], headers)
            if existing is not None:
                return existing
        manager.replace_running(owner, session_id)
        user_message_id = prepared.save_user_message(store, owner, session_id)
        history = store.messages.list(owner, session_id)
        run = manager.start(owner=owner, session_id=session_id, turn=prepared.turn(history),
                            mode=req["mode"], model=candidates[0].route_id,
                            client_message_id=req["client_message_id"], user_message_id=user_message_id,
                            terminal_type=prepared.terminal_type)
    return run_stream(manager, run, 0, chat_frame, headers)


def _title(message: str) -> str:
    text = " ".join(message.split())
    return text if len(text) <= 60 else text[:57] + "..."


def _existing_turn(owner: str, session_id: str, client_message_id: str, headers: dict):
    """The stream for a turn already started with this ``client_message_id``, or None."""
    store, manager = _ext("store"), _ext("runs")
    if store.messages.by_client_id(owner, session_id, client_message_id) is None:
        return None
    row = store.runs.by_client_message(owner, session_id, client_message_id)
    if row is not None:
        run = manager.get(owner, row["run_id"])
        if run is not None and not run.log.released:
            return run_stream(manager, run, 0, chat_frame, headers)
    return sse_response(_replay_final(owner, row), {**headers, **({"X-Odysseus-Run-Id": row["run_id"]} if row else {})})


def _replay_final(owner: str, row: Optional[dict]) -> Iterator[str]:
    """The final state of an evicted turn, rebuilt from history (no generation)."""
    yield comment("connected")
    if row is None or not row.get("message_id"):
        status = (row or {}).get("status", "unknown")
        yield chat_frame(Event("error", {"error": f"the earlier request ended as {status}", "status": 409}))
        return
    message = _ext("store").messages.get(owner, row["message_id"])
    meta = message["metadata"]
    if meta.get("model_info"):
        yield chat_frame(Event("model_info", meta["model_info"]))
    if message["thinking"]:
        yield chat_frame(Event(DELTA, {"delta": message["thinking"], "thinking": True}))
    if message["content"]:
        yield chat_frame(Event(DELTA, {"delta": message["content"]}))
    yield chat_frame(Event("message_saved", {"message_id": message["id"], "session_id": row["session_id"],
                                             "role": "assistant", "replayed": True}))
    yield chat_frame(Event(CHAT_TERMINAL, {"data": {"status": row["status"], "run_id": row["run_id"],
                                                     "message_id": message["id"], "replayed": True}}))
    if row["status"] == "done":
        yield chat_frame(Event("done", {}))
    elif row["status"] in ("error", "interrupted"):
        yield chat_frame(Event("error", {"error": row.get("error") or row["status"],
                                         "status": (meta.get("error") or {}).get("status") or 502}))


def _compare_stream(candidates: List[Candidate], req: dict, owner: str):
    """Compare mode: stream one model directly; nothing is detached or stored."""
    store = _ext("store")
    history = store.messages.list(owner, req["session_id"]) if req["session_id"] else []
    messages = model_messages(history) + [{"role": "user", "content": req["message"]}]
    request_ = ChatRequest(model=candidates[0].model, messages=messages, temperature=req["temperature"])
    cancel = CancelToken()

    def generate() -> Iterator[str]:
        yield comment("connected")
        try:
            for event in stream_route(candidates, request_, cancel):
                frame = chat_frame(event)
                if frame:
                    yield frame
            yield chat_frame(Event("done", {}))
        except Exception as exc:  # noqa: BLE001 - every failure becomes the stream's error event
            status = getattr(exc, "status", 500)
            message = getattr(exc, "message", "Internal error")
            yield chat_frame(Event("error", {"error": message, "status": status}))
        finally:
            cancel.cancel("client_gone")  # closes the provider connection when the client leaves

    return sse_response(generate())


@bp.get("/api/chat/stream_status/<session_id>")
def stream_status(session_id: str):
    """The caller's newest run on the session: status, ids, counters (never text)."""
    owner = current_owner()
    store, manager = _ext("store"), _ext("runs")
    store.sessions.get(owner, session_id)
    run = manager.for_session(owner, session_id)
    if run is not None:
        return jsonify(run.summary())
    row = store.runs.latest_for_session(owner, session_id)
    if row is None:
        raise NotFound("this session has no run")
    return jsonify({
        "run_id": row["run_id"], "session_id": session_id, "status": row["status"], "mode": row["mode"],
        "model": row["model"], "stop_reason": row["stop_reason"], "created_at": row["created_at"],
        "updated_at": row["updated_at"], "finished_at": row["finished_at"], "event_count": row["event_count"],
        "last_event_type": row["last_event_type"], "error": row["error"], "detached": bool(row["detached"]),
        "resumable": False,
    })


@bp.get("/api/chat/resume/<session_id>")
def resume(session_id: str):
    """Replay the session's run from the start or after the cursor, then follow it live."""
    owner = current_owner()
    after = cursor()
    store, manager = _ext("store"), _ext("runs")
    store.sessions.get(owner, session_id)
    run = manager.for_session(owner, session_id)
    if run is None or run.log.released:
        raise NotFound("no resumable run for this session; read its history instead")
    return run_stream(manager, run, after, chat_frame, {"X-Odysseus-Session-Id": session_id})


@bp.post("/api/chat/stop/<session_id>")
def stop(session_id: str):
    """Stop the session's run when ``X-Odysseus-Run-Id`` names it exactly."""
    owner = current_owner()
    _ext("store").sessions.get(owner, session_id)
    run_id = request.headers.get("X-Odysseus-Run-Id")
    if not run_id:
        data = request.get_json(silent=True) or {}
        run_id = data.get("run_id") if isinstance(data, dict) else None
    stopped = _ext("runs").stop(owner, session_id, run_id if isinstance(run_id, str) else None)
    return jsonify({"stopped": stopped})
