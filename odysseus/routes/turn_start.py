"""Starting a turn on the run engine: shared by /api/chat_stream, the agent API and background jobs.

Order matters and is the same for every entry point: validate everything (nothing is
stored on a rejected request), then under the session lock: idempotency check, replace a
running run, save the user message, start the run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from flask import current_app

from ..context import ContextRequest, pipeline_of
from ..errors import BadRequest
from ..runs.run import Run
from .params import optional_float, optional_str
from .turn_registry import build_turn

MODES = ("chat", "agent", "compare")


def ext(name: str):
    """A per-app part from ``app.extensions``."""
    return current_app.extensions[f"odysseus.{name}"]


def parse_turn_request(data: dict, default_mode: str = "chat") -> dict:
    """Validate a turn body (chat_stream / agent / background); raises BadRequest."""
    message = data.get("message")
    mode = data.get("mode") or default_mode
    if mode not in MODES:
        raise BadRequest(f"unknown mode {mode!r}; expected one of {', '.join(MODES)}")
    # An agent approval answer or "continue" may come without a message; agent mode validates it.
    if mode == "agent" and message in (None, "") and (data.get("tool_approval_id") or data.get("continue")):
        message = ""
    elif not isinstance(message, str) or not message.strip():
        raise BadRequest("message is required and must be a non-empty string")
    if len(message) > int(current_app.config["MAX_MESSAGE_CHARS"]):
        raise BadRequest("message is too long")
    return {
        "data": data, "message": message, "mode": mode,
        "session_id": optional_str(data, "session") or optional_str(data, "session_id"),
        "model": optional_str(data, "model"),
        "temperature": optional_float(data, "temperature", 0.0, 2.0),
        "client_message_id": optional_str(data, "client_message_id", 200),
        "system_prompt": None,
    }


@dataclass
class StartedTurn:
    """What a start produced: a live run to follow, or an earlier turn's saved final state."""

    session_id: str
    run: Optional[Run]
    replay_row: Optional[dict] = None
    attached: bool = False


def start_turn(owner: str, req: dict) -> StartedTurn:
    """Start (or, for a repeated ``client_message_id``, find) the turn ``req`` describes."""
    store, manager, router = ext("store"), ext("runs"), ext("router")
    candidates = router.resolve(req["model"])
    if req["session_id"]:
        store.sessions.get(owner, req["session_id"])  # 404 for unknown or foreign ids
    prepared = build_turn(req, candidates, owner)  # validates mode-specific input; stores nothing
    # context sources validate their input (attachment ids, ...) before anything is stored
    context_meta = pipeline_of(current_app.extensions).check(ContextRequest(
        owner=owner, session_id=req["session_id"], mode=req["mode"], message=req["message"], data=req["data"]))
    if context_meta:
        prepared.user_metadata = dict(prepared.user_metadata or {}, **context_meta)
    if req.get("agent"):
        prepared.user_metadata = dict(prepared.user_metadata or {}, agent=req["agent"])
    if req["client_message_id"] and not req["session_id"]:
        # a retry whose first attempt died before the session header arrived: find that session
        req["session_id"] = store.messages.session_of_client_id(owner, req["client_message_id"])
    session_id = req["session_id"] or store.sessions.create(owner, _title(req["message"]))["id"]
    with manager.session_lock(owner, session_id):
        if req["client_message_id"] and store.messages.by_client_id(owner, session_id, req["client_message_id"]):
            row = store.runs.by_client_message(owner, session_id, req["client_message_id"])
            run = manager.get(owner, row["run_id"]) if row else None
            if run is not None and not run.log.released:
                return StartedTurn(session_id, run, attached=True)
            return StartedTurn(session_id, None, replay_row=row, attached=True)
        manager.replace_running(owner, session_id)
        user_message_id = prepared.save_user_message(store, owner, session_id)
        history = store.messages.list(owner, session_id)
        run = manager.start(owner=owner, session_id=session_id, turn=prepared.turn(history), mode=req["mode"],
                            model=candidates[0].route_id, client_message_id=req["client_message_id"],
                            user_message_id=user_message_id, terminal_type=prepared.terminal_type)
    return StartedTurn(session_id, run)


def _title(message: str) -> str:
    text = " ".join(message.split())
    return text if len(text) <= 60 else text[:57] + "..."
