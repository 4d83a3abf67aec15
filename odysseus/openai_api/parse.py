"""Reading a /v1 request body into an ``ApiRequest``: every field checked, nothing stored on a refusal.

Unknown fields are ignored, as OpenAI's API does; a known field of the wrong type or out of its
range is an ``InvalidParam`` naming it (400 ``invalid_request_error`` with ``param``). The input
(Responses ``input`` items, Chat Completions ``messages``) becomes the provider's chat-shaped
messages here, once: what the model is sent and what the user message stores are the same list.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ..errors import InvalidParam
from .head import CHAT_COMPLETION, RESPONSE

#: ``model`` values that name an agent or a workflow rather than a model route
AGENT_PREFIX, WORKFLOW_PREFIX = "agent:", "workflow:"
_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
MAX_TOOLS = 128
MAX_ITEMS = 2000
TEXT_PARTS = ("input_text", "output_text", "text", "summary_text")


@dataclass(frozen=True)
class Target:
    """Who answers: a model route (``kind`` "model"), an agent or a workflow (by id)."""

    kind: str  # "model" | "agent" | "workflow"
    name: str


@dataclass(frozen=True)
class ApiRequest:
    """A checked /v1 request (Responses or Chat Completions): everything the turn and the head need."""

    kind: str
    model: str
    target: Target
    #: this request's input as provider chat messages (stored with the user message)
    messages: List[Dict[str, Any]]
    #: the user message's text in the owner's history (the newest user text, or what the input was)
    display: str
    instructions: Optional[str] = None
    temperature: Optional[float] = None
    top_p: Optional[float] = None
    max_output_tokens: Optional[int] = None
    #: the client's tools as it sent them, and as the provider wants them (chat shape)
    tools: List[Dict[str, Any]] = field(default_factory=list)
    provider_tools: List[Dict[str, Any]] = field(default_factory=list)
    tool_choice: Any = "auto"
    parallel_tool_calls: bool = True
    metadata: Dict[str, str] = field(default_factory=dict)
    stream: bool = False
    background: bool = False
    store: bool = True
    previous_response_id: Optional[str] = None
    include_usage: bool = False
    #: an ``mcp_approval_response``: (approval request item id, approve)
    approval: Optional[Tuple[str, bool]] = None


# ---------------------------------------------------------------------- scalar fields
def _bool(data: Mapping[str, Any], key: str, default: bool) -> bool:
    value = data.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise InvalidParam(f"'{key}' must be a boolean", key)
    return value


def _number(data: Mapping[str, Any], key: str, low: float, high: float) -> Optional[float]:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise InvalidParam(f"'{key}' must be a number", key)
    if not low <= value <= high:
        raise InvalidParam(f"'{key}' must be between {low:g} and {high:g}", key)
    return float(value)


def _tokens(data: Mapping[str, Any], key: str, high: int) -> Optional[int]:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidParam(f"'{key}' must be an integer", key)
    if not 1 <= value <= high:
        raise InvalidParam(f"'{key}' must be between 1 and {high}", key, "integer_out_of_range")
    return value


def _string(data: Mapping[str, Any], key: str, limit: int, required: bool = False) -> Optional[str]:
    value = data.get(key)
    if value is None:
        if required:
            raise InvalidParam(f"Missing required parameter: '{key}'.", key, "missing_required_parameter")
        return None
    if not isinstance(value, str):
        raise InvalidParam(f"'{key}' must be a string", key)
    if len(value) > limit:
        raise InvalidParam(f"'{key}' is longer than {limit} characters", key, "string_above_max_length")
    if required and not value.strip():
        raise InvalidParam(f"'{key}' must not be empty", key)
    return value


def _metadata(data: Mapping[str, Any]) -> Dict[str, str]:
    value = data.get("metadata")
    if value is None:
        return {}
    if not isinstance(value, dict) or len(value) > 16:
        raise InvalidParam("'metadata' must be an object of at most 16 string values", "metadata")
    for key, item in value.items():
        if len(key) > 64 or not isinstance(item, str) or len(item) > 512:
            raise InvalidParam("'metadata' keys are at most 64 characters, values strings of at most 512", "metadata")
    return dict(value)


def target_of(model: str) -> Target:
    """What ``model`` names: ``agent:<id>``, ``workflow:<id>`` or a model route."""
    for prefix, kind in ((AGENT_PREFIX, "agent"), (WORKFLOW_PREFIX, "workflow")):
        if model.startswith(prefix):
            name = model[len(prefix) :].strip()
            if not name:
                raise InvalidParam(f"'model' names no {kind} after '{prefix}'", "model", "model_not_found")
            return Target(kind, name)
    return Target("model", model.strip())


# ---------------------------------------------------------------------- content
def _text(content: Any, where: str, limit: int) -> str:
    """The text of a message's content: a string, or a list of text parts (other parts are refused)."""
    if content is None:
        return ""
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        pieces = []
        for part in content:
            if isinstance(part, str):
                pieces.append(part)
                continue
            if not isinstance(part, dict) or not isinstance(part.get("text", ""), str):
                raise InvalidParam(f"{where}: each content part must be an object with a text", where)
            if part.get("type") not in TEXT_PARTS:
                raise InvalidParam(
                    f"{where}: content parts of type {part.get('type')!r} are not supported (text only)",
                    where,
                    "unsupported_content",
                )
            pieces.append(part.get("text") or "")
        text = "".join(pieces)
    else:
        raise InvalidParam(f"{where}: content must be a string or a list of parts", where)
    if len(text) > limit:
        raise InvalidParam(f"{where}: text is longer than {limit} characters", where, "string_above_max_length")
    return text


