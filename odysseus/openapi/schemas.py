"""The JSON Schemas the operation tables share (turn bodies, profiles, memories, ...) and ``Op``, one
documented operation (see ``odysseus.openapi``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

STR = {"type": "string"}
ID = {"type": "string", "maxLength": 200}
INT = {"type": "integer"}
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
    # the model's window (docs/guide.md "Context window"): the reply's reserve, also sent to the model
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
CHAT_TURN = {
    **TURN,
    "workflow_id": ID,  # agent mode: run an Agent Alloy workflow (its supervisor answers)
    # branches: answer a user message again (message not needed), or resend an edited one
    "regenerate_of": {"type": "integer", "minimum": 1},
    "edit_of": {"type": "integer", "minimum": 1},
    # compare mode: the stored question (POST /api/compare/start) this pane answers; its reply is saved
    "compare_of": {"type": "integer", "minimum": 1},
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
FOLDER = {"name": {"type": "string", "minLength": 1, "maxLength": 100}}  # trimmed; unique per owner in any case
MEMORY_SETTINGS = {"enabled": BOOL, "auto_extract": BOOL}
PROMPT = {  # the prompt library (odysseus/store/prompts.py validates them)
    "title": {"type": "string", "minLength": 1, "maxLength": 200},
    "command": {"type": "string", "pattern": "^/?[a-z0-9_-]{1,32}$"},
    "content": {"type": "string", "minLength": 1, "maxLength": 20000},
}
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


MCP_SERVER = {  # the admin's MCP servers (odysseus/mcp/servers.py validates them)
    "name": {"type": "string", "pattern": "^[a-z0-9][a-z0-9_-]{0,23}$"},
    "command": {"type": ["string", "null"], "maxLength": 1024},
    "args": {"type": ["array", "null"], "items": STR, "maxItems": 200},
    "env": {"type": ["object", "null"], "additionalProperties": {"type": ["string", "null"]}},
    "url": {"type": ["string", "null"], "maxLength": 2048},
    "headers": {"type": ["object", "null"], "additionalProperties": {"type": ["string", "null"]}},
    "enabled": BOOL,
    "sandbox": BOOL,
    "network": BOOL,
    "timeout": {"type": ["number", "null"], "minimum": 1, "maximum": 3600},
    "approval": {"oneOf": [{"type": "string", "enum": ["ask", "auto"]}, {"type": "object"}]},
    "tools": {"type": ["array", "null"], "items": STR},
    "users": {"type": ["array", "null"], "items": STR},
    "profiles": {"type": ["array", "null"], "items": STR},
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
