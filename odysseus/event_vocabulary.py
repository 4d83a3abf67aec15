"""The event vocabulary, declared once: every event type with its fields, projections and meaning.

The names are the constants of ``odysseus.events``. ``odysseus.sse`` derives its projection tables
(``CHAT_HIDDEN``, ``AGENT_NAMES``) from ``SPECS``; the OpenAPI description lists the stream
vocabularies from it; tests/test_event_vocabulary.py checks docs/protocol.md's event tables, the
page's handler table (static/js/stream_events.js) and the spec's event names against it, so an
event added here without its documentation (or documented without being declared) fails the build.

Projections: ``chat`` (/api/chat_stream and its resume: ``data: {"type": ...}`` frames), ``agent``
(/api/agent/chat/stream: named SSE events, under ``agent_name``), ``job`` (the research job stream's
``data: {phase, ...}`` frames), ``provider`` (provider-level: consumed by the run engine, never
projected) and ``openai`` (the OpenAI-compatible /v1 API: ``odysseus.openai_api``, which also reads
the text, tool, approval, usage and terminal events every run has). An event with no chat projection
is hidden from the chat stream.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, FrozenSet, List, Optional, Tuple

from . import events as ev

CHAT, AGENT, JOB, PROVIDER, OPENAI = "chat", "agent", "job", "provider", "openai"
PROJECTIONS = (CHAT, AGENT, JOB, PROVIDER, OPENAI)


@dataclass(frozen=True)
class EventSpec:
    """One event type: its canonical name, payload fields (name -> meaning), projections and meaning.

    ``agent_name`` is its SSE event name on the agent projection (default: the same name) and
    ``agent_fields`` the agent frame's fields when that frame is rebuilt rather than sent as is.
    A field name ending in ``?`` is optional.
    """

    name: str
    description: str
    fields: Dict[str, str]
    projections: FrozenSet[str]
    agent_name: Optional[str] = None
    agent_fields: Optional[Dict[str, str]] = field(default=None)

    @property
    def wire_agent_name(self) -> Optional[str]:
        """The SSE event name on the agent projection, or None when it is not sent there."""
        return (self.agent_name or self.name) if AGENT in self.projections else None


def _spec(
    name: str,
    description: str,
    fields: str,
    projections: Tuple[str, ...],
    agent_name: Optional[str] = None,
    agent_fields: Optional[str] = None,
) -> EventSpec:
    """``fields`` as ``"name: meaning; other?: meaning"``."""

    def parse(text: str) -> Dict[str, str]:
        pairs = [part.split(":", 1) for part in text.split(";") if part.strip()]
        return {key.strip(): value.strip() for key, value in pairs}

    return EventSpec(
        name,
        description,
        parse(fields),
        frozenset(projections),
        agent_name,
        parse(agent_fields) if agent_fields is not None else None,
    )


BOTH = (CHAT, AGENT)
DELEGATION = "delegation_id: the delegation; target_agent_id: the specialist; "

SPECS: List[EventSpec] = [
    # lifecycle (odysseus.runs.engine): every run log starts with these and ends with a terminal tail
    _spec(
        ev.RUN_STARTED,
        "the run's first event: identifies the detached run",
        "run_id: the run; session_id: its session; mode: chat/agent/research/...; model: the requested route",
        (AGENT,),
        agent_fields="run_id: the run",
    ),
    _spec(
        ev.START,
        "the run's second event: generation begins",
        "task_id: the run id; model: the requested route",
        (AGENT,),
    ),
    _spec(
        ev.DELTA,
        "assistant text (or reasoning, with thinking) to append",
        "delta: the text; thinking?: true for the reasoning channel",
        (CHAT, AGENT, JOB),
        agent_name="chunk",
        agent_fields="content: the text (reasoning deltas are not sent)",
    ),
    _spec(
        ev.MESSAGE_SAVED,
        "the reply (full or partial) is stored",
        "message_id: the stored message (null when the save is pending); session_id: its session; role: assistant",
        (CHAT,),
    ),
    _spec(
        ev.CHAT_TERMINAL,
        "the terminal record of a chat-mode run, exactly once",
        "data: {status, run_id, session_id, message_id, stop_reason, partial, ...}",
        (CHAT, JOB),
    ),
    _spec(
        ev.AGENT_TERMINAL,
        "the terminal record of an agent-mode run, exactly once",
        "data: the record, as chat_terminal's",
        (CHAT, JOB),
    ),
    _spec(
        ev.DONE,
        "success: the turn ended without an error (it finished, or it paused and says why)",
        "task_id: the run id; thinking: the reasoning text; total_time_ms: elapsed; session_id: the session; "
        "completion?: an agent turn's end, complete or why it paused (awaiting_approval, rounds_exhausted, "
        "budget_exceeded, loop_breaker_triggered, intent_nudge_exhausted); paused?: true when it paused; "
        "approval_id?: the approval a paused turn waits for",
        BOTH,
    ),
    _spec(
        ev.CANCELLED,
        "the run was stopped before it finished (a cancel or a Stop); its partial reply is saved",
        "task_id: the run id; stop_reason: why (cancelled, user, ...); session_id: the session",
        (AGENT,),
    ),
    _spec(
        ev.ERROR,
        "failure (provider error, timeout, log cap, interruption), after the terminal record",
        "error: the message; status: an HTTP status; retry_after?: seconds",
        (CHAT, AGENT, JOB),
        agent_fields="error: the message; status: an HTTP status",
    ),
    _spec(ev.CLOSE, "always the last event of a run", "", (AGENT,)),
    _spec(ev.RUN_TIMEOUT, "the watchdog ended the run", "limit: idle or wall; seconds: the limit", (CHAT,)),
    _spec(
        ev.RUN_MISSING,
        "an attach the caller cannot follow (expired, unknown or another user's run)",
        "run_id: as asked; status: null; detail: what to do",
        (AGENT,),
    ),
    # the model's route and accounting (odysseus.llm.llm_core)
    _spec(
        ev.MODEL_INFO,
        "the answering route, when it produces its first output",
        "provider: provider name; model: model name; route: provider/model; label: display label; "
        "offline_demo?: true for the demo model",
        (CHAT,),
    ),
    _spec(
        ev.FALLBACK,
        "a backup candidate answered",
        "requested: route id; answered: route id; reason: why; failures: [{route, error, status}]",
        (CHAT,),
    ),
    _spec(ev.USAGE, "normalised provider usage", "data: {input_tokens, output_tokens, ...}", (CHAT,)),
    _spec(ev.METRICS, "end of generation: time, tokens, cost", "data: {total_time, time_to_first_token, ...}", (CHAT,)),
    # provider-level (odysseus.llm adapters): consumed by the run engine and the agent loop
    _spec(
        ev.TOOL_CALL,
        "a complete tool call requested by the model",
        "id: the provider's call id; name: the tool; arguments: parsed arguments; index: position",
        (PROVIDER,),
    ),
    _spec(
        ev.TOOL_CALL_DELTA,
        "a fragment of a tool call's arguments as it streams",
        "index: position; arguments_delta: text; id?: call id, once known; name?: tool, once known",
        (PROVIDER,),
    ),
    _spec(ev.FINISH, "the provider's finish reason", "reason: stop, length, tool_calls, ...", (PROVIDER,)),
    _spec(ev.PROVIDER_META, "provider fields kept but not projected", "provider: provider name", (PROVIDER,)),
    # context (odysseus.context), before the first delta
    _spec(
        ev.ATTACHMENTS,
        "the turn's attached uploads, first event of the turn",
        "data: [{id, name, mime, size, width?, height?}]",
        BOTH,
    ),
    _spec(
        ev.RAG_SOURCES,
        "chunks of the user's files added to the context",
        "data: [{filename, snippet, score, upload_id, chunk}]",
        BOTH,
    ),
    _spec(
        ev.NOTICE,
        "something the user should know about the context; never a failed turn",
        "message: the text; source: workspace, web, compaction or a source's name",
        BOTH,
    ),
    _spec(ev.MEMORIES_USED, "memories that went into the context", "data: [{id, text, category, type}]", BOTH),
    _spec(
        ev.WEB_SOURCES,
        "search results whose pages or snippets went into the context (or web_search's)",
        "data: [{url, title, snippet}]",
        BOTH,
    ),
    _spec(ev.WORKSPACE_REJECTED, "an agent turn's workspace was refused", "data: {path}", BOTH),
    _spec(
        ev.CONTEXT_TRIMMED,
        "something was cut to fit the model's window",
        "data: {messages_before, messages_after, tokens_before, tokens_after, ...}",
        BOTH,
    ),
    _spec(
        ev.COMPACTED,
        "the older half of the history was summarised",
        "context_length: the window; data: {messages_before, messages_after, ...}",
        BOTH,
    ),
    # agent mode (odysseus.agent, odysseus.tools)
    _spec(ev.AGENT_PREP, "first event of an agent turn", "data: {prep_ms, messages, tools, ...}", (CHAT,)),
    _spec(ev.AGENT_STEP, "before each model round", "round: its number", (CHAT,)),
    _spec(
        ev.TOOL_START,
        "a tool call starts",
        "tool: name; command: first line; full_command: all of it; "
        "round: the round; call_id: the provider's id; server_id: ours; arguments: the arguments; "
        "mcp?: {server, tool} of an MCP server's tool",
        BOTH,
        agent_name="tool_call",
        agent_fields="tool: name; arguments: the arguments; call_id: the provider's id",
    ),
    _spec(
        ev.TOOL_PROGRESS,
        "a running tool's new output",
        "tool: name; message: new lines; elapsed: seconds; round: the round; call_id?: the call; "
        "progress?: an MCP progress notification's progress; total?: and its total",
        (CHAT,),
    ),
    _spec(
        ev.TOOL_OUTPUT,
        "a tool call ended",
        "tool: name; command: first line; output: capped text; "
        "exit_code: 0 ok; round: the round; call_id: the provider's id; server_id: ours; "
        "mcp?: {server, tool} of an MCP server's tool",
        BOTH,
        agent_name="tool_result",
        agent_fields="tool: name; content: the output, 500 characters; call_id: the provider's id",
    ),
    _spec(ev.PLAN_UPDATE, "update_plan's plan", "data: {steps, explanation?}", (CHAT,)),
    _spec(ev.UI_CONTROL, "a UI action for the page", "data: {action, ...}", (CHAT,)),
    _spec(
        ev.GENERATED_IMAGE,
        "generate_image's image, or an MCP tool's image content",
        "url: /api/images/<name>; prompt: as asked (an MCP tool: server.tool); revised_prompt?: the provider's; "
        "tool?: the MCP tool whose row shows it",
        (CHAT,),
    ),
    _spec(
        ev.EXHIBIT,
        "a typed, agent-authored exhibit",
        "schema_version: 1; id: stable id; title?: title; layout: stack; elements: the elements",
        BOTH,
    ),
    _spec(
        ev.FUNCTION_CALL,
        "a /v1 turn's model called a client-defined tool; the client runs it and continues",
        "call_id: the provider's call id; name: the tool; arguments: its arguments as JSON text",
        (OPENAI,),
    ),
    _spec(ev.ASK_USER, "a call needs the user's approval; the turn ends after it", "data: the approval card", BOTH),
    _spec(
        ev.TOOL_APPROVAL_RESOLVED,
        "first event of an answered approval's turn",
        "decision: the answer; approval_id: the card; call_id: the call; server_id: ours; tool: name",
        (CHAT,),
    ),
    _spec(
        ev.ROUNDS_EXHAUSTED,
        "AGENT_MAX_ROUNDS rounds in this request",
        "rounds: this request's; total_rounds: all; can_continue: true",
        (CHAT,),
    ),
    _spec(
        ev.BUDGET_EXCEEDED,
        "the next calls would pass AGENT_MAX_TOOL_CALLS",
        "limit: the budget; used: calls made; requested: calls asked",
        (CHAT,),
    ),
    _spec(
        ev.LOOP_BREAKER_TRIGGERED,
        "one call repeated with no new text",
        "signature: tool:hash; tool: name; repeats: how often; rounds: which",
        (CHAT,),
    ),
    _spec(
        ev.INTENT_NUDGE_EXHAUSTED,
        "the model kept announcing actions without calling a tool",
        "nudges: how many; limit: AGENT_MAX_NUDGES; round: the round; text: its last 200 characters",
        (CHAT,),
    ),
    # editor documents (odysseus.documents)
    _spec(ev.DOC_STREAM_OPEN, "a create/update_document call is streaming", "title: title; language: language", BOTH),
    _spec(ev.DOC_STREAM_DELTA, "the whole previewed content so far", "content: the content", BOTH),
    _spec(
        ev.DOC_UPDATE,
        "a document write was accepted",
        "doc_id: the document; content: its content; version: its version; title: title; language: language",
        BOTH,
    ),
    _spec(
        ev.DOC_SUGGESTIONS,
        "suggested edits were accepted",
        "doc_id: the document; suggestions: [{id, find, replace, reason}]",
        BOTH,
    ),
    # research jobs (odysseus.research)
    _spec(ev.RESEARCH_PROGRESS, "a research phase's progress", "data: {phase, ...}", (CHAT, AGENT, JOB)),
    _spec(ev.RESEARCH_SOURCES, "the job's sources", "data: [{url, title}]", (CHAT, AGENT, JOB)),
    _spec(ev.RESEARCH_FINDINGS, "the job's findings", "data: [{url, title, summary, excerpt?}]", (CHAT, AGENT, JOB)),
    _spec(ev.RESEARCH_DONE, "the report is complete", "data: {job_id, session_id}", BOTH),
    # Agent Alloy delegations (odysseus.alloy)
    _spec(
        ev.DELEGATION_START,
        "a delegation's child turn starts",
        DELEGATION + "task: the task; depth: 1 = by "
        "the supervisor; tool_call_id: the delegate_to call; supervisor_agent_id: the delegating agent; "
        "parent_delegation_id?: nested; resumed?: after an approval",
        BOTH,
    ),
    _spec(ev.DELEGATION_CHUNK, "the specialist's text", DELEGATION + "content: the text", BOTH),
    _spec(
        ev.DELEGATION_TOOL_CALL,
        "a specialist's tool call starts",
        DELEGATION + "tool: name; arguments: the arguments; tool_call_id: the call; command: first line",
        BOTH,
    ),
    _spec(
        ev.DELEGATION_TOOL_RESULT,
        "a specialist's tool call ended",
        DELEGATION + "tool: name; content: 500 characters; success: bool; duration_ms: time; tool_call_id: the call",
        BOTH,
    ),
    _spec(
        ev.DELEGATION_COMPLETE,
        "a delegation's child turn ended",
        DELEGATION + "status: success/failed; "
        "error?: why; result_preview: 500 characters; tokens_input: tokens; tokens_output: tokens; "
        "duration_ms: time; tool_call_id: the call; cost?: cost; refused?: true when refused",
        BOTH,
    ),
]

BY_NAME: Dict[str, EventSpec] = {spec.name: spec for spec in SPECS}
if len(BY_NAME) != len(SPECS):  # pragma: no cover - a declaration mistake, caught at import
    raise RuntimeError("an event type is declared twice")


def names(projection: str) -> FrozenSet[str]:
    """The event types one projection carries."""
    return frozenset(spec.name for spec in SPECS if projection in spec.projections)


def agent_names() -> Dict[str, str]:
    """Canonical event -> its SSE event name on the agent projection."""
    return {spec.name: spec.wire_agent_name for spec in SPECS if spec.wire_agent_name}


def field_names(fields: Dict[str, str]) -> FrozenSet[str]:
    """Field names without their optional marker."""
    return frozenset(name.rstrip("?") for name in fields)