def _call_arguments(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise InvalidParam(f"{where}: 'arguments' must be a JSON string", where)
    return value


def _add_call(messages: List[Dict[str, Any]], call: Dict[str, Any]) -> None:
    """A function call joins the assistant message just before it (the chat shape has one per turn)."""
    last = messages[-1] if messages else None
    if last is not None and last["role"] == "assistant":
        last.setdefault("tool_calls", []).append(call)
    else:
        messages.append({"role": "assistant", "content": "", "tool_calls": [call]})


def responses_input(value: Any, limit: int) -> Tuple[List[Dict[str, Any]], Optional[Tuple[str, bool]]]:
    """Responses ``input`` -> chat messages, and an ``mcp_approval_response`` if there is one."""
    if isinstance(value, str):
        if not value.strip():
            raise InvalidParam("'input' must not be empty", "input", "empty_input")
        if len(value) > limit:
            raise InvalidParam(f"'input' is longer than {limit} characters", "input", "string_above_max_length")
        return [{"role": "user", "content": value}], None
    if not isinstance(value, list) or not value:
        raise InvalidParam("'input' must be a non-empty string or a non-empty list of items", "input", "empty_input")
    if len(value) > MAX_ITEMS:
        raise InvalidParam(f"'input' has more than {MAX_ITEMS} items", "input")
    messages: List[Dict[str, Any]] = []
    approval: Optional[Tuple[str, bool]] = None
    for n, item in enumerate(value):
        where = f"input[{n}]"
        if not isinstance(item, dict):
            raise InvalidParam(f"{where} must be an object", where)
        kind = item.get("type") or "message"
        if kind == "message":
            role = item.get("role")
            if role not in ("user", "assistant", "system", "developer"):
                raise InvalidParam(f"{where}: 'role' must be user, assistant, system or developer", where)
            text = _text(item.get("content"), where, limit)
            messages.append({"role": "system" if role == "developer" else role, "content": text})
        elif kind == "function_call":
            call_id, name = item.get("call_id"), item.get("name")
            if not isinstance(call_id, str) or not call_id or not isinstance(name, str) or not name:
                raise InvalidParam(f"{where}: a function_call needs 'call_id' and 'name'", where)
            arguments = _call_arguments(item.get("arguments", "{}"), where)
            _add_call(messages, {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}})
        elif kind == "function_call_output":
            call_id = item.get("call_id")
            if not isinstance(call_id, str) or not call_id:
                raise InvalidParam(f"{where}: a function_call_output needs 'call_id'", where)
            output = item.get("output")
            text = output if isinstance(output, str) else _text(output, where, limit)
            messages.append({"role": "tool", "tool_call_id": call_id, "content": text})
        elif kind == "mcp_approval_response":
            request_id, approve = item.get("approval_request_id"), item.get("approve")
            if not isinstance(request_id, str) or not request_id or not isinstance(approve, bool):
                raise InvalidParam(f"{where}: needs 'approval_request_id' and a boolean 'approve'", where)
            if approval is not None:
                raise InvalidParam("one mcp_approval_response per request", where)
            approval = (request_id, approve)
        elif kind == "reasoning":
            continue  # the model's own reasoning: nothing the next model needs
        else:
            raise InvalidParam(f"{where}: items of type {kind!r} are not supported", where, "unsupported_item")
    if not messages and approval is None:
        raise InvalidParam("'input' holds nothing to answer", "input", "empty_input")
    return messages, approval


