"""Flask glue of agent mode: the ``agent`` builder of /api/chat_stream, approvals, images.

Three kinds of agent request reach ``build_agent_turn``:

- a new task: ``message`` (the user's message is stored as usual);
- an approval answer: ``tool_approval_id`` + ``tool_approval_decision`` (+ optionally
  ``tool_approval_call``, the call as shown, which must match). The approval is checked
  and consumed before anything is stored; the stored user message is a short readable
  line ("Approved: shell") with the decision in its metadata;
- ``continue: true`` after ``rounds_exhausted``: the state saved in the last assistant
  message's metadata is picked up; an optional ``message`` is passed to the model.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import os
import re
import secrets
import shutil
import time
from typing import List, Optional

from flask import Blueprint, Flask, current_app, send_file

from .. import signals
from ..agent.agent_loop import AgentHooks, Resolution, agent_turn, initial_state
from ..agent.approvals import call_hash, check, new_approval_id, refused
from ..agent.guards import AgentSettings
from ..turns.messages import model_messages
from ..context.agent_context import with_context
from ..context.memories import memory_book
from ..context.workspace import chosen_workspace
from ..errors import BadRequest, NotFound
from ..events import AGENT_TERMINAL
from ..runs.engine import Turn
from ..runs.run import RunContext
from ..store.approvals import ApprovalRepo
from ..tools import ToolContext, ToolRegistry, build_registry
from ..tools.code import CODE_TOOL_NAMES
from ..tools.registry import safe_segment
from ..tools.sandbox import startup_status
from . import code_tools_routes
from .alloy_mode import build_workflow_turn, wants_workflow
from .auth import current_owner
from .document_mode import document_adder, with_document_tools
from .params import optional_str
from .turn_registry import PreparedTurn, context_gather, register_mode
from .window_routes import turn_window

bp = Blueprint("agent_mode", __name__)

DECISION_LABELS = {"approve": "Approved", "approve_task": "Approved for this task", "deny": "Denied"}
IMAGE_NAME = re.compile(r"^img_[A-Za-z0-9_-]{16,64}\.(png|jpg|webp|gif)$")
EXTENSIONS = {"image/png": "png", "image/jpeg": "jpg", "image/webp": "webp", "image/gif": "gif"}


class AgentService:
    """Per-app agent state: settings, the tool registry, and the storage hooks the loop uses."""

    def __init__(self, app: Flask):
        self.config = app.config
        self.store = app.extensions["odysseus.store"]
        self.settings = AgentSettings.from_config(app.config)
        self.registry = build_registry(app.config)
        # Fail closed: without a working sandbox the code tools are not offered at all.
        self.sandbox = startup_status(app.config)
        if not self.sandbox.available:
            self.registry = ToolRegistry(t for n, t in self.registry.tools.items() if n not in CODE_TOOL_NAMES)
        self.data_dir = app.config["DATA_DIR"]
        self.hooks = AgentHooks(
            request_approval=self.request_approval, tool_context=self.tool_context, amend_exhibit=self.amend_exhibit
        )

    def amend_exhibit(self, ctx: RunContext, exhibit: dict) -> None:
        """Replace an exhibit with the same id in the session's earlier saved replies."""
        self.store.messages.amend_exhibit(ctx.owner, ctx.session_id, exhibit)

    def request_approval(self, ctx: RunContext, call: dict, state: dict) -> dict:
        """Persist an approval request with the continuation state."""
        row = self.store.approvals.create(
            approval_id=new_approval_id(),
            owner=ctx.owner,
            session_id=ctx.session_id,
            run_id=ctx.run_id,
            call=call,
            call_hash=call_hash(call),
            state=state,
            ttl=self.settings.approval_ttl,
        )
        return {"approval_id": row["id"], "expires_at": row["expires_at"]}

    def tool_context(self, ctx: RunContext, network: bool = False) -> ToolContext:
        """The context tools of this run get: workspace root, config, image storage, sandbox network."""
        return ToolContext(
            owner=ctx.owner,
            session_id=ctx.session_id,
            cancel=ctx.cancel,
            config=dict(self.config),
            workspace_root=os.path.join(self.data_dir, "workspaces"),
            save_image=lambda data, mime: self.save_image(ctx.owner, ctx.session_id, data, mime),
            # context/workspace.py: a chosen host directory (judged again); memories for manage_memory
            workspace_dir=chosen_workspace(ctx.metadata, self.config),
            memory=memory_book(self.store, self.config, ctx.owner),
            network=network,
        )

    def forget_session(self, app: Flask, owner: str, session_id: str, images: List[str]) -> None:
        """A session was deleted: remove its image files and its workspace directory."""
        folder = os.path.join(self.data_dir, "images")
        for name in images:
            if IMAGE_NAME.match(name):
                with contextlib.suppress(OSError):
                    os.remove(os.path.join(folder, name))
        workspace = os.path.join(self.data_dir, "workspaces", safe_segment(owner), safe_segment(session_id))
        shutil.rmtree(workspace, ignore_errors=True)

    def save_image(self, owner: str, session_id: Optional[str], data: bytes, mime: str) -> str:
        """Store image bytes under DATA_DIR/images, record the owner, return our URL."""
        name = f"img_{secrets.token_urlsafe(16)}.{EXTENSIONS.get(mime, 'png')}"
        folder = os.path.join(self.data_dir, "images")
        os.makedirs(folder, exist_ok=True)
        tmp = os.path.join(folder, f".{name}.tmp")
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, os.path.join(folder, name))
        self.store.images.add(name, owner, session_id, mime, len(data))
        return f"/api/images/{name}"


