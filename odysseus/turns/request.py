"""``TurnRequest``: one turn as every entry point hands it to ``TurnService.start_turn``.

A frozen dataclass rather than a ``TypedDict``: the fields have defaults (a caller such as the
OpenAI-compatible API sets only what it has), nested groups are types of their own, a resolved
request is a new value (``dataclasses.replace``) so no step edits another's input, and
``to_json``/``from_json`` need the field types at run time.

Adding a field to a turn: declare it here (or in the group it belongs to, e.g.
``context.options.ContextOptions``) and add its line to ``turns/parse.py``. Serialising (the
background job table) follows the declaration by itself.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional, Tuple

from ..context.options import ContextOptions

#: the key that marks a job row holding ``TurnRequest.to_json()`` (older rows hold the raw body)
JSON_MARK = "_turn_request"
JSON_VERSION = 1


@dataclass(frozen=True)
class ApprovalAnswer:
    """An agent turn that answers a tool approval (``tool_approval_id``, ``_decision``, ``_call``).

    Checked against the stored approval in ``agent.approvals.check`` (an unknown id is refused
    before the decision, so ids cannot be probed), then consumed with the start.
    """

    approval_id: str
    #: "approve", "approve_task" or "deny"; anything else ("" for a non-string) is refused by the check
    decision: str
    #: the call as the user saw it (a JSON value); when given it must match the stored call
    presented_call: Any = None


@dataclass(frozen=True)
class BranchAsk:
    """``regenerate_of`` / ``edit_of``: the stored message a turn branches from (``turns/branch.py``)."""

    kind: str  # "regenerate" | "edit"
    message_id: int


@dataclass(frozen=True)
class AgentChoice:
    """Which agent should answer (the agent API); resolved by ``turns/routing.py``.

    ``TurnRequest.workflow_id`` wins, then ``target_agent_id``, then ``profile_id``, then the
    owner's default profile.
    """

    target_agent_id: Optional[str] = None
    #: ``agent_profile_id`` (or its older name ``profile_id``)
    profile_id: Optional[str] = None


@dataclass(frozen=True)
class RoutedAgent:
    """Who answers the turn, as recorded in the user message's metadata (``agent``)."""

    routed_by: str  # "workflow_id" | "target_agent_id" | "profile_id" | "default"
    agent_id: Optional[str] = None
    profile_id: Optional[str] = None
    workflow_id: Optional[str] = None

    def label(self) -> Dict[str, Any]:
        """The ``agent`` metadata: the ids that say who answered, and how it was chosen."""
        if self.routed_by == "workflow_id":
            return {"workflow_id": self.workflow_id, "agent_id": self.agent_id, "routed_by": self.routed_by}
        if self.routed_by == "target_agent_id":
            return {"agent_id": self.agent_id, "profile_id": self.profile_id, "routed_by": self.routed_by}
        return {"profile_id": self.profile_id, "routed_by": self.routed_by}


