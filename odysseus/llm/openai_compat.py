"""OpenAI-compatible ``/v1/chat/completions`` streaming (OpenAI, llama.cpp, vLLM, LM Studio, OpenRouter, Groq).

``base_url`` is the API root including its version (``http://localhost:8080/v1``,
``https://openrouter.ai/api/v1``); a bare host (``http://localhost:8080``) gets ``/v1``.
Reasoning arrives as ``reasoning_content`` (llama.cpp, vLLM, DeepSeek), ``reasoning``
(OpenRouter, Groq, Ollama's compat API) or inline ``<think>`` tags in the content.
Tool calls arrive as deltas keyed by ``index``: each fragment is passed on as a
``tool_call_delta`` (for live previews) and the calls are emitted whole, in index order,
when the choice finishes. ``stream_options.include_usage`` is asked for; a server that
rejects it is asked again without it, and remembered.
"""

from __future__ import annotations

import json
import logging
from typing import Dict, Iterator, List, Optional
from urllib.parse import urlsplit

from ..cancel import CancelToken
from ..errors import ProviderHTTPError, ProviderNetworkError, ProviderProtocolError
from ..events import NOTICE, Event, delta, finish, tool_call, tool_call_delta, usage
from .adapter import HTTPProvider, arguments_json, image_parts, new_call_id, normalise_finish, parse_arguments, text_of
from .base import ChatRequest, ProviderConfig
from .content_deltas import ContentDeltas
from .http import ProviderStream, parse_json
from .plain_chunks import KNOWN_DELTA_KEYS, PlainContent
from .stream_reader import sse_batches

DEFAULT_BASE_URL = "https://api.openai.com/v1"
#: unparseable ``data:`` lines one reply may carry before it fails: a few (a proxy's comment, a keep-alive
#: line in a home-made format) are skipped, a stream of them is a broken provider
MAX_BAD_LINES = 10
log = logging.getLogger("odysseus.llm")
KNOWN_CHUNK_KEYS = {
    "id",
    "object",
    "created",
    "model",
    "choices",
    "usage",
    "system_fingerprint",
    "obfuscation",
    "service_tier",
}  # the last two: per-chunk noise, not worth keeping


def api_root(base_url: Optional[str]) -> str:
    """The versioned API root: ``base_url`` as given, or with ``/v1`` when it is a bare host."""
    url = (base_url or DEFAULT_BASE_URL).rstrip("/")
    return url + "/v1" if urlsplit(url).path in ("", "/") else url


def wire_messages(messages: List[dict]) -> List[dict]:
    """OpenAI-shaped messages as the wire wants them (tool-call arguments as JSON strings)."""
    out = []
    for message in messages:
        message = dict(message)
        images = image_parts(message)
        message.pop("parts", None)
        if images:  # a content array: the text, then each image as a data URL
            message["content"] = [{"type": "text", "text": text_of(message.get("content"))}] + [
                {"type": "image_url", "image_url": {"url": f"data:{part['mime']};base64,{part['data']}"}}
                for part in images
            ]
        if message.get("tool_calls"):
            calls = []
            for call in message["tool_calls"]:
                fn = dict(call.get("function") or {})
                fn["arguments"] = arguments_json(fn.get("arguments", {}))
                calls.append({"id": call.get("id"), "type": call.get("type", "function"), "function": fn})
            message["tool_calls"] = calls
        out.append(message)
    return out


