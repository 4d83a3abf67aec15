"""What the HTTP adapters share: configuration, the stream loop, tool-call helpers."""

from __future__ import annotations

import json
import uuid
from typing import Any, Dict, Iterator, List, Optional

from ..cancel import Cancelled, CancelToken
from ..events import DELTA, PROVIDER_META, TOOL_CALL, Event
from .base import ChatRequest, ProviderConfig
from .http import ProviderStream, Timeouts, Transport
from .http_errors import provider_errors
from .text_repair import Repair


class HTTPProvider:
    """Base of the adapters: name, models, timeouts, and the guarded stream loop.

    Subclasses implement ``_open`` (send the request) and ``_events`` (turn the open
    response into canonical events). ``stream`` wraps both in the one error boundary,
    repairs UTF-16 surrogates in their text once (``text_repair.Repair``), switches to
    the idle timeout at the first output, and always closes the connection.
    """

    kind = "http"
    default_base_url = ""  # used when the configuration names no base_url

    def __init__(self, cfg: ProviderConfig, app_config: dict):
        self.config = cfg
        self.name = cfg.name
        self.base_url = (cfg.base_url or self.default_base_url).rstrip("/")
        self.api_key = cfg.api_key
        self.configured_models: List[str] = list(cfg.models)
        self.default_model: Optional[str] = cfg.default_model or (cfg.models[0] if cfg.models else None)
        self.prices: Dict[str, dict] = {}  # registry.build_providers fills it from [prices]
        self.timeouts = Timeouts.of(cfg, app_config)
        self.list_timeout = float(cfg.options.get("list_timeout", min(self.timeouts.idle, 5.0)))
        self.transport = Transport(self.name, self.timeouts, {**self._auth_headers(), **cfg.options.get("headers", {})})

    def _auth_headers(self) -> dict:
        return {}

    def _open(self, request: ChatRequest, cancel: CancelToken) -> ProviderStream:
        raise NotImplementedError

    def _events(self, response: ProviderStream, request: ChatRequest) -> Iterator[Event]:
        raise NotImplementedError

    def stream(self, request: ChatRequest, cancel: CancelToken) -> Iterator[Event]:
        """Yield canonical events for one completion; stops promptly when ``cancel`` fires."""
        response = self._open(request, cancel)
        check = cancel.raise_if_cancelled
        repair = Repair()  # the one text repair, in this loop: no generator layer per event
        clean = repair.clean
        try:
            with provider_errors(self.name, cancel):
                for event in self._events(response, request):
                    if clean(event):  # the common token: a delta with nothing to repair
                        if not response.output_started:
                            response.mark_output()
                        check()
                        yield event
                        continue
                    for fixed in repair.feed(event):
                        if not response.output_started and fixed.type in (DELTA, TOOL_CALL):
                            response.mark_output()
                        check()
                        yield fixed
                for fixed in repair.flush():  # a half still held at the end: U+FFFD
                    if not response.output_started:
                        response.mark_output()
                    check()
                    yield fixed
                if cancel.cancelled:  # the shutdown socket looked like a clean end of stream
                    raise Cancelled(cancel.reason or "stopped")
            response.finish()
        finally:
            response.close()

    def list_models(self) -> List[str]:
        """Configured ``models`` when given, else what the server lists."""
        if self.configured_models:
            return list(self.configured_models)
        return self._list_remote()

    def _list_remote(self) -> List[str]:
        raise NotImplementedError

    def meta(self, **fields: Any) -> Event:
        """A provider_meta event carrying fields we keep but do not project."""
        return Event(PROVIDER_META, {"provider": self.name, **fields})


def parse_arguments(raw: Any) -> Any:
    """Tool-call arguments as an object; invalid JSON stays a string so the caller can report it."""
    if isinstance(raw, (dict, list)):
        return raw
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}
    try:
        return json.loads(raw)
    except (TypeError, ValueError):
        return raw


def arguments_json(arguments: Any) -> str:
    """Tool-call arguments as the JSON string OpenAI-shaped messages carry."""
    return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)


def new_call_id() -> str:
    """A call id for providers that do not send one (Ollama)."""
    return "call_" + uuid.uuid4().hex[:24]


def text_of(content: Any) -> str:
    """The text of an OpenAI message content (a string or a list of parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part.get("text", "") for part in content if isinstance(part, dict) and part.get("type") in ("text", None)
        )
    return str(content)


def image_parts(message: dict) -> List[dict]:
    """The provider-neutral image parts ``{"type": "image", "mime", "data": <base64>}`` of a message
    (added by ``odysseus.context``; each adapter translates them to its own wire shape)."""
    return [
        part
        for part in message.get("parts") or []
        if isinstance(part, dict) and part.get("type") == "image" and part.get("data")
    ]


def normalise_finish(reason: Optional[str], had_tool_calls: bool) -> Optional[str]:
    """OpenAI vocabulary; ``tool_calls`` whenever the model asked for tools."""
    mapped = {
        "end_turn": "stop",
        "stop_sequence": "stop",
        "max_tokens": "length",
        "tool_use": "tool_calls",
        "pause_turn": "stop",
        "refusal": "content_filter",
    }.get(reason or "", reason)
    if had_tool_calls and mapped in (None, "stop"):
        return "tool_calls"
    return mapped
