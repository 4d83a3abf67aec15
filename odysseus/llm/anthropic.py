"""Anthropic Messages ``/v1/messages`` (SSE): text, thinking, tool_use, usage, in-stream errors.

A ``tool_use`` block's ``input_json_delta`` fragments are passed on as ``tool_call_delta``
events (for live previews); the whole call follows as ``tool_call`` when the block stops.

``base_url`` is the server root (``https://api.anthropic.com``). OpenAI-shaped input is
translated: system messages become the top-level ``system``, assistant ``tool_calls``
become ``tool_use`` blocks, ``tool`` messages become ``tool_result`` blocks in a user
turn, and consecutive same-role turns are merged (the API wants them alternating).
``max_tokens`` is required: the request's, else the provider option, else the
``DEFAULT_MAX_TOKENS`` config key.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Optional

from ..cancel import CancelToken
from ..errors import ProviderHTTPError, ProviderNetworkError, ProviderProtocolError
from ..events import Event, delta, finish, tool_call, tool_call_delta, usage
from .adapter import HTTPProvider, image_parts, normalise_finish, parse_arguments, text_of
from .base import ChatRequest, ProviderConfig
from .http import ProviderStream, parse_json
from .plain_chunks import FieldTemplate
from .stream_reader import sse_events

DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
#: Anthropic error types -> the HTTP status the API uses for them.
ERROR_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
}


def _tool_result_content(content) -> str:
    return text_of(content)


def wire_messages(messages: List[dict]) -> tuple:
    """(system text, Anthropic messages) from OpenAI-shaped messages."""
    system: List[str] = []
    out: List[dict] = []

    def add(role: str, blocks: List[dict]) -> None:
        if not blocks:
            return
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": list(blocks)})

    for message in messages:
        role = message.get("role")
        text = text_of(message.get("content"))
        if role == "system":
            if text:
                system.append(text)
        elif role == "tool":
            add(
                "user",
                [
                    {
                        "type": "tool_result",
                        "tool_use_id": message.get("tool_call_id") or "",
                        "content": _tool_result_content(message.get("content")),
                    }
                ],
            )
        elif role == "assistant":
            blocks: List[dict] = [{"type": "text", "text": text}] if text else []
            for call in message.get("tool_calls") or []:
                fn = call.get("function") or {}
                args = parse_arguments(fn.get("arguments"))
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": call.get("id") or "",
                        "name": fn.get("name", ""),
                        "input": args if isinstance(args, dict) else {"value": args},
                    }
                )
            add("assistant", blocks)
        else:
            images = [
                {"type": "image", "source": {"type": "base64", "media_type": part["mime"], "data": part["data"]}}
                for part in image_parts(message)
            ]
            add("user", images + ([{"type": "text", "text": text}] if text else []))
    return "\n\n".join(system), out


def wire_tools(tools: Optional[List[dict]]) -> List[dict]:
    """OpenAI function tools as Anthropic tools (``input_schema``)."""
    result = []
    for tool in tools or []:
        fn = tool.get("function", tool)
        entry = {"name": fn["name"], "input_schema": fn.get("parameters") or {"type": "object", "properties": {}}}
        if fn.get("description"):
            entry["description"] = fn["description"]
        result.append(entry)
    return result


def _text_of_delta(doc: Any) -> Any:
    return doc["delta"]["text"]


def _set_text_of_delta(doc: Any, text: str) -> None:
    doc["delta"]["text"] = text


class AnthropicProvider(HTTPProvider):
    """The Anthropic Messages API."""

    kind = "anthropic"
    default_base_url = DEFAULT_BASE_URL

    def __init__(self, cfg: ProviderConfig, app_config: dict):
        self.version = str(cfg.options.get("anthropic_version", API_VERSION))
        super().__init__(cfg, app_config)
        self.max_tokens = int(cfg.options.get("max_tokens", app_config.get("DEFAULT_MAX_TOKENS", 4096)))
        self.thinking_budget = cfg.options.get("thinking_budget")
        root = self.base_url
        self.root = root if root.endswith("/v1") else root + "/v1"

    def _auth_headers(self) -> dict:
        headers = {"anthropic-version": self.version}
        if self.api_key:
            headers["x-api-key"] = self.api_key
        return headers

    def body(self, request: ChatRequest) -> dict:
        """The Messages request body."""
        system, messages = wire_messages(request.messages)
        body: dict = {
            "model": request.model,
            "messages": messages,
            "stream": True,
            "max_tokens": request.max_tokens or self.max_tokens,
        }
        if system:
            body["system"] = system
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.tools:
            body["tools"] = wire_tools(request.tools)
        budget = request.extra.get("thinking_budget", self.thinking_budget)
        if budget:
            body["thinking"] = {"type": "enabled", "budget_tokens": int(budget)}
        body.update(request.extra.get("anthropic", {}))
        return body

    def _open(self, request: ChatRequest, cancel: CancelToken) -> ProviderStream:
        return self.transport.open(self.root + "/messages", self.body(request), cancel)

    def _events(self, response: ProviderStream, request: ChatRequest) -> Iterator[Event]:
        blocks: Dict[int, dict] = {}
        tools_seen = 0
        tool_blocks = 0  # tool_use blocks started: the index of their tool_call_delta fragments
        input_tokens = output_tokens = None
        extra_usage: dict = {}
        reason: Optional[str] = None
        stopped = False
        plain = FieldTemplate()  # the common text_delta chunk: no JSON decoding (see plain_chunks)
        for event_name, data in sse_events(response.chunks()):
            text = plain.content(data)
            if text is not None:
                yield delta(text)  # all a text_delta does (its block exists: the template chunk made it)
                continue
            doc = parse_json(data, self.name)
            plain.forget()  # whatever this chunk does, the next one is parsed in full unless it learns below
            if not isinstance(doc, dict):
                raise ProviderProtocolError(f"Malformed chunk from provider {self.name}: {data[:200]!r}")
            kind = doc.get("type") or event_name
            if kind == "ping":
                continue
            if kind == "error":
                err = doc.get("error") or {}
                status = ERROR_STATUS.get(err.get("type") or "", 502)
                raise ProviderHTTPError(
                    f"Provider {self.name} reported {err.get('type', 'an error')}: {err.get('message', '')}".rstrip(
                        ": "
                    ),
                    status=status,
                    provider=self.name,
                )
            if kind == "message_start":
                message = doc.get("message") or {}
                raw = message.get("usage") or {}
                input_tokens = raw.get("input_tokens", input_tokens)
                output_tokens = raw.get("output_tokens", output_tokens)
                extra_usage.update(
                    {k: v for k, v in raw.items() if k not in ("input_tokens", "output_tokens") and v is not None}
                )
                yield self.meta(fields={k: message[k] for k in ("id", "model") if message.get(k)})
            elif kind == "content_block_start":
                block = dict(doc.get("content_block") or {})
                block["json"] = ""
                blocks[doc.get("index", 0)] = block
                if block.get("type") == "tool_use":
                    response.mark_output()
                    block["tool_index"] = tool_blocks
                    tool_blocks += 1
                    yield tool_call_delta(block["tool_index"], "", block.get("id") or None, block.get("name") or None)
                elif block.get("type") == "text" and block.get("text"):
                    yield delta(block["text"])
                elif block.get("type") == "thinking" and block.get("thinking"):
                    yield delta(block["thinking"], thinking=True)
                elif block.get("type") not in ("text", "thinking"):
                    yield self.meta(block=block)  # redacted_thinking, server tools, ...
            elif kind == "content_block_delta":
                part = doc.get("delta") or {}
                block = blocks.setdefault(doc.get("index", 0), {"type": "text", "json": ""})
                if part.get("type") == "text_delta":
                    yield delta(part.get("text", ""))
                    if doc.get("type") == "content_block_delta":  # named in the data, not only by the event
                        plain.learn(data, doc, "text", part.get("text"), _text_of_delta, _set_text_of_delta)
                elif part.get("type") == "thinking_delta":
                    yield delta(part.get("thinking", ""), thinking=True)
                elif part.get("type") == "input_json_delta":
                    response.mark_output()
                    fragment = part.get("partial_json", "")
                    block["json"] += fragment
                    if fragment and "tool_index" in block:
                        yield tool_call_delta(block["tool_index"], fragment)
                else:
                    yield self.meta(index=doc.get("index", 0), delta=part)  # signature_delta, citations, ...
            elif kind == "content_block_stop":
                block = blocks.pop(doc.get("index", 0), {})
                if block.get("type") == "tool_use":
                    args = parse_arguments(block["json"]) if block["json"] else (block.get("input") or {})
                    yield tool_call(block.get("id") or "", block.get("name", ""), args, tools_seen)
                    tools_seen += 1
            elif kind == "message_delta":
                reason = (doc.get("delta") or {}).get("stop_reason") or reason
                raw = doc.get("usage") or {}
                output_tokens = raw.get("output_tokens", output_tokens)
                if raw.get("input_tokens") is not None:
                    input_tokens = raw["input_tokens"]
            elif kind == "message_stop":
                stopped = True
                break
            else:
                yield self.meta(event=doc)
        if not stopped:
            raise ProviderNetworkError(f"Provider {self.name} ended the stream before it was done", provider=self.name)
        if input_tokens is not None or output_tokens is not None:
            yield usage(input_tokens, output_tokens, **extra_usage)
        if reason:
            yield self.meta(stop_reason=reason)
        yield finish(normalise_finish(reason, tools_seen > 0))

    def _list_remote(self) -> List[str]:
        doc = self.transport.get_json(self.root + "/models", self.list_timeout)
        return [item["id"] for item in doc.get("data", []) if isinstance(item, dict) and item.get("id")]