class _ToolCallBuffer:
    """Tool-call deltas accumulated by index."""

    def __init__(self) -> None:
        self.calls: Dict[int, dict] = {}
        self.emitted = False

    def add(self, part: dict, fallback_index: int) -> Optional[Event]:
        """Fold one delta in; return the ``tool_call_delta`` event it amounts to (None when it adds nothing)."""
        index = part.get("index", fallback_index)
        call = self.calls.setdefault(index, {"id": None, "name": "", "arguments": ""})
        new_id = new_name = None
        if part.get("id") and not call["id"]:
            call["id"] = new_id = part["id"]
        fn = part.get("function") or {}
        name = fn.get("name")
        if name and name != call["name"]:  # some servers repeat the whole name in every delta
            call["name"] += name
            new_name = call["name"]
        args = fn.get("arguments")
        piece = ""
        if isinstance(args, (dict, list)):  # a whole object at once: no preview worth streaming
            call["arguments"] = json.dumps(args)
        elif isinstance(args, str) and args:
            call["arguments"] += args
            piece = args
        if not (piece or new_id or new_name):
            return None
        return tool_call_delta(index, piece, new_id, new_name)

    def drain(self) -> List[Event]:
        events = [
            tool_call(call["id"] or new_call_id(), call["name"], parse_arguments(call["arguments"]), index)
            for index, call in sorted(self.calls.items())
        ]
        self.emitted = self.emitted or bool(events)
        self.calls = {}
        return events