@dataclass(frozen=True)
class ApiTurn:
    """What a client of the OpenAI-compatible API (/v1, ``odysseus.openai_api``) sent, as plain data.

    Set only on /v1 turns: the response's head (``openai_api.head.ResponseHead.to_json()``), this
    request's input as provider chat messages, and the client's function tools and the provider
    options that go with them (``tool_choice``, ``top_p``, ...), as the provider wants them.
    """

    head: Mapping[str, Any]
    messages: Tuple[Mapping[str, Any], ...]
    tools: Tuple[Mapping[str, Any], ...] = ()
    provider_options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TurnRequest:
    """One turn: what to say, in which mode and session, and every option a mode or source reads."""

    #: the user's message ("" for an approval answer or ``continue`` without one)
    message: str
    #: "chat", "agent", "research", or another registered mode ("compare" never starts a run)
    mode: str = "chat"
    #: None: a new session (or, with ``client_message_id``, the one an earlier attempt created)
    session_id: Optional[str] = None
    #: the model route (None: the default route)
    model: Optional[str] = None
    temperature: Optional[float] = None
    #: makes a retry idempotent: the same id attaches to the turn it started
    client_message_id: Optional[str] = None
    #: prepended to the conversation (chat), or before the agent's own guidance
    system_prompt: Optional[str] = None
    #: the most tokens the reply may use (the model's window, ``context/turn_window.py``)
    max_tokens: Optional[int] = None
    #: the context sources' switches (attachments, use_rag, use_web, use_memory, workspace)
    context: ContextOptions = field(default_factory=ContextOptions)
    #: agent mode: this turn answers a tool approval
    approval: Optional[ApprovalAnswer] = None
    #: agent mode: ``continue`` a task paused at ``rounds_exhausted``
    resume: bool = False
    #: agent mode: an Agent Alloy workflow answers (``turns/workflow.py``)
    workflow_id: Optional[str] = None
    #: an open editor document: chat gets the document tools, agent mode adds them (``turns/document.py``)
    active_doc_id: Optional[str] = None
    #: agent mode: only these tools (an agent profile's list); None: every tool the owner may use
    tools: Optional[Tuple[str, ...]] = None
    #: research mode: the limits asked for (``research.limits.REQUEST_FIELDS``), validated numbers
    research: Mapping[str, float] = field(default_factory=dict)
    #: regenerate or edit-and-resend (the page's chat_stream only)
    branch: Optional[BranchAsk] = None
    #: the agent API: pick the agent or profile that answers (None: no routing)
    route: Optional[AgentChoice] = None
    #: who answers, once routed (stored with the user message)
    agent: Optional[RoutedAgent] = None
    #: fill ``system_prompt`` and ``temperature`` from the owner's settings where this request leaves them empty
    owner_defaults: bool = False
    #: body fields no field here declares, for context sources added outside this package
    extra: Mapping[str, Any] = field(default_factory=dict)
    #: the run's id, chosen by the caller before the start (the /v1 API derives its response id from it)
    run_id: Optional[str] = None
    #: where a session this turn creates comes from (``sessions.origin``): None, the page; "api", /v1
    origin: Optional[str] = None
    #: the stored message this turn's user message answers, when not the session's branch head (/v1's
    #: ``previous_response_id``: a fork of the conversation at that reply)
    parent_message_id: Optional[int] = None
    #: refuse (409) instead of replacing a run of the session that is still running
    exclusive: bool = False
    #: a turn of the OpenAI-compatible API: the client's input and tools (mode ``openai``, and agents)
    api: Optional[ApiTurn] = None

    def to_json(self) -> Dict[str, Any]:
        """A JSON-able dict (the background job table); ``from_json`` reads it back."""
        out: Dict[str, Any] = _plain(self)
        out[JSON_MARK] = JSON_VERSION
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "TurnRequest":
        """The request ``to_json`` wrote."""
        request: TurnRequest = _build(cls, {k: v for k, v in data.items() if k != JSON_MARK})
        return request

    @staticmethod
    def is_json(data: Mapping[str, Any]) -> bool:
        """True when ``data`` was written by ``to_json`` (an older job row holds the raw body instead)."""
        return data.get(JSON_MARK) == JSON_VERSION


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value


@functools.lru_cache(maxsize=None)
def _hints(cls: type) -> Dict[str, Any]:
    """The declared types of ``cls``'s fields (resolved once per class)."""
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in typing.get_type_hints(cls).items() if k in names}


def _build(cls: type, data: Mapping[str, Any]) -> Any:
    """``cls`` from its ``_plain`` form: nested dataclasses and tuples come back as declared."""
    hints = _hints(cls)
    return cls(**{k: _typed(hints[k], v) for k, v in data.items() if k in hints})


def _typed(hint: Any, value: Any) -> Any:
    if value is None:
        return None
    options = (
        [a for a in typing.get_args(hint) if a is not type(None)] if typing.get_origin(hint) is typing.Union else [hint]
    )
    for option in options:
        if dataclasses.is_dataclass(option) and isinstance(value, Mapping):
            return _build(typing.cast(type, option), value)
        if typing.get_origin(option) is tuple and isinstance(value, list):
            return tuple(value)
    return value
