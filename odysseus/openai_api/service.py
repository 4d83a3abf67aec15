"""Starting a /v1 response or completion as a turn on the run engine: the one door into ``start_turn``.

[adapter] The turn service still takes ``req: dict`` (``routes/turn_start.py``); everything this API
hands it is built in ``_turn_request`` below, so moving to the typed ``TurnRequest`` changes that one
function. A /v1 turn is a turn like any other: stored in the owner's history (its session marked
``origin = "api"``), followed through the same run log, resumable and cancellable the same way.

Who answers:

- a model route: mode ``openai`` (registered here): the input the client sent (and, with
  ``previous_response_id``, the conversation stored before it) and the client's tools, ``turn.api_turn``;
- ``agent:<id>`` / ``workflow:<id>``: agent mode as the agent API runs it, server-side tools and all;
  an ``mcp_approval_response`` item answers the approval its ``mcp_approval_request`` asked for.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, MutableMapping, Optional, Tuple

from ..errors import Conflict, InvalidParam, NotFound
from ..runs.engine import Started
from ..store import new_id
from ..store.openai_responses import insert_head
from .head import RESPONSE, ResponseHead, object_id
from .parse import ApiRequest, provider_extra
from .turn import META, api_turn, recorded

#: the run mode of a /v1 turn answered by a model route
MODE = "openai"
#: ``sessions.origin`` of a conversation made through /v1
ORIGIN = "api"
#: the prefix of an ``mcp_approval_request`` item id (``responses_wire.approval_item_id``)
APPROVAL_PREFIX = "mcpr_"


def make_head(req: ApiRequest, run_id: str) -> ResponseHead:
    """The head of the response or completion ``req`` starts as run ``run_id``."""
    return ResponseHead(
        id=object_id(req.kind, run_id),
        kind=req.kind,
        created_at=round(time.time(), 3),
        model=req.model,
        instructions=req.instructions,
        metadata=dict(req.metadata),
        temperature=req.temperature,
        top_p=req.top_p,
        max_output_tokens=req.max_output_tokens,
        tools=[dict(tool) for tool in req.tools],
        tool_choice=req.tool_choice,
        parallel_tool_calls=req.parallel_tool_calls,
        previous_response_id=req.previous_response_id,
        background=req.background,
        store=req.store,
        include_usage=req.include_usage,
    )


class ApiService:
    """One app's OpenAI-compatible turns: checks what the request refers to, then starts it."""

    def __init__(self, parts: MutableMapping[str, Any], start_turn: Callable[[str, dict], Started]):
        self.parts = parts
        self._start_turn = start_turn

    @property
    def store(self) -> Any:
        """The app's database."""
        return self.parts["odysseus.store"]

    def start(self, owner: str, req: ApiRequest) -> Tuple[Started, ResponseHead]:
        """Start ``req`` (checked, nothing stored on a refusal) and return the started run and its head."""
        session_id, parent = self._continuation(owner, req)
        if req.approval is not None and req.target.kind == "model":
            raise InvalidParam("an mcp_approval_response answers an agent's or a workflow's request", "input")
        if req.target.kind != "model" and req.tools:
            raise InvalidParam("client tools cannot be given to an agent or a workflow (their tools run here)", "tools")
        run_id = new_id("run_")
        head = make_head(req, run_id)
        started = self._start_turn(owner, self._turn_request(owner, req, head, run_id, session_id, parent))
        return started, head

    def _continuation(self, owner: str, req: ApiRequest) -> Tuple[Optional[str], Optional[int]]:
        """The session and the reply a ``previous_response_id`` continues (None, None for a new conversation)."""
        if not req.previous_response_id:
            return None, None
        row = self.store.openai_responses.find(owner, req.previous_response_id)
        if row is None or row["kind"] != RESPONSE or not row["stored"]:
            raise InvalidParam(
                f"Previous response with id '{req.previous_response_id}' not found.",
                "previous_response_id",
                "previous_response_not_found",
            )
        if row["status"] == "running":
            raise Conflict(f"Previous response with id '{req.previous_response_id}' is still in progress.")
        return row["session_id"], row.get("message_id")

    def _turn_request(
        self, owner: str, req: ApiRequest, head: ResponseHead, run_id: str, session_id: Optional[str], parent: Any
    ) -> dict:
        """[adapter] The ``req`` dict of ``routes/turn_start.start_turn`` for this request."""
        user_meta = {META: {"id": head.id, "input": req.messages}}

        def record(prepared: Any) -> None:
            """Make the mode's prepared turn store this head with the start and keep the output shape."""
            if head.kind == RESPONSE:  # a completion has no object to read back after its window
                make = prepared.make_turn
                prepared.make_turn = lambda history: recorded(make(history), head)
            prepared.in_transaction.append(
                lambda db: insert_head(db, owner, head.id, run_id, head.kind, head.to_json(), req.store)
            )
            prepared.user_metadata = dict(prepared.user_metadata or {}, **user_meta)

        data: Dict[str, Any] = {"use_memory": False}  # /v1 sends the model what the client sent, nothing more
        turn: Dict[str, Any] = {
            "data": data,
            "message": req.display,
            "mode": MODE,
            "session_id": session_id,
            "model": req.target.name if req.target.kind == "model" else None,
            "temperature": req.temperature,
            "client_message_id": None,
            "system_prompt": None,
            "api": (req, head),
            "extend": [record],
            "start_options": {"run_id": run_id, "session_origin": ORIGIN, "parent_id": parent, "exclusive": True},
        }
        if req.target.kind != "model":
            self._as_agent(owner, req, turn)
        return turn

    def _as_agent(self, owner: str, req: ApiRequest, turn: dict) -> None:
        """Route the turn to agent mode: the agent or workflow answers; an approval response is its answer."""
        from ..routes.agent_routing import apply_agent_routing  # [adapter] until turns/ routes agents

        data = turn["data"]
        data["workflow_id" if req.target.kind == "workflow" else "target_agent_id"] = req.target.name
        turn["mode"] = "agent"
        if req.approval is not None:
            item_id, approve = req.approval
            if not item_id.startswith(APPROVAL_PREFIX):
                raise InvalidParam("'approval_request_id' names no approval request", "input", "approval_not_found")
            data["tool_approval_id"] = item_id[len(APPROVAL_PREFIX) :]
            data["tool_approval_decision"] = "approve" if approve else "deny"
            if not any(m["role"] == "user" and m["content"].strip() for m in req.messages):
                turn["message"] = ""
        try:
            apply_agent_routing(self.store, owner, turn)
        except NotFound:
            raise NotFound(f"The model '{req.model}' does not exist (no such {req.target.kind} of yours)") from None
        if req.instructions:
            prompt = turn.get("system_prompt")
            turn["system_prompt"] = f"{prompt}\n\n{req.instructions}" if prompt else req.instructions


def build_api_turn(req: dict, candidates: List[Any], owner: str) -> Any:
    """The ``openai`` mode's builder (``routes/turn_registry``): the client's input and tools, nothing else."""
    from ..routes.turn_registry import PreparedTurn  # [adapter] turns/registry.py once TurnRequest lands
    from ..errors import BadRequest

    if not isinstance(req.get("api"), tuple):
        raise BadRequest("mode 'openai' is for the OpenAI-compatible API (/v1) only")
    api, head = req["api"]
    tools = api.provider_tools if api.tool_choice != "none" else []
    extra = provider_extra(api)
    return PreparedTurn(
        api.display,
        None,
        lambda history: api_turn(candidates, history, head, tools, extra),
    )
