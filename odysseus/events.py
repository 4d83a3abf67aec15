"""The canonical event vocabulary of a run.

A run produces ``Event`` values into one numbered log (see ``odysseus.runs.run_log``).
Every wire projection (``odysseus.sse``) is a pure function of these values, so the
chat stream and the agent stream are two encodings of the same log.

An event's ``data`` is the JSON object the chat projection sends, minus its ``type``
field: ``Event("delta", {"delta": "Hi"})`` is sent as ``data: {"delta":"Hi"}`` and
``Event("metrics", {"data": {...}})`` as ``data: {"type":"metrics","data":{...}}``.
Providers and turns yield events with ``seq=None``; the run log assigns ``seq``.

Every event type is a constant here and is declared once, with its fields, the projections that
carry it and a description, in ``odysseus.event_vocabulary``; docs/protocol.md, the page's
handler table and the OpenAPI description are checked against that table by tests.

Lifecycle events every run log contains:

- ``run_started`` is the first event, ``start`` the second (ids continue the session's previous
  run: the first event of a run is the previous run's last id + 1, see ``RunEngine.start``);
- exactly one terminal record (``chat_terminal`` or ``agent_terminal``);
- then ``done`` on success, ``error`` on failure, nothing extra on stop;
- ``close`` is always the last event.
"""

from __future__ import annotations

import copy
import json
from typing import Any, Callable, Dict, Optional, Tuple, Type, TypeVar

# Event types that end the transcript part of a run.
RUN_STARTED = "run_started"
#: the agent projection's ``start`` frame, logged as its own event so it has its own id (chat: hidden)
START = "start"
DELTA = "delta"
DONE = "done"
#: the agent projection's word that a run was stopped before it finished (a cancel or a Stop)
CANCELLED = "cancelled"
ERROR = "error"
CLOSE = "close"
CHAT_TERMINAL = "chat_terminal"
AGENT_TERMINAL = "agent_terminal"
MESSAGE_SAVED = "message_saved"
MODEL_INFO = "model_info"
FALLBACK = "fallback"
USAGE = "usage"
METRICS = "metrics"
RUN_TIMEOUT = "run_timeout"
TOOL_CALL = "tool_call"  # provider-level: a complete tool call requested by the model
NOTICE = "notice"  # a visible notice for the user (e.g. a context source was unavailable); not in the spec
FINISH = "finish"  # provider-level: the provider's finish reason
PROVIDER_META = "provider_meta"  # provider-level: fields we keep but do not project
#: provider-level: a fragment of a tool call as it streams {index, id?, name?, arguments_delta}
TOOL_CALL_DELTA = "tool_call_delta"
ATTACHMENTS = (
    "attachments"  # context: the turn's attached uploads, first event of the turn (odysseus.context.attachments)
)
RAG_SOURCES = "rag_sources"  # context: chunks of the user's files retrieved for this turn (odysseus.context.retrieval)
# Context events (odysseus.context), announced before the first delta on both projections
MEMORIES_USED = "memories_used"  # data: [{id, text, category, type: "pinned" | "recalled"}]
WEB_SOURCES = "web_sources"  # data: [{url, title, snippet}]
WORKSPACE_REJECTED = "workspace_rejected"  # data: {path: <as requested>}
# The model's window (odysseus.context.turn_window), before the first delta on both projections:
#: data: {messages_before, messages_after, tokens_before, tokens_after, context_length, dropped_sources,
#: shortened_chars}
CONTEXT_TRIMMED = "context_trimmed"
#: context_length, data: {messages_before, messages_after, tokens_before, tokens_after, message_id,
#: summarized_ids, summary}
COMPACTED = "compacted"

# Research jobs (odysseus.research): progress {"data": {phase, ...}}, the final rows, the job's ids.
RESEARCH_PROGRESS = "research_progress"
RESEARCH_SOURCES = "research_sources"
RESEARCH_FINDINGS = "research_findings"
RESEARCH_DONE = "research_done"

