"""Parsing a turn request and handing it to the run engine: shared by every entry point.

/api/chat_stream, the agent API, background jobs and idempotent retries all come here:
validate everything (nothing is stored on a rejected request), let the mode's builder and
the context sources check their input, then ``RunEngine.start`` does the rest (see its
docstring for the order under the session lock).
"""

from __future__ import annotations

from flask import current_app

from ..context import ContextRequest, pipeline_of
from ..errors import BadRequest
from ..runs.engine import StartSpec, Started
from .branch_routes import apply_branch
from .params import optional_float, optional_str
from .turn_registry import build_turn

MODES = ("chat", "agent", "compare")

#: kept for the entry points that import it from here
StartedTurn = Started


def ext(name: str):
    """A per-app part from ``app.extensions``."""
    return current_app.extensions[f"odysseus.{name}"]


def parse_turn_request(data: dict, default_mode: str = "chat") -> dict:
    """Validate a turn body (chat_stream / agent / background); raises BadRequest."""
    message = data.get("message")
    mode = data.get("mode") or default_mode
    if not isinstance(mode, str) or (mode not in MODES and mode not in ext("runs").modes):
        raise BadRequest(
            f"unknown mode {mode!r}; expected one of {', '.join(sorted(set(MODES) | set(ext('runs').modes)))}"
        )
    # An agent approval answer or "continue" may come without a message; agent mode validates it.
    if mode == "agent" and message in (None, "") and (data.get("tool_approval_id") or data.get("continue")):
        message = ""
    elif not isinstance(message, str) or not message.strip():
        raise BadRequest("message is required and must be a non-empty string")
    if len(message) > int(current_app.config["MAX_MESSAGE_CHARS"]):
        raise BadRequest("message is too long")
    return {
        "data": data,
        "message": message,
        "mode": mode,
        "session_id": optional_str(data, "session") or optional_str(data, "session_id"),
        "model": optional_str(data, "model"),
        "temperature": optional_float(data, "temperature", 0.0, 2.0),
        "client_message_id": optional_str(data, "client_message_id", 200),
        "system_prompt": None,
    }


def start_turn(owner: str, req: dict) -> Started:
    """Start (or, for a repeated ``client_message_id``, find) the turn ``req`` describes."""
    store, engine, router = ext("store"), ext("runs"), ext("router")
    candidates = router.resolve(req["model"])
    if req["session_id"]:
        store.sessions.get(owner, req["session_id"])  # 404 for unknown or foreign ids
    prepared = build_turn(req, candidates, owner)  # validates mode-specific input; stores nothing
    for extend in req.get("extend", ()):  # e.g. the /v1 API records its response (odysseus.openai_api.service)
        extend(prepared)
    apply_branch(owner, req, prepared)  # regenerate / edit-and-resend (routes/branch_routes.py)
    # context sources validate their input (attachment ids, ...) before anything is stored
    context_meta = pipeline_of(current_app.extensions).check(
        ContextRequest(
            owner=owner, session_id=req["session_id"], mode=req["mode"], message=req["message"], data=req["data"]
        )
    )
    user_metadata = dict(prepared.user_metadata or {}, **context_meta)
    if req.get("agent"):
        user_metadata["agent"] = req["agent"]
    if req["client_message_id"] and not req["session_id"]:
        # a retry whose first attempt died before the session header arrived: find that session
        req["session_id"] = store.messages.session_of_client_id(owner, req["client_message_id"])
    return engine.start(
        StartSpec(
            owner=owner,
            session_id=req["session_id"],
            mode=req["mode"],
            model=candidates[0].route_id,
            make_turn=prepared.turn,
            message=prepared.message,
            user_metadata=user_metadata or None,
            client_message_id=req["client_message_id"],
            terminal_type=prepared.terminal_type,
            session_title=_title(req["message"]),
            in_transaction=prepared.in_transaction,
            **req.get("start_options", {}),  # run_id, session_origin, parent_id, exclusive (the /v1 API)
        )
    )


def _title(message: str) -> str:
    text = " ".join(message.split())
    return (text if len(text) <= 60 else text[:57] + "...") or "New chat"