class OpenAICompatProvider(HTTPProvider):
    """An OpenAI-compatible chat-completions server."""

    kind = "openai"

    def __init__(self, cfg: ProviderConfig, app_config: dict):
        super().__init__(cfg, app_config)
        self.root = api_root(cfg.base_url)
        self.think_tags = bool(cfg.options.get("think_tags", True))
        # templates that put <think> in the prompt: the reply starts inside the reasoning
        self.think_starts_open = bool(cfg.options.get("think_starts_open", False))
        self.ask_usage = bool(cfg.options.get("stream_usage", True))

    def _auth_headers(self) -> dict:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def body(self, request: ChatRequest) -> dict:
        """The chat-completions request body."""
        body: dict = {"model": request.model, "messages": wire_messages(request.messages), "stream": True}
        if self.ask_usage:
            body["stream_options"] = {"include_usage": True}
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.max_tokens is not None:
            body["max_tokens"] = request.max_tokens
        if request.tools:
            body["tools"] = request.tools
        body.update(request.extra.get("openai", {}))
        return body

    def _open(self, request: ChatRequest, cancel: CancelToken) -> ProviderStream:
        url = self.root + "/chat/completions"
        try:
            return self.transport.open(url, self.body(request), cancel)
        except ProviderHTTPError as exc:
            rejected = "stream_options" in exc.message or "include_usage" in exc.message
            if not (self.ask_usage and exc.status in (400, 422) and rejected):
                raise
            self.ask_usage = False  # this server rejects stream_options: never ask again
            return self.transport.open(url, self.body(request), cancel)

    def _events(self, response: ProviderStream, request: ChatRequest) -> Iterator[Event]:
        contents = ContentDeltas(self.think_tags, self.think_starts_open)
        tools = _ToolCallBuffer()
        reason: Optional[str] = None
        last_usage: Optional[dict] = None
        first = True
        plain = PlainContent()
        done = False
        bad_lines: List[ProviderProtocolError] = []
        for batch in sse_batches(response.chunks()):  # the events of one read: a plain loop over a list
            for _name, data in batch:
                content = plain.content(data)  # the common token chunk: no JSON decoding (see plain_chunks)
                if content is not None:
                    if not content:
                        continue
                    if contents.plain:
                        yield delta(content)
                    else:
                        yield from contents.split(content)
                    continue
                if data == "[DONE]" or data.strip() == "[DONE]":
                    reason = reason or "stop"
                    done = True
                    break
                try:
                    chunk = parse_json(data, self.name)
                    if not isinstance(chunk, dict):
                        raise ProviderProtocolError(f"Malformed chunk from provider {self.name}: {data[:200]!r}")
                except ProviderProtocolError as exc:
                    bad_lines.append(exc)
                    notice = self._bad_line(exc, len(bad_lines))
                    if notice is not None:
                        yield notice
                    continue
                if chunk.get("error"):
                    raise _in_stream_error(self.name, chunk["error"])
                # the common chunk carries only known keys: no dict built (a set-view comparison in C)
                extra = (
                    None
                    if chunk.keys() <= KNOWN_CHUNK_KEYS
                    else {k: v for k, v in chunk.items() if k not in KNOWN_CHUNK_KEYS}
                )
                was_first = first
                if first:
                    first = False
                    extra = extra or {}
                    extra.update({k: chunk[k] for k in ("id", "model", "system_fingerprint") if chunk.get(k)})
                if chunk.get("usage"):
                    last_usage = chunk["usage"]
                for choice in chunk.get("choices") or ():
                    piece = choice.get("delta") or choice.get("message") or {}
                    if not piece.keys() <= KNOWN_DELTA_KEYS:
                        unknown = {k: v for k, v in piece.items() if k not in KNOWN_DELTA_KEYS and v is not None}
                        if unknown:
                            extra = extra or {}
                            extra.update(unknown)
                    thinking = piece.get("reasoning_content") or piece.get("reasoning")
                    if thinking and isinstance(thinking, str):
                        yield delta(thinking, thinking=True)
                    content = piece.get("content")
                    if content and isinstance(content, str):
                        if contents.plain:
                            yield delta(content)
                        else:
                            yield from contents.split(content)
                    tool_parts = piece.get("tool_calls")
                    if tool_parts:
                        for index, part in enumerate(tool_parts):
                            response.mark_output()  # arguments streaming in count as output
                            fragment = tools.add(part, index)
                            if fragment is not None:
                                yield fragment
                    if choice.get("finish_reason"):
                        reason = choice["finish_reason"]
                        yield from tools.drain()
                if extra:
                    yield self.meta(fields=extra)
                elif not was_first:
                    plain.learn(data, chunk, extra)
            if done:
                break
        if reason is None:  # neither [DONE] nor a finish_reason: the stream was cut
            if bad_lines:  # ... after lines it could not read: that is what went wrong
                raise bad_lines[-1]
            raise ProviderNetworkError(f"Provider {self.name} ended the stream before it was done", provider=self.name)
        yield from contents.flush()
        yield from tools.drain()
        if last_usage:
            yield _usage_event(last_usage)
        yield finish(normalise_finish(reason, tools.emitted))

    def _bad_line(self, error: ProviderProtocolError, count: int) -> Optional[Event]:
        """Skip one unparseable line (logged); the first gets a notice, one past MAX_BAD_LINES fails the reply."""
        log.warning("skipped an unparseable line from provider %s (%d in this reply): %s", self.name, count, error)
        if count > MAX_BAD_LINES:
            raise ProviderProtocolError(
                f"{error.message} ({count} unparseable lines: the provider's stream is broken)", provider=self.name
            )
        if count > 1:
            return None
        return Event(
            NOTICE,
            {"message": f"Provider {self.name} sent a line that is not JSON; it was skipped.", "source": "provider"},
        )

    def _list_remote(self) -> List[str]:
        doc = self.transport.get_json(self.root + "/models", self.list_timeout)
        items = doc.get("data", []) if isinstance(doc, dict) else doc
        return [item["id"] for item in items if isinstance(item, dict) and item.get("id")]


def _usage_event(raw: dict) -> Event:
    extra = {}
    details = raw.get("completion_tokens_details") or {}
    if details.get("reasoning_tokens") is not None:
        extra["reasoning_tokens"] = details["reasoning_tokens"]
    cached = (raw.get("prompt_tokens_details") or {}).get("cached_tokens")
    if cached is not None:
        extra["cached_input_tokens"] = cached
    return usage(raw.get("prompt_tokens"), raw.get("completion_tokens"), **extra)


def _in_stream_error(provider: str, err) -> ProviderHTTPError:
    """An ``{"error": ...}`` chunk (OpenRouter, vLLM) mid-stream."""
    message = err.get("message") if isinstance(err, dict) else str(err)
    code = err.get("code") if isinstance(err, dict) else None
    status = code if isinstance(code, int) and 400 <= code < 600 else 502
    return ProviderHTTPError(
        f"Provider {provider} reported an error mid-stream: {message}", status=status, provider=provider
    )