# Agent Alloy (odysseus.alloy): a supervisor's delegation to a specialist, each event carrying
# delegation_id and target_agent_id (fields in docs/protocol.md, "Agent Alloy workflows").
DELEGATION_START = "delegation_start"  # task, depth, tool_call_id, supervisor_agent_id, parent_delegation_id?
DELEGATION_CHUNK = "delegation_chunk"  # content: the specialist's streamed text
DELEGATION_TOOL_CALL = "delegation_tool_call"  # tool, arguments, tool_call_id
DELEGATION_TOOL_RESULT = "delegation_tool_result"  # tool, content (500 chars), success, duration_ms
DELEGATION_COMPLETE = "delegation_complete"  # status, error?, result_preview, tokens_input/output, duration_ms
DELEGATION_EVENTS = frozenset(
    {DELEGATION_START, DELEGATION_CHUNK, DELEGATION_TOOL_CALL, DELEGATION_TOOL_RESULT, DELEGATION_COMPLETE}
)

#: Provider-level events that the run engine consumes but never projects as such.
PROVIDER_ONLY = frozenset({TOOL_CALL, TOOL_CALL_DELTA, FINISH, PROVIDER_META})

# Agent mode (odysseus.agent, odysseus.tools): the turn's rounds, tools, approvals and guards
AGENT_PREP = "agent_prep"
AGENT_STEP = "agent_step"
TOOL_START = "tool_start"
TOOL_PROGRESS = "tool_progress"
TOOL_OUTPUT = "tool_output"
ASK_USER = "ask_user"
TOOL_APPROVAL_RESOLVED = "tool_approval_resolved"
GENERATED_IMAGE = "generated_image"
UI_CONTROL = "ui_control"
PLAN_UPDATE = "plan_update"
EXHIBIT = "exhibit"
ROUNDS_EXHAUSTED = "rounds_exhausted"
BUDGET_EXCEEDED = "budget_exceeded"
LOOP_BREAKER_TRIGGERED = "loop_breaker_triggered"
INTENT_NUDGE_EXHAUSTED = "intent_nudge_exhausted"
#: the answer to an attach/resume the caller cannot follow (odysseus.routes.streaming)
RUN_MISSING = "run_missing"
#: a call of a client-defined tool the model made in an OpenAI-compatible (/v1) turn: the client runs it
#: {call_id, name, arguments (JSON text)} (odysseus.openai_api)
FUNCTION_CALL = "function_call"

# Editor documents (odysseus.documents), on both projections under these names.
DOC_STREAM_OPEN = "doc_stream_open"  # {title, language}: a create/update_document call is streaming
DOC_STREAM_DELTA = "doc_stream_delta"  # {content}: the whole previewed content so far (not an increment)
DOC_UPDATE = "doc_update"  # {doc_id, content, version, title, language}: a document write was accepted
DOC_SUGGESTIONS = "doc_suggestions"  # {doc_id, suggestions: [{id, find, replace, reason}]}
DOC_EVENTS = (DOC_STREAM_OPEN, DOC_STREAM_DELTA, DOC_UPDATE, DOC_SUGGESTIONS)


class _Fields:
    """The three slots of an ``Event``; the subclass forbids assignment."""

    __slots__ = ("type", "data", "seq")


_set_type = _Fields.type.__set__  # type: ignore[attr-defined]
_set_data = _Fields.data.__set__  # type: ignore[attr-defined]
_set_seq = _Fields.seq.__set__  # type: ignore[attr-defined]
_alloc = object.__new__
_decode_payload: Callable[[str], Dict[str, Any]] = json.JSONDecoder().decode


class Event(_Fields):
    """One canonical event: its type, its JSON payload and (once logged) its number.

    An immutable value (assignment raises ``AttributeError``, as on the frozen dataclass it
    replaces), equal to another Event with the same three fields. A run makes several per
    streamed token, so it is a ``__slots__`` class: no instance ``__dict__`` (about a
    hundred bytes less for each event a held run keeps) and about half the construction
    time of a frozen dataclass, whose ``__init__`` calls ``object.__setattr__`` per field.
    """

    __slots__ = ()

    type: str
    data: Dict[str, Any]
    seq: Optional[int]

    def __init__(self, type: str, data: Optional[Dict[str, Any]] = None, seq: Optional[int] = None) -> None:  # noqa: A002
        _set_type(self, type)
        _set_data(self, {} if data is None else data)
        _set_seq(self, seq)

    def numbered(self, seq: int) -> "Event":
        """Return this event carrying log number ``seq``."""
        event = _alloc(Event)
        _set_type(event, self.type)
        _set_data(event, self.data)
        _set_seq(event, seq)
        return event

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"Event is immutable: cannot assign {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"Event is immutable: cannot delete {name!r}")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Event):
            return NotImplemented
        return self.type == other.type and self.seq == other.seq and self.data == other.data

    __hash__ = None  # type: ignore[assignment]  # data is a dict: unhashable, as the frozen dataclass was

    def __repr__(self) -> str:
        return f"Event(type={self.type!r}, data={self.data!r}, seq={self.seq!r})"

    def __reduce__(self) -> Tuple[Type["Event"], Tuple[str, Dict[str, Any], Optional[int]]]:
        return (Event, (self.type, self.data, self.seq))

    def __copy__(self) -> "Event":
        return self  # immutable: a copy is the same value

    def __deepcopy__(self, memo: Dict[int, Any]) -> "Event":
        return Event(self.type, copy.deepcopy(self.data, memo), self.seq)


