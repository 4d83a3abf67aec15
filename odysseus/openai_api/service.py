"""Starting a /v1 response or completion as a turn on the run engine: one ``TurnRequest``, one call.

A /v1 turn is a turn like any other (``turns.start.TurnService.start_turn``): stored in the owner's
history (its session marked ``origin = "api"``), followed through the same run log, resumable and
cancellable the same way. What this API needs of it travels in the request's own fields: the run id
(the response id is derived from it), ``origin``, ``parent_message_id`` (``previous_response_id``),
``exclusive`` and ``api`` (the client's input and tools).

Who answers:

- a model route: mode ``openai`` (``build_api_turn``): the input the client sent (and, with
  ``previous_response_id``, the conversation stored before it) and the client's tools, ``turn.api_turn``;
- ``agent:<id>`` / ``workflow:<id>``: agent mode as the agent API runs it, server-side tools and all;
  an ``mcp_approval_response`` item answers the approval its ``mcp_approval_request`` asked for.

Either way ``record`` (a prepared-turn hook of the turn service) stores the response's head with the
run's start and, for a response, folds its output shape into the saved reply (``turn.recorded``).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, List, MutableMapping, Optional, Tuple

from ..context.options import ContextOptions
from ..errors import BadRequest, Conflict, InvalidParam, NotFound
from ..llm.llm_core import Candidate
from ..runs.engine import Started
from ..store import new_id
from ..store.openai_responses import insert_head
from ..turns.registry import PreparedTurn
from ..turns.request import AgentChoice, ApiTurn, ApprovalAnswer, TurnRequest
from ..turns.routing import route_agent
from .head import RESPONSE, ResponseHead, object_id
from .parse import ApiRequest, provider_extra
from .turn import META, api_turn, recorded

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

    def __init__(self, parts: MutableMapping[str, Any]):
        self.parts = parts

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
        request = TurnRequest(
            message=req.display,
            mode=MODE,
            session_id=session_id,
            model=req.target.name if req.target.kind == "model" else None,
            temperature=req.temperature,
            max_tokens=req.max_output_tokens,
            # /v1 sends the model what the client sent: no memories, files or web (nor the owner's prompt)
            context=ContextOptions(use_memory=False, use_rag=False, use_web=False),
            run_id=run_id,
            origin=ORIGIN,
            parent_message_id=parent,
            exclusive=True,
            api=ApiTurn(
                head=head.to_json(),
                messages=tuple(req.messages),
                tools=tuple(req.provider_tools) if req.tool_choice != "none" else (),
                provider_options=provider_extra(req),
            ),
        )
        if req.target.kind != "model":
            request = self._as_agent(owner, req, request)
        return self.parts["odysseus.turns"].start_turn(owner, request), head

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

    def _as_agent(self, owner: str, req: ApiRequest, request: TurnRequest) -> TurnRequest:
        """The turn in agent mode: the agent or workflow answers; an approval response is its answer."""
        workflow = req.target.kind == "workflow"
        request = dataclasses.replace(
            request,
            mode="agent",
            workflow_id=req.target.name if workflow else None,
            route=AgentChoice(target_agent_id=None if workflow else req.target.name),
        )
        if req.approval is not None:
            item_id, approve = req.approval
            if not item_id.startswith(APPROVAL_PREFIX):
                raise InvalidParam("'approval_request_id' names no approval request", "input", "approval_not_found")
            answer = ApprovalAnswer(item_id[len(APPROVAL_PREFIX) :], "approve" if approve else "deny")
            has_text = any(m["role"] == "user" and m["content"].strip() for m in req.messages)
            request = dataclasses.replace(request, approval=answer, message=request.message if has_text else "")
        try:
            request = route_agent(self.store, owner, request)  # the agent's model, prompt and tools
        except NotFound:
            raise NotFound(f"The model '{req.model}' does not exist (no such {req.target.kind} of yours)") from None
        if req.instructions:
            prompt = request.system_prompt
            request = dataclasses.replace(
                request, system_prompt=f"{prompt}\n\n{req.instructions}" if prompt else req.instructions
            )
        return request


def record(parts: MutableMapping[str, Any]) -> Callable[[str, TurnRequest, PreparedTurn], None]:
    """The turn service's prepared-turn hook for /v1 turns (any mode): the head stored with the start, the
    input kept with the user message, a response's output shape folded into its saved reply."""

    def hook(owner: str, request: TurnRequest, prepared: PreparedTurn) -> None:
        api, run_id = request.api, request.run_id
        if api is None or run_id is None:
            return
        head = ResponseHead.from_json(dict(api.head))
        if head.kind == RESPONSE:  # a completion has no object to read back after its window
            make = prepared.make_turn
            prepared.make_turn = lambda history: recorded(make(history), head)
        prepared.in_transaction.append(
            lambda db: insert_head(db, owner, head.id, run_id, head.kind, head.to_json(), head.store)
        )
        meta = {META: {"id": head.id, "input": [dict(message) for message in api.messages]}}
        prepared.user_metadata = dict(prepared.user_metadata or {}, **meta)

    return hook


def build_api_turn(service: Any, request: TurnRequest, candidates: List[Candidate], owner: str) -> PreparedTurn:
    """The ``openai`` mode's builder: the client's input and tools, nothing else (no context sources)."""
    api = request.api
    if api is None:
        raise BadRequest("mode 'openai' is for the OpenAI-compatible API (/v1) only")
    head = ResponseHead.from_json(dict(api.head))
    tools = [dict(tool) for tool in api.tools]
    extra = dict(api.provider_options)
    return PreparedTurn(
        request.message,
        None,
        lambda history: api_turn(candidates, history, head, tools, extra),
    )