def _service() -> AgentService:
    return current_app.extensions["odysseus.agent"]


def _flag(value) -> bool:
    return value is True or (isinstance(value, str) and value.lower() in ("1", "true", "yes"))


def _attached_only(history: List[dict]) -> Turn:
    """The turn of a retried approval answer: the engine attaches to the one it started, never calls this."""
    raise RuntimeError("a retried approval answer starts no new turn")


def build_agent_turn(req: dict, candidates, owner: str) -> PreparedTurn:
    """Validate an agent request (approval answer, continue, or new task); store nothing."""
    service = _service()
    data = req["data"]
    session_id = req["session_id"]
    approval_id = optional_str(data, "tool_approval_id", 200)
    state: Optional[dict] = None
    resolution: Optional[Resolution] = None
    message = req["message"]
    user_metadata: Optional[dict] = None
    in_transaction: list = []
    if approval_id:
        decision = data.get("tool_approval_decision")
        row = service.store.approvals.get(approval_id)
        if (
            row is not None
            and row.get("used_at")
            and row["owner"] == owner
            and req["client_message_id"]
            and session_id == row["session_id"]
            and service.store.messages.by_client_id(owner, session_id, req["client_message_id"])
        ):
            # A retried answer: chat_stream attaches to the turn it already started.
            return PreparedTurn("", req["client_message_id"], _attached_only, terminal_type=AGENT_TERMINAL)
        check(
            row,
            owner=owner,
            session_id=session_id,
            decision=decision,
            presented=data.get("tool_approval_call"),
            now=time.time(),
        )
        # consumed inside the start transaction: a start that fails (503 at capacity) leaves it unused
        in_transaction.append(lambda db: consume_in(db, approval_id, owner, decision))
        state, resolution = row["state"], Resolution(approval_id, decision, row["call"])
        message = f"{DECISION_LABELS[decision]}: {row['call'].get('name')}"
        user_metadata = {
            "agent_action": {
                "tool_approval": {
                    "approval_id": approval_id,
                    "decision": decision,
                    "call_id": row["call"].get("id"),
                    "server_id": row["call"].get("server_id"),
                }
            }
        }
    elif _flag(data.get("continue")):
        if not session_id:
            raise BadRequest("continue needs the session_id of the paused task", reason="invalid")
        last = service.store.messages.latest(owner, session_id, "assistant")
        saved = ((last or {}).get("metadata") or {}).get("agent", {}).get("continuation")
        if not saved:
            raise BadRequest("there is no paused agent task to continue in this session", reason="invalid")
        state = copy.deepcopy(saved)
        text = (message or "").strip()
        if text:
            state["messages"].append({"role": "user", "content": text})
        message = text or "Continue"
        user_metadata = {"agent_action": {"continue": True, "task_id": state.get("task_id")}}
    elif not (message or "").strip():
        raise BadRequest("message is required and must be a non-empty string")
    # Agent Alloy: a task for a workflow's supervisor, or the continuation of one (routes/alloy_mode.py)
    if wants_workflow(data, state):
        return build_workflow_turn(req, candidates, owner, state, resolution, message, user_metadata)

    settings = service.settings
    registry, active_doc = with_document_tools(service.registry, data, owner)  # + the document tools of this turn
    if req.get("tools") is not None:  # an agent profile limits the tools
        registry = ToolRegistry(t for name, t in registry.tools.items() if name in set(req["tools"]))
    if req.get("system_prompt"):  # an agent profile's prompt comes first; the tool guidance stays
        settings = dataclasses.replace(settings, system_prompt=f"{req['system_prompt']}\n\n{settings.system_prompt}")
    # Code tools only for whom the admin allows them; network only where a profile allows it.
    registry, network = code_tools_routes.offer(registry, owner, (req.get("agent") or {}).get("profile_id"))
    hooks = dataclasses.replace(service.hooks, tool_context=lambda ctx: service.tool_context(ctx, network=network))

    # the model rides along so a source can tell whether it accepts images
    gather = (
        context_gather(dict(req, data={**req["data"], "model": req.get("model")}), owner) if state is None else None
    )

    window = turn_window(req, candidates)  # the model's window: compaction, trimming (issue 17)

    def make_turn(history):
        start = state if state is not None else initial_state(history, settings)
        with_doc = document_adder(active_doc, owner, history)  # the active document, read now
        if state is None:
            start["messages"] = with_doc(start["messages"])

        def build(rows):  # the new task's messages from the rows the model sees (after a summary)
            return with_doc(model_messages(rows, settings.system_prompt))

        turn = agent_turn(candidates, registry, settings, hooks, start, resolution, req.get("temperature"))
        # context pipeline (odysseus.context): attachments, retrieval, memories, workspace, ... gathered and
        # announced before the loop's first round (a continued task gathers nothing new)
        return with_context(turn, start, gather, window=window, history=history, build=build)

    return PreparedTurn(
        message,
        req["client_message_id"],
        make_turn,
        terminal_type=AGENT_TERMINAL,
        user_metadata=user_metadata,
        in_transaction=in_transaction,
    )


def consume_in(db, approval_id: str, owner: str, decision: str) -> None:
    """Mark the approval used inside the caller's transaction; a racing answer that won rolls this start back."""
    if not ApprovalRepo.consume_with(db, approval_id, owner, decision, time.time()):
        raise refused("invalid", "this approval has already been answered")


@bp.get("/api/images/<name>")
def image(name: str):
    """A generated image, only for the owner who generated it."""
    owner = current_owner()
    if not IMAGE_NAME.match(name):
        raise NotFound("image not found")
    row = _service().store.images.get(owner, name)
    path = os.path.join(_service().data_dir, "images", name)
    if row is None or not os.path.isfile(path):
        raise NotFound("image not found")
    response = send_file(os.path.abspath(path), mimetype=row["mime"], max_age=3600)
    response.headers["Cache-Control"] = "private, max-age=3600"
    response.headers["X-Content-Type-Options"] = "nosniff"
    return response


def init_app(app: Flask) -> None:
    """Build the agent service from app config, register agent mode and the image route."""
    service = app.extensions["odysseus.agent"] = AgentService(app)
    signals.session_deleted.connect(service.forget_session, sender=app, weak=False)
    register_mode(app, "agent", build_agent_turn)
    app.register_blueprint(bp)