_S = TypeVar("_S", bound="StoredEvent")


class StoredEvent(Event):
    """A logged event that keeps only its JSON text: ``data`` is decoded from it when read.

    A run log keeps each event's payload text anyway (``run_log``); the event's ``data`` dict
    would be a second copy of the same values. Equal to the ``Event`` it stands for as long as
    its data survives a JSON round trip (every logged event's does: the durable log stores the
    same text, and a replay from SQLite decodes it the same way).
    """

    __slots__ = ("payload",)
    payload: str

    @property
    def data(self) -> Dict[str, Any]:  # type: ignore[override]
        """The payload, decoded (a new dict each time: nothing is cached)."""
        return _decode_payload(self.payload)

    @classmethod
    def of(cls: Type[_S], type: str, seq: Optional[int], payload: str) -> _S:  # noqa: A002
        """The stored form of the event ``type``/``seq`` whose encoded data is ``payload``."""
        event = _alloc(cls)
        _set_type(event, type)
        _set_seq(event, seq)
        _set_payload(event, payload)
        return event


class StoredDelta(StoredEvent):
    """A logged text delta in its stored form (``StoredEvent``): its payload is ``{"delta": s}``
    or ``{"delta": s, "thinking": true}`` exactly as ``run_log.text_delta_payload`` writes it.

    A delta's ``data`` dict and its string would be a second copy of the same text, about 230
    bytes per token held. The log numbers a text delta into one of these (equal to the ``Event``
    it stands for); projections that send the payload as it is (chat) or can slice it (agent,
    which relies on that exact shape) never decode it.
    """

    __slots__ = ()


_set_payload = StoredEvent.__dict__["payload"].__set__


def delta(text: str, thinking: bool = False) -> Event:
    """Assistant content (or reasoning, when ``thinking``) to append."""
    event = _alloc(Event)  # Event(DELTA, ...) without the __init__ frame: one per streamed token
    _set_type(event, DELTA)
    _set_data(event, {"delta": text, "thinking": True} if thinking else {"delta": text})
    _set_seq(event, None)
    return event


def usage(input_tokens: Optional[int], output_tokens: Optional[int], **extra: Any) -> Event:
    """Normalised provider usage."""
    data = {"input_tokens": input_tokens, "output_tokens": output_tokens}
    data.update(extra)
    return Event(USAGE, {"data": data})


def finish(reason: Optional[str]) -> Event:
    """The provider's finish reason (``stop``, ``length``, ``tool_calls``, ...)."""
    return Event(FINISH, {"reason": reason})


def tool_call(call_id: str, name: str, arguments: Any, index: int = 0) -> Event:
    """A complete tool call requested by the model, with the provider's call id."""
    return Event(TOOL_CALL, {"id": call_id, "name": name, "arguments": arguments, "index": index})


def tool_call_delta(
    index: int, arguments_delta: str, call_id: Optional[str] = None, name: Optional[str] = None
) -> Event:
    """A fragment of a tool call's arguments as the provider streams it (id and name when first known)."""
    data: Dict[str, Any] = {"index": index, "arguments_delta": arguments_delta}
    if call_id:
        data["id"] = call_id
    if name:
        data["name"] = name
    return Event(TOOL_CALL_DELTA, data)


def error(message: str, status: int) -> Event:
    """A failure, projected as an ``event: error`` frame."""
    return Event(ERROR, {"error": message, "status": status})