def chat_messages(value: Any, limit: int) -> List[Dict[str, Any]]:
    """Chat Completions ``messages`` -> provider chat messages (checked, text only)."""
    if not isinstance(value, list) or not value:
        raise InvalidParam("'messages' must be a non-empty list", "messages", "empty_array")
    if len(value) > MAX_ITEMS:
        raise InvalidParam(f"'messages' has more than {MAX_ITEMS} items", "messages")
    out: List[Dict[str, Any]] = []
    for n, item in enumerate(value):
        where = f"messages[{n}]"
        if not isinstance(item, dict):
            raise InvalidParam(f"{where} must be an object", where)
        role = item.get("role")
        if role not in ("system", "developer", "user", "assistant", "tool"):
            raise InvalidParam(f"{where}: 'role' must be system, developer, user, assistant or tool", where)
        message: Dict[str, Any] = {
            "role": "system" if role == "developer" else role,
            "content": _text(item.get("content"), where, limit),
        }
        if role == "tool":
            if not isinstance(item.get("tool_call_id"), str) or not item["tool_call_id"]:
                raise InvalidParam(f"{where}: a tool message needs 'tool_call_id'", where)
            message["tool_call_id"] = item["tool_call_id"]
        if role == "assistant" and item.get("tool_calls") is not None:
            calls = item["tool_calls"]
            if not isinstance(calls, list):
                raise InvalidParam(f"{where}: 'tool_calls' must be a list", where)
            message["tool_calls"] = []
            for call in calls:
                fn = call.get("function") if isinstance(call, dict) else None
                if (
                    not isinstance(fn, dict)
                    or not isinstance(call.get("id"), str)
                    or not isinstance(fn.get("name"), str)
                ):
                    raise InvalidParam(f"{where}: each tool call needs 'id' and 'function.name'", where)
                arguments = _call_arguments(fn.get("arguments", "{}"), where)
                message["tool_calls"].append(
                    {"id": call["id"], "type": "function", "function": {"name": fn["name"], "arguments": arguments}}
                )
        out.append(message)
    return out


def display_text(messages: List[Dict[str, Any]], approval: Optional[Tuple[str, bool]]) -> str:
    """What the user message shows in history: the newest user text, else what the input carried."""
    for message in reversed(messages):
        if message["role"] == "user" and message["content"].strip():
            return str(message["content"])
    outputs = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    if outputs:
        return "Tool results: " + ", ".join(outputs)
    if approval is not None:
        return "Approved" if approval[1] else "Denied"
    return next((m["content"] for m in reversed(messages) if m["content"].strip()), "(no text)")


# ---------------------------------------------------------------------- tools
def _schema(value: Any, where: str) -> Optional[Dict[str, Any]]:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise InvalidParam(f"{where}: 'parameters' must be a JSON schema object", where)
    return value


def responses_tools(value: Any) -> Tuple[List[Dict[str, Any]], List[Dict[str, Any]]]:
    """Responses ``tools`` (function tools only) -> (as given, as the provider wants them)."""
    if value is None:
        return [], []
    if not isinstance(value, list) or len(value) > MAX_TOOLS:
        raise InvalidParam(f"'tools' must be a list of at most {MAX_TOOLS} tools", "tools")
    given, provider = [], []
    for n, tool in enumerate(value):
        where = f"tools[{n}]"
        if not isinstance(tool, dict) or tool.get("type") != "function":
            kind = tool.get("type") if isinstance(tool, dict) else None
            raise InvalidParam(f"{where}: tools of type {kind!r} are not supported (only 'function')", where)
        name = tool.get("name")
        if not isinstance(name, str) or not _TOOL_NAME.fullmatch(name):
            raise InvalidParam(f"{where}: 'name' must be 1-64 letters, digits, '_' or '-'", where)
        description = tool.get("description")
        if description is not None and not isinstance(description, str):
            raise InvalidParam(f"{where}: 'description' must be a string", where)
        parameters = _schema(tool.get("parameters"), where)
        strict = bool(tool.get("strict")) if tool.get("strict") is not None else None
        entry: Dict[str, Any] = {
            "type": "function",
            "name": name,
            "description": description,
            "parameters": parameters,
            "strict": strict,
        }
        given.append(entry)
        fn: Dict[str, Any] = {"name": name, "parameters": parameters or {"type": "object", "properties": {}}}
        if description:
            fn["description"] = description
        provider.append({"type": "function", "function": fn})
    return given, provider


