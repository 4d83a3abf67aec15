"""Ollama's native ``/api/chat`` (NDJSON): content, thinking, whole tool calls, eval counts.

``base_url`` is the server root (``http://localhost:11434``, as ``OLLAMA_HOST``).
Ollama sends each tool call complete (arguments as an object, usually no id), so
calls get an id here; a ``tool`` message names its function with ``tool_name``,
looked up from the assistant call it answers.
"""

from __future__ import annotations

from typing import Dict, Iterator, List, Optional

from ..cancel import CancelToken
from ..errors import ProviderHTTPError, ProviderNetworkError, ProviderProtocolError
from ..events import Event, delta, finish, tool_call, usage
from .adapter import HTTPProvider, image_parts, new_call_id, normalise_finish, parse_arguments, text_of
from .base import ChatRequest, ProviderConfig
from .content_deltas import ContentDeltas
from .http import ProviderStream, parse_json
from .stream_reader import ndjson_lines

DEFAULT_BASE_URL = "http://localhost:11434"
KNOWN_KEYS = {"model", "created_at", "message", "done", "done_reason", "prompt_eval_count", "eval_count"}
DURATIONS = ("total_duration", "load_duration", "prompt_eval_duration", "eval_duration")
_KNOWN_OR_TIMED = KNOWN_KEYS | set(DURATIONS)


def _images(content) -> List[str]:
    """Base64 images from OpenAI ``image_url`` data-URL parts."""
    found = []
    for part in content if isinstance(content, list) else []:
        url = ((part or {}).get("image_url") or {}).get("url", "") if isinstance(part, dict) else ""
        if url.startswith("data:") and "," in url:
            found.append(url.split(",", 1)[1])
    return found


def wire_messages(messages: List[dict]) -> List[dict]:
    """OpenAI-shaped messages in Ollama's shape (tool arguments as objects, ``tool_name``)."""
    names: Dict[str, str] = {}
    out = []
    for message in messages:
        role = message.get("role")
        item: dict = {"role": role, "content": text_of(message.get("content"))}
        images = _images(message.get("content")) + [part["data"] for part in image_parts(message)]
        if images:
            item["images"] = images
        if role == "assistant" and message.get("tool_calls"):
            calls = []
            for call in message["tool_calls"]:
                fn = call.get("function") or {}
                names[call.get("id") or ""] = fn.get("name", "")
                calls.append(
                    {"function": {"name": fn.get("name", ""), "arguments": parse_arguments(fn.get("arguments"))}}
                )
            item["tool_calls"] = calls
        if role == "tool":
            name = message.get("name") or names.get(message.get("tool_call_id") or "")
            if name:
                item["tool_name"] = name
        out.append(item)
    return out


class OllamaProvider(HTTPProvider):
    """An Ollama server over its native API."""

    kind = "ollama"
    default_base_url = DEFAULT_BASE_URL

    def __init__(self, cfg: ProviderConfig, app_config: dict):
        super().__init__(cfg, app_config)
        self.think_tags = bool(cfg.options.get("think_tags", True))
        # templates that put <think> in the prompt: the reply starts inside the reasoning
        self.think_starts_open = bool(cfg.options.get("think_starts_open", False))
        self.keep_alive = cfg.options.get("keep_alive")

    def body(self, request: ChatRequest) -> dict:
        """The /api/chat request body."""
        body: dict = {"model": request.model, "messages": wire_messages(request.messages), "stream": True}
        options = {}
        if request.temperature is not None:
            options["temperature"] = request.temperature
        if request.max_tokens is not None:
            options["num_predict"] = request.max_tokens
        if options:
            body["options"] = options
        if request.tools:
            body["tools"] = request.tools
        if "think" in request.extra:
            body["think"] = request.extra["think"]
        if self.keep_alive is not None:
            body["keep_alive"] = self.keep_alive
        body.update(request.extra.get("ollama", {}))
        return body

    def _open(self, request: ChatRequest, cancel: CancelToken) -> ProviderStream:
        return self.transport.open(self.base_url + "/api/chat", self.body(request), cancel)

    def _events(self, response: ProviderStream, request: ChatRequest) -> Iterator[Event]:
        contents = ContentDeltas(self.think_tags, self.think_starts_open)
        calls = 0
        reason: Optional[str] = None
        usage_event: Optional[Event] = None
        for line in ndjson_lines(response.chunks()):
            chunk = parse_json(line, self.name)
            if not isinstance(chunk, dict):
                raise ProviderProtocolError(f"Malformed chunk from provider {self.name}: {line[:200]!r}")
            if chunk.get("error"):
                raise ProviderHTTPError(
                    f"Provider {self.name} reported an error mid-stream: {chunk['error']}",
                    status=502,
                    provider=self.name,
                )
            message = chunk.get("message") or {}
            if message.get("thinking"):
                yield delta(message["thinking"], thinking=True)
            content = message.get("content")
            if content:
                if contents.plain:
                    yield delta(content)
                else:
                    yield from contents.split(content)
            for call in message.get("tool_calls") or []:
                fn = call.get("function") or {}
                yield tool_call(
                    call.get("id") or new_call_id(), fn.get("name", ""), parse_arguments(fn.get("arguments")), calls
                )
                calls += 1
            # the token chunk has only known keys: no dict built (a set-view comparison in C)
            extra = {} if chunk.keys() <= KNOWN_KEYS else {k: v for k, v in chunk.items() if k not in _KNOWN_OR_TIMED}
            if chunk.get("done"):
                reason = chunk.get("done_reason") or "stop"
                extra.update({k: chunk[k] for k in DURATIONS if k in chunk})
                if "prompt_eval_count" in chunk or "eval_count" in chunk:
                    usage_event = usage(chunk.get("prompt_eval_count"), chunk.get("eval_count"))
            if extra:
                yield self.meta(fields=extra)
            if chunk.get("done"):
                break
        else:
            raise ProviderNetworkError(f"Provider {self.name} ended the stream before it was done", provider=self.name)
        yield from contents.flush()
        if usage_event is not None:
            yield usage_event
        yield finish(normalise_finish(reason, calls > 0))

    def _list_remote(self) -> List[str]:
        doc = self.transport.get_json(self.base_url + "/api/tags", self.list_timeout)
        models = [m for m in (doc.get("models") or []) if isinstance(m, dict)]
        return [name for m in models if (name := m.get("name") or m.get("model"))]  # nameless entries are no model
