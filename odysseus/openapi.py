"""The OpenAPI 3.1 description of the JSON API, built from one table (served at /api/openapi.json).

Each ``Op`` names a route exactly as Flask registers it (``/api/messages/<int:message_id>``),
so ``tests/test_openapi.py`` can compare the table with ``app.url_map``: a new ``/api/``
route without an entry here fails that test. To document a route, add one ``Op`` line
(body fields as a dict of JSON Schemas; ``stream=True`` for text/event-stream answers).
Bodies allow unknown fields (the server ignores them), matching the server's behaviour.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from . import __version__, event_vocabulary

STR = {"type": "string"}
ID = {"type": "string", "maxLength": 200}
INT = {"type": "integer"}
NUM = {"type": "number"}
BOOL = {"type": "boolean"}
OBJ = {"type": "object"}
NULLABLE_STR = {"type": ["string", "null"]}
TEMPERATURE = {"type": "number", "minimum": 0, "maximum": 2}
TOOLS = {"type": ["array", "null"], "items": STR}
PAGE = (("limit", {"type": "integer", "minimum": 1}), ("offset", {"type": "integer", "minimum": 0}))

MESSAGE_ID = "<digits:message_id>"  # as routes/history_routes.py registers it (ASCII digits only)
DOC_VERSION = "<int(max=1000000000):number>"  # as routes/document_routes.py registers it
TURN = {  # POST /api/chat_stream, /api/agent/chat(/stream), /api/chat/background
    "message": {"type": "string", "minLength": 1},
    "session": ID,
    "session_id": ID,
    "mode": {"type": "string", "enum": ["chat", "agent", "compare"]},
    "model": ID,
    "temperature": TEMPERATURE,
    "client_message_id": ID,
    # the model's window (README "Context window"): the reply's reserve, also sent to the model
    "max_tokens": {"type": "integer", "minimum": 1, "maximum": 1000000},
    # agent mode: answer an approval card, or continue after rounds_exhausted
    "tool_approval_id": ID,
    "tool_approval_decision": {"type": "string", "enum": ["approve", "approve_task", "deny"]},
    "continue": BOOL,
    "active_doc_id": ID,  # an open editor document: the model sees it and gets the document tools
    # context (odysseus.context): upload ids to attach; retrieval over the user's files on/off
    "attachments": {"type": "array", "items": ID, "maxItems": 50},
    "use_rag": BOOL,
    # context (odysseus.context): memories on/off for this turn, web sources (chat), workspace (agent, admin)
    "use_memory": BOOL,
    "use_web": BOOL,
    "workspace": {"type": "string", "maxLength": 4096},
    "use_research": BOOL,  # run the message as a research job (odysseus.research)
}
UPLOAD_BODY = {
    "required": True,
    "content": {
        "multipart/form-data": {
            "schema": {
                "type": "object",
                "properties": {"files": {"type": "array", "items": {"type": "string", "format": "binary"}}},
                "required": ["files"],
            }
        }
    },
}
AGENT_TURN = {**TURN, "target_agent_id": ID, "agent_profile_id": ID, "profile_id": ID}
CHAT_TURN = {
    **TURN,
    "workflow_id": ID,  # agent mode: run an Agent Alloy workflow (its supervisor answers)
    # branches: answer a user message again (message not needed), or resend an edited one
    "regenerate_of": {"type": "integer", "minimum": 1},
    "edit_of": {"type": "integer", "minimum": 1},
}
AGENT_TURN = {**TURN, "target_agent_id": ID, "agent_profile_id": ID, "profile_id": ID, "workflow_id": ID}
PROFILE = {
    "name": {"type": "string", "maxLength": 200},
    "system_prompt": NULLABLE_STR,
    "model": NULLABLE_STR,
    "tools": TOOLS,
    "temperature": {"type": ["number", "null"], "minimum": 0, "maximum": 2},
    "is_default": BOOL,
}
AGENT = {**{k: v for k, v in PROFILE.items() if k != "is_default"}, "agent_id": ID, "profile_id": ID}
CREDENTIALS = {"username": STR, "password": STR}
MEMORY = {
    "text": {"type": "string", "minLength": 1, "maxLength": 1000},
    "category": {"type": "string", "maxLength": 40},
    "pinned": BOOL,
}
MEMORY_SETTINGS = {"enabled": BOOL, "auto_extract": BOOL}
RESEARCH = {  # POST /api/research/start; the same limits are accepted on a chat turn with use_research
    "query": {"type": "string", "minLength": 1},
    "session_id": ID,
    "model": ID,
    "client_message_id": ID,
    "max_rounds": {"type": "integer", "minimum": 0, "maximum": 20},
    "min_rounds": {"type": "integer", "minimum": 0, "maximum": 20},
    "max_time": {"type": "number", "minimum": 60, "maximum": 3600},
    "pages_per_round": {"type": "integer", "minimum": 1, "maximum": 20},
    "chars_per_page": {"type": "integer", "minimum": 500, "maximum": 50000},
    "concurrent_reads": {"type": "integer", "minimum": 1, "maximum": 8},
}
WORKFLOW = {
    "id": {"type": "string", "pattern": "^[a-z0-9][a-z0-9-]{0,63}$"},
    "name": {"type": "string", "maxLength": 200},
    "description": NULLABLE_STR,
    "supervisor_agent_id": ID,
    "members": {
        "type": "array",
        "maxItems": 20,
        "items": {
            "type": "object",
            "properties": {
                "agent_id": ID,
                "role": {"type": "string", "enum": ["supervisor", "specialist"]},
                "delegation_hint": NULLABLE_STR,
            },
            "required": ["agent_id", "role"],
        },
    },
}

PROVIDER = {  # the admin's provider connections (odysseus/llm/connections.py validates them)
    "name": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"},
    "kind": {"type": "string", "enum": ["openai", "ollama", "anthropic"]},
    "base_url": {"type": ["string", "null"], "format": "uri", "maxLength": 2048},
    "api_key": {"type": ["string", "null"], "maxLength": 4096, "writeOnly": True},
    "default_model": {"type": ["string", "null"], "maxLength": 200},
    "models": {"type": "array", "maxItems": 200, "items": {"type": "string", "maxLength": 200}},
    "enabled": BOOL,
}


@dataclass(frozen=True)
class Op:
    """One documented operation."""

    method: str
    rule: str  # the Flask rule, converters included
    summary: str
    tag: str
    body: Optional[Dict[str, Any]] = None
    required: Tuple[str, ...] = ()
    query: Tuple[Tuple[str, Dict[str, Any]], ...] = ()
    headers: Tuple[Tuple[str, Dict[str, Any]], ...] = ()
    stream: bool = False
    public: bool = False
    status: int = 200
    extra: Dict[str, Any] = field(default_factory=dict)


OPERATIONS: List[Op] = [
    # chat (spec: chat-stream-events.md)
    Op(
        "POST",
        "/api/chat_stream",
        "Start a turn and stream it (chat projection); message is required except with regenerate_of.",
        "chat",
        CHAT_TURN,
        (),
        stream=True,
    ),
    Op("GET", "/api/chat/stream_status/<session_id>", "The session's newest run: status and counters.", "chat"),
    Op(
        "GET",
        "/api/chat/resume/<session_id>",
        "Replay the session's run after a cursor, then follow it.",
        "chat",
        query=(("after", INT),),
        headers=(("Last-Event-ID", STR),),
        stream=True,
    ),
    Op(
        "POST",
        "/api/chat/stop/<session_id>",
        "Stop the session's run named by its run id.",
        "chat",
        {"run_id": ID},
        headers=(("X-Odysseus-Run-Id", STR),),
    ),
    Op("POST", "/api/chat/background", "Queue a turn as a background job.", "chat", TURN, ("message",), status=202),
    Op("GET", "/api/chat/background", "The caller's background jobs.", "chat", query=PAGE),
    Op("GET", "/api/chat/background/<job_id>", "One background job.", "chat"),
    Op("POST", "/api/chat/background/<job_id>/cancel", "Cancel a background job.", "chat"),
    # agent API (spec: agent-stream-and-detached-runs.md)
    Op(
        "POST",
        "/api/agent/chat/stream",
        "Start an agent turn and stream it (named events).",
        "agent",
        AGENT_TURN,
        ("message",),
        stream=True,
    ),
    Op(
        "POST",
        "/api/agent/chat",
        "Run an agent turn to the end; answer with the result.",
        "agent",
        AGENT_TURN,
        ("message",),
    ),
    Op(
        "GET",
        "/api/agent/chat/stream/attach",
        "Attach to a run by id (named events).",
        "agent",
        query=(("run_id", ID), ("after", INT)),
        headers=(("Last-Event-ID", STR),),
        stream=True,
    ),
    Op("GET", "/api/agent/chat/runs", "The caller's detached runs, newest first.", "agent", query=PAGE),
    Op("POST", "/api/agent/chat/runs/<run_id>/cancel", "Cancel a run.", "agent"),
    Op("GET", "/api/agent/profiles", "The caller's agent profiles.", "agent"),
    Op("POST", "/api/agent/profiles", "Create an agent profile.", "agent", PROFILE, ("name",), status=201),
    Op("GET", "/api/agent/profiles/<profile_id>", "One agent profile.", "agent"),
    Op("PATCH", "/api/agent/profiles/<profile_id>", "Change an agent profile.", "agent", PROFILE),
    Op("DELETE", "/api/agent/profiles/<profile_id>", "Delete an agent profile.", "agent"),
    Op("GET", "/api/agents", "The caller's named agents.", "agent"),
    Op("POST", "/api/agents", "Create a named agent.", "agent", AGENT, status=201),
    Op("GET", "/api/agents/<agent_id>", "One named agent.", "agent"),
    Op("PATCH", "/api/agents/<agent_id>", "Change a named agent.", "agent", AGENT),
    Op("DELETE", "/api/agents/<agent_id>", "Delete a named agent.", "agent"),
    # memories
    Op("GET", "/api/memory", "The caller's memories (pinned first) and memory switches.", "memory"),
    Op("POST", "/api/memory", "Remember a fact.", "memory", MEMORY, ("text",), status=201),
    Op(
        "GET",
        "/api/memory/search",
        "Full-text search over the caller's memories.",
        "memory",
        query=(("q", {"type": "string", "minLength": 1, "maxLength": 500}),),
    ),
    Op("GET", "/api/memory/settings", "The caller's memory switches.", "memory"),
    Op(
        "PATCH",
        "/api/memory/settings",
        "Turn memories in context or automatic extraction on or off.",
        "memory",
        MEMORY_SETTINGS,
    ),
    Op("GET", "/api/memory/<memory_id>", "One memory.", "memory"),
    Op("PATCH", "/api/memory/<memory_id>", "Change a memory's text, category or pinned flag.", "memory", MEMORY),
    Op(
        "POST",
        "/api/memory/<memory_id>/pin",
        "Pin (or, with pinned false, unpin) a memory.",
        "memory",
        {"pinned": BOOL},
    ),
    Op("DELETE", "/api/memory/<memory_id>", "Forget a memory.", "memory"),
    Op(
        "GET",
        "/api/workspace/browse",
        "Directories under a path, for the workspace picker (admin).",
        "agent",
        query=(("path", {"type": "string", "maxLength": 4096}),),
    ),
    # research jobs (README "Research"; docs/protocol.md "Research jobs")
    Op(
        "POST",
        "/api/research/start",
        "Start a research job; answers at once with its id.",
        "research",
        RESEARCH,
        ("query",),
        status=202,
    ),
    Op(
        "GET",
        "/api/research/stream/<job_id>",
        "The job's stream: progress frames, then its final status.",
        "research",
        query=(("after", INT),),
        headers=(("Last-Event-ID", STR),),
        stream=True,
    ),
    Op("GET", "/api/research/status/<job_id>", "Where a job is: status, phase, counts.", "research"),
    Op("POST", "/api/research/cancel/<job_id>", "Cancel a job (idempotent).", "research"),
    Op("GET", "/api/research/<job_id>", "A job's result: report, sources, findings, stats.", "research"),
    Op("GET", "/api/research", "The caller's jobs, newest first.", "research", query=(("q", STR),) + PAGE),
    Op("DELETE", "/api/research/<job_id>", "Forget a job (cancels it when running).", "research"),
    Op("GET", "/api/alloy/workflows", "The caller's Agent Alloy workflows.", "agent"),
    Op(
        "POST",
        "/api/alloy/workflows",
        "Create a workflow (a supervisor agent and its specialists).",
        "agent",
        WORKFLOW,
        ("name", "members"),
        status=201,
    ),
    Op("GET", "/api/alloy/workflows/<workflow_id>", "One workflow.", "agent"),
    Op("PATCH", "/api/alloy/workflows/<workflow_id>", "Change a workflow.", "agent", WORKFLOW),
    Op("DELETE", "/api/alloy/workflows/<workflow_id>", "Delete a workflow.", "agent"),
    # history
    Op("POST", "/api/sessions", "Create a session.", "history", {"title": STR}, status=201),
    Op(
        "GET",
        "/api/sessions",
        "The caller's sessions, most recently updated first, paged (limit <= 500).",
        "history",
        query=PAGE + (("before", {"type": "string", "description": "next_before of the previous page"}),),
    ),
    Op("GET", "/api/sessions/<session_id>", "One session.", "history"),
    Op("PATCH", "/api/sessions/<session_id>", "Rename a session.", "history", {"title": STR}),
    Op("DELETE", "/api/sessions/<session_id>", "Delete a session (stops its run first).", "history"),
    Op(
        "POST",
        "/api/compare/keep",
        "Save the chosen reply of a compare with the user's message.",
        "chat",
        {
            "message": {"type": "string", "minLength": 1},
            "content": {"type": "string", "minLength": 1},
            "thinking": STR,
            "model": ID,
            "session": ID,
            "session_id": ID,
        },
        ("message", "content"),
        status=201,
    ),
    Op(
        "PUT",
        "/api/sessions/<session_id>/branch",
        "Show the branch through one of a message's alternatives.",
        "history",
        {"message_id": {"type": "integer", "minimum": 1}},
        ("message_id",),
    ),
    Op(
        "GET",
        "/api/sessions/<session_id>/messages",
        "The selected branch's newest messages in order (each with its alternatives), paged back by id.",
        "history",
        query=(
            ("before", {"type": "integer", "minimum": 1}),
            ("limit", {"type": "integer", "minimum": 1, "maximum": 1000}),
        ),
    ),
    # the model's window (README "Context window")
    Op(
        "GET",
        "/api/sessions/<session_id>/context",
        "How much of the model's window the next turn would use.",
        "history",
        query=(("model", ID),),
    ),
    Op(
        "POST",
        "/api/sessions/<session_id>/compact",
        "Summarise the older half of the conversation now (409 while a reply is being written).",
        "history",
        {"model": ID},
    ),
    Op("PATCH", f"/api/messages/{MESSAGE_ID}", "Edit a message's content.", "history", {"content": STR}, ("content",)),
    Op("DELETE", f"/api/messages/{MESSAGE_ID}", "Delete a message.", "history"),
    # editor documents
    Op(
        "POST",
        "/api/document",
        "Create a document (in a session when session_id names one).",
        "documents",
        {
            "session_id": ID,
            "title": {"type": "string", "minLength": 1, "maxLength": 200},
            "language": STR,
            "content": STR,
        },
        ("title",),
        status=201,
    ),
    Op("GET", "/api/documents/<session_id>", "The session's documents (no content).", "documents"),
    Op("GET", "/api/document/<doc_id>", "One document with its content.", "documents"),
    Op(
        "PUT",
        "/api/document/<doc_id>",
        "Save the content (new user version; no-op when unchanged).",
        "documents",
        {"content": STR, "summary": STR},
        ("content",),
    ),
    Op(
        "PATCH",
        "/api/document/<doc_id>",
        "Rename a document or change its language.",
        "documents",
        {"title": {"type": "string", "minLength": 1, "maxLength": 200}, "language": STR},
    ),
    Op("DELETE", "/api/document/<doc_id>", "Delete a document and its versions.", "documents"),
    Op("GET", "/api/document/<doc_id>/versions", "The document's versions, newest first.", "documents"),
    Op("GET", f"/api/document/<doc_id>/version/{DOC_VERSION}", "One version with its content.", "documents"),
    Op("POST", f"/api/document/<doc_id>/restore/{DOC_VERSION}", "Restore a version as a new version.", "documents"),
    # accounts
    Op("GET", "/api/auth/status", "Who is signed in, the mode and the CSRF token.", "auth", public=True),
    Op("POST", "/api/auth/setup", "Create the first (admin) account.", "auth", CREDENTIALS, public=True),
    Op("POST", "/api/auth/login", "Sign in (sets the session cookie).", "auth", CREDENTIALS, public=True),
    Op("POST", "/api/auth/signup", "Create an account when sign-up is open.", "auth", CREDENTIALS, public=True),
    Op(
        "POST",
        "/api/auth/logout",
        "Sign out (everywhere: end every session).",
        "auth",
        {"everywhere": BOOL},
        public=True,
    ),
    Op("POST", "/api/auth/password", "Change the password.", "auth", {"current_password": STR, "new_password": STR}),
    Op("GET", "/api/auth/tokens", "The caller's API tokens.", "auth"),
    Op(
        "POST", "/api/auth/tokens", "Create an API token (the secret is shown once).", "auth", {"name": STR}, status=201
    ),
    Op("DELETE", "/api/auth/tokens/<token_id>", "Revoke an API token.", "auth"),
    Op("GET", "/api/auth/users", "Every account (admin).", "auth"),
    Op("POST", "/api/auth/users", "Create an account (admin).", "auth", {**CREDENTIALS, "is_admin": BOOL}, status=201),
    Op("GET", "/api/auth/settings", "Instance settings (admin).", "auth"),
    Op("POST", "/api/auth/settings", "Change instance settings (admin).", "auth", {"allow_signup": BOOL}),
    # uploads (README "Uploads, attachments and retrieval")
    Op(
        "POST",
        "/api/upload",
        "Upload files (multipart field files); same bytes give the existing record.",
        "uploads",
        extra={"requestBody": UPLOAD_BODY},
    ),
    Op("GET", "/api/upload", "The caller's uploads, newest first.", "uploads", query=PAGE),
    Op("GET", "/api/upload/<upload_id>", "One upload's record, with its index status.", "uploads"),
    Op(
        "GET",
        "/api/upload/<upload_id>/content",
        "An upload's bytes (images inline, other files as downloads).",
        "uploads",
    ),
    Op("DELETE", "/api/upload/<upload_id>", "Delete an upload with its file and indexed chunks.", "uploads"),
    # the page's features (issue #20)
    Op(
        "GET",
        "/api/search",
        "Search the caller's messages (every word, as a prefix).",
        "history",
        query=(("q", {"type": "string", "minLength": 1, "maxLength": 500}),) + PAGE,
    ),
    Op(
        "GET",
        "/api/sessions/<session_id>/export",
        "Download a chat as Markdown or JSON (importable).",
        "history",
        query=(("format", {"type": "string", "enum": ["md", "json"]}),),
    ),
    Op(
        "POST",
        "/api/sessions/import",
        "Create a chat from a JSON export (refused whole on bad input).",
        "history",
        {"format": STR, "version": INT, "session": OBJ, "messages": {"type": "array", "items": OBJ}},
        ("format", "version", "session", "messages"),
        status=201,
    ),
    Op("GET", "/api/user/settings", "The caller's settings and the page's limits.", "settings"),
    Op(
        "PATCH",
        "/api/user/settings",
        "Change some of the caller's settings (null resets one).",
        "settings",
        {
            "default_model": NULLABLE_STR,
            "default_mode": {"type": ["string", "null"], "enum": ["chat", "agent", None]},
            "system_prompt": NULLABLE_STR,
            "temperature": {"type": ["number", "null"], "minimum": 0, "maximum": 2},
            "theme": {"type": ["string", "null"], "enum": ["auto", "light", "dark", None]},
            "memory_enabled": {"type": ["boolean", "null"]},
        },
    ),
    Op("GET", "/api/admin/users", "Every account with its admin flag and disabled state (admin).", "settings"),
    Op(
        "PATCH",
        "/api/admin/users/<user_id>",
        "Set an account's admin flag or disable it (admin).",
        "settings",
        {"is_admin": BOOL, "disabled": BOOL},
    ),
    Op(
        "POST",
        "/api/admin/users/<user_id>/password",
        "Set an account's password (admin).",
        "settings",
        {"new_password": STR},
        ("new_password",),
    ),
    # provider connections (admin; keys are write-only: answers carry api_key_last4 only)
    Op(
        "GET",
        "/api/admin/providers",
        "Every provider: the configuration's (read-only) and the stored ones (admin).",
        "settings",
    ),
    Op(
        "POST",
        "/api/admin/providers",
        "Store a provider connection (admin).",
        "settings",
        PROVIDER,
        ("name", "kind"),
        status=201,
    ),
    Op(
        "PATCH",
        "/api/admin/providers/<provider_id>",
        'Change a stored provider; no api_key keeps the key, "" clears it (admin).',
        "settings",
        PROVIDER,
    ),
    Op("DELETE", "/api/admin/providers/<provider_id>", "Remove a stored provider (admin).", "settings"),
    Op(
        "POST",
        "/api/admin/providers/<provider_id>/test",
        "Send one token through a saved provider (admin).",
        "settings",
        {"model": ID},
    ),
    Op(
        "POST",
        "/api/admin/providers/test",
        "Send one token with unsaved values; id fills in a saved key (admin).",
        "settings",
        {**PROVIDER, "id": ID, "model": ID},
        ("name", "kind"),
    ),
    Op(
        "GET",
        "/api/diagnostics/stream",
        "Streaming self-test: timestamped frames at known intervals.",
        "meta",
        query=(
            ("count", {"type": "integer", "minimum": 2, "maximum": 10}),
            ("interval_ms", {"type": "integer", "minimum": 50, "maximum": 1000}),
        ),
        stream=True,
        public=True,
    ),
    # code tools: the sandbox status and who may use run_python / shell
    Op("GET", "/api/admin/code-tools", "The code sandbox's status and every code-tools setting (admin).", "auth"),
    Op(
        "PATCH",
        "/api/admin/users/<user_id>/code-tools",
        "Allow or refuse the code tools for one user (admin).",
        "auth",
        {"code_tools": BOOL},
        ("code_tools",),
    ),
    Op(
        "PATCH",
        "/api/admin/profiles/<profile_id>/code-tools",
        "Set a profile's code tools (null: the user's setting) and sandbox network (admin).",
        "auth",
        {"code_tools": {"type": ["boolean", "null"]}, "network": BOOL},
    ),
    # meta
    Op("GET", "/api/images/<name>", "An image the agent generated (its owner only).", "agent"),
    Op(
        "GET",
        "/api/health",
        "Liveness, engine counters, and whether the code tools work (and why not).",
        "meta",
        public=True,
    ),
    Op("GET", "/api/models", "The configured models and routes.", "meta", query=(("refresh", STR),)),
    Op("GET", "/api/openapi.json", "This description.", "meta", public=True),
]

_CONVERTER = re.compile(r"<(?:(\w+)(?:\([^)]*\))?:)?(\w+)>")
ERROR = {"type": "object", "properties": {"error": STR}, "required": ["error"]}


def openapi_path(rule: str) -> Tuple[str, List[Tuple[str, Dict[str, Any]]]]:
    """``/a/<int:x>`` -> (``/a/{x}``, [("x", integer schema)])."""
    params = [
        (name, INT if conv in ("int", "digits") else {"type": "string", "minLength": 1})
        for conv, name in _CONVERTER.findall(rule)
    ]  # int limits are not described: fuzz past them
    return _CONVERTER.sub(lambda m: "{" + m.group(2) + "}", rule), params


def _operation(op: Op) -> Dict[str, Any]:
    path, path_params = openapi_path(op.rule)
    parameters = [{"name": n, "in": "path", "required": True, "schema": s} for n, s in path_params]
    parameters += [{"name": n, "in": "query", "required": False, "schema": s} for n, s in op.query]
    parameters += [{"name": n, "in": "header", "required": False, "schema": s} for n, s in op.headers]
    content = {"text/event-stream": {"schema": STR}} if op.stream else {"application/json": {"schema": OBJ}}
    doc: Dict[str, Any] = {
        "summary": op.summary,
        "tags": [op.tag],
        "operationId": f"{op.method.lower()}_{path}",
        "responses": {
            str(op.status): {"description": "success", "content": content},
            "4XX": {
                "description": "bad input, not signed in, not found, conflict or rate limited",
                "content": {"application/json": {"schema": ERROR}},
            },
        },
    }
    if op.stream:  # a reconnect at or past a run's last frame (docs/protocol.md, "Cursor and resume")
        doc["responses"]["204"] = {"description": "the run has ended and the cursor has everything: stop"}
    if parameters:
        doc["parameters"] = parameters
    if op.body is not None:
        schema: Dict[str, Any] = {"type": "object", "properties": op.body}
        if op.required:
            schema["required"] = list(op.required)
        doc["requestBody"] = {"required": bool(op.required), "content": {"application/json": {"schema": schema}}}
    if op.public:
        doc["security"] = []
    doc.update(op.extra)
    return doc


def stream_schemas() -> Dict[str, Any]:
    """The stream vocabularies, from odysseus.event_vocabulary (fields of each: docs/protocol.md)."""
    chat = sorted(event_vocabulary.names(event_vocabulary.CHAT))
    agent = sorted(set(event_vocabulary.agent_names().values()))
    return {
        "ChatStreamEventType": {
            "type": "string",
            "enum": chat,
            "description": "`type` of a /api/chat_stream data frame (`delta` frames carry no type; `done` is "
            "`data: [DONE]`, `error` an `event: error` frame)",
        },
        "AgentStreamEventName": {
            "type": "string",
            "enum": agent,
            "description": "SSE event names of /api/agent/chat/stream and its attach",
        },
    }


def build() -> Dict[str, Any]:
    """The whole OpenAPI document."""
    paths: Dict[str, Dict[str, Any]] = {}
    for op in OPERATIONS:
        path, _ = openapi_path(op.rule)
        paths.setdefault(path, {})[op.method.lower()] = _operation(op)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Odysseus JSON API",
            "version": __version__,
            "description": "Streams are Server-Sent Events; see docs/protocol.md for every event. "
            "Writes authorised by the cookie or single-user mode need a same-origin "
            "Origin header or X-Odysseus-CSRF.",
        },
        "components": {
            "schemas": stream_schemas(),
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer", "description": "an ody_... API token"},
                "cookie": {"type": "apiKey", "in": "cookie", "name": "odysseus_session"},
            },
        },
        "security": [{"bearer": []}, {"cookie": []}],
        "paths": paths,
    }