def chat_tools(value: Any) -> List[Dict[str, Any]]:
    """Chat Completions ``tools`` (function tools only), checked."""
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > MAX_TOOLS:
        raise InvalidParam(f"'tools' must be a list of at most {MAX_TOOLS} tools", "tools")
    out = []
    for n, tool in enumerate(value):
        where = f"tools[{n}]"
        fn = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(fn, dict):
            raise InvalidParam(f"{where}: only tools of type 'function' with a 'function' object are supported", where)
        if not isinstance(fn.get("name"), str) or not _TOOL_NAME.fullmatch(fn["name"]):
            raise InvalidParam(f"{where}: 'function.name' must be 1-64 letters, digits, '_' or '-'", where)
        entry: Dict[str, Any] = {"name": fn["name"], "parameters": _schema(fn.get("parameters"), where) or {}}
        if isinstance(fn.get("description"), str):
            entry["description"] = fn["description"]
        out.append({"type": "function", "function": entry})
    return out


def tool_choice(value: Any, responses: bool) -> Any:
    """``tool_choice``: none, auto, required, or one function by name (either API's shape)."""
    if value is None:
        return "auto"
    if value in ("none", "auto", "required"):
        return value
    if isinstance(value, dict) and value.get("type") == "function":
        name = value.get("name") if responses else (value.get("function") or {}).get("name")
        if isinstance(name, str) and name:
            return value
    raise InvalidParam("'tool_choice' must be none, auto, required or a function by name", "tool_choice")


def _provider_choice(choice: Any) -> Any:
    if isinstance(choice, dict):
        name = choice.get("name") or (choice.get("function") or {}).get("name")
        return {"type": "function", "function": {"name": name}}
    return choice


def provider_extra(req: ApiRequest) -> Dict[str, Any]:
    """Fields the OpenAI-compatible adapter adds to the provider's request body as they are."""
    extra: Dict[str, Any] = {}
    if req.top_p is not None:
        extra["top_p"] = req.top_p
    if req.provider_tools and req.tool_choice != "none":
        extra["tool_choice"] = _provider_choice(req.tool_choice)
        if not req.parallel_tool_calls:
            extra["parallel_tool_calls"] = False
    return extra


# ---------------------------------------------------------------------- the two bodies
def parse_responses(data: Mapping[str, Any], max_chars: int, max_tokens: int) -> ApiRequest:
    """A ``POST /v1/responses`` body."""
    model = _string(data, "model", 300, required=True) or ""
    target = target_of(model)
    messages, approval = responses_input(data.get("input"), max_chars)
    given, provider = responses_tools(data.get("tools"))
    background = _bool(data, "background", False)
    store = _bool(data, "store", True)
    if background and not store:
        raise InvalidParam("background responses must be stored: 'store' cannot be false", "store")
    previous = _string(data, "previous_response_id", 200)
    return ApiRequest(
        kind=RESPONSE,
        model=model,
        target=target,
        messages=messages,
        display=display_text(messages, approval),
        instructions=_string(data, "instructions", max_chars),
        temperature=_number(data, "temperature", 0.0, 2.0),
        top_p=_number(data, "top_p", 0.0, 1.0),
        max_output_tokens=_tokens(data, "max_output_tokens", max_tokens),
        tools=given,
        provider_tools=provider,
        tool_choice=tool_choice(data.get("tool_choice"), responses=True),
        parallel_tool_calls=_bool(data, "parallel_tool_calls", True),
        metadata=_metadata(data),
        stream=_bool(data, "stream", False),
        background=background,
        store=store,
        previous_response_id=previous or None,
        approval=approval,
    )


def parse_chat(data: Mapping[str, Any], max_chars: int, max_tokens: int) -> ApiRequest:
    """A ``POST /v1/chat/completions`` body."""
    model = _string(data, "model", 300, required=True) or ""
    messages = chat_messages(data.get("messages"), max_chars)
    n = data.get("n")
    if n is not None and n != 1:
        raise InvalidParam("'n' must be 1: one choice per request", "n")
    options = data.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise InvalidParam("'stream_options' must be an object", "stream_options")
    include_usage = _bool(options or {}, "include_usage", False)
    limit = _tokens(data, "max_completion_tokens", max_tokens)
    limit = limit if limit is not None else _tokens(data, "max_tokens", max_tokens)
    provider = chat_tools(data.get("tools"))
    return ApiRequest(
        kind=CHAT_COMPLETION,
        model=model,
        target=target_of(model),
        messages=messages,
        display=display_text(messages, None),
        temperature=_number(data, "temperature", 0.0, 2.0),
        top_p=_number(data, "top_p", 0.0, 1.0),
        max_output_tokens=limit,
        tools=[dict(tool) for tool in provider],
        provider_tools=provider,
        tool_choice=tool_choice(data.get("tool_choice"), responses=False),
        parallel_tool_calls=_bool(data, "parallel_tool_calls", True),
        metadata=_metadata(data) if isinstance(data.get("metadata"), dict) else {},
        stream=_bool(data, "stream", False),
        include_usage=include_usage,
    )
