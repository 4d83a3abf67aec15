"""The Chat Completions projection: a run's log -> ``chat.completion.chunk`` frames and the completion.

Like the Responses projection (``responses_wire``) a fold over the log from its start: the first
frame carries the role, tool calls are numbered in the order the model made them, and the end of
the run becomes one final chunk with its ``finish_reason`` (plus a usage chunk when the client asked
for ``stream_options.include_usage``) and ``data: [DONE]``. A run that failed or was cancelled ends
with an OpenAI error frame ``data: {"error": {...}}`` instead, which the SDKs raise as ``APIError``.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

from ..events import AGENT_TERMINAL, CHAT_TERMINAL, DELTA, FUNCTION_CALL, RUN_STARTED, USAGE, Event, StoredDelta
from .head import ResponseHead

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
_decode_json = json.JSONDecoder().decode


def _decode_str(literal: str) -> str:
    """The text of a JSON string literal (parts already JSON-escaped, joined between quotes)."""
    text: str = _decode_json(literal)
    return text


def chat_usage(usage: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """Our normalised usage -> the Chat Completions ``usage`` object."""
    if not usage:
        return None
    prompt = int(usage.get("input_tokens") or 0)
    completion = int(usage.get("output_tokens") or 0)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def run_error(record: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The OpenAI error object of a run that did not succeed (None when it did), with its HTTP status."""
    status = record.get("status")
    if status == "done":
        return None
    if status == "stopped":
        return {
            "message": f"the run was {record.get('stop_reason') or 'stopped'} before it finished",
            "type": "cancelled",
            "param": None,
            "code": "cancelled",
            "status": 499,
        }
    error = record.get("error") or {}
    http = error.get("status") or (503 if status == "interrupted" else 500)
    message = error.get("message") or ("the server restarted during this run" if status == "interrupted" else "failed")
    kind = "rate_limit_error" if http == 429 else "server_error"
    return {"message": message, "type": kind, "param": None, "code": kind, "status": http}


class ChatFold:
    """Fold a run's events into ``chat.completion.chunk`` frames (``feed``) and the final completion."""

    def __init__(self, head: ResponseHead, emit: bool = True):
        self.head = head
        self.emit = emit
        self.parts: List[str] = []  # JSON-encoded text fragments
        self.reasoning: List[str] = []
        self.tool_calls: List[Dict[str, Any]] = []
        self.usage: Optional[Dict[str, Any]] = None
        self.record: Optional[Dict[str, Any]] = None
        created = int(head.created_at)
        self._prefix = (
            f'data: {{"id":"{head.id}","object":"chat.completion.chunk","created":{created},'
            f'"model":{_dumps(head.model)},"system_fingerprint":null,"choices":[{{"index":0,"delta":'
        )

    def _chunk(self, delta: str, finish: Optional[str] = None) -> str:
        reason = "null" if finish is None else f'"{finish}"'
        return f'{self._prefix}{delta},"logprobs":null,"finish_reason":{reason}}}]}}\n\n'

    def feed(self, event: Event, payload: Optional[str] = None) -> Optional[str]:
        """Fold one logged event; the SSE text it makes (None: nothing)."""
        kind = event.type
        if kind == DELTA:
            if event.__class__ is StoredDelta:
                raw = event.payload
                thinking = raw.endswith(',"thinking":true}')
                text = raw[9:-17] if thinking else raw[9:-1]
            else:
                thinking = bool(event.data.get("thinking"))
                text = _dumps(event.data.get("delta", ""))
            (self.reasoning if thinking else self.parts).append(text)
            if not self.emit:
                return None
            key = "reasoning_content" if thinking else "content"
            return self._chunk(f'{{"{key}":{text}}}')
        if kind == RUN_STARTED:
            return self._chunk('{"role":"assistant","content":""}') if self.emit else None
        if kind == FUNCTION_CALL:
            call = self._call(event.data)
            if not self.emit:
                return None
            return self._chunk(_dumps({"tool_calls": [dict(call, index=len(self.tool_calls) - 1)]}))
        if kind == USAGE:
            self.usage = dict(event.data.get("data") or {})
            return None
        if kind in (CHAT_TERMINAL, AGENT_TERMINAL):
            return self._end(event.data.get("data") or {})
        return None

    def _call(self, data: Dict[str, Any]) -> Dict[str, Any]:
        arguments = data.get("arguments")
        arguments = arguments if isinstance(arguments, str) else _dumps(arguments)
        call = {
            "id": data.get("call_id"),
            "type": "function",
            "function": {"name": data.get("name"), "arguments": arguments},
        }
        self.tool_calls.append(call)
        return call

    def _end(self, record: Dict[str, Any]) -> Optional[str]:
        self.record = record
        if record.get("usage"):
            self.usage = dict(record["usage"])
        if not self.emit:
            return None
        error = run_error(record)
        if error is not None:
            body = {k: v for k, v in error.items() if k != "status"}
            return f"data: {_dumps({'error': body})}\n\n"
        text = self._chunk("{}", self.finish_reason())
        if self.head.include_usage:
            created = int(self.head.created_at)
            usage = chat_usage(self.usage) or chat_usage({"input_tokens": 0, "output_tokens": 0})
            text += (
                "data: "
                + _dumps(
                    {
                        "id": self.head.id,
                        "object": "chat.completion.chunk",
                        "created": created,
                        "model": self.head.model,
                        "system_fingerprint": None,
                        "choices": [],
                        "usage": usage,
                    }
                )
                + "\n\n"
            )
        return text + "data: [DONE]\n\n"

    def finish_reason(self) -> str:
        """``stop``, ``length`` or ``tool_calls``."""
        if self.tool_calls:
            return "tool_calls"
        if (self.record or {}).get("finish_reason") == "length":
            return "length"
        return "stop"

    def text(self) -> str:
        """The reply's text so far."""
        return _decode_str('"' + "".join(part[1:-1] for part in self.parts) + '"')

    def completion(self) -> Dict[str, Any]:
        """The non-streamed ``chat.completion`` object."""
        text = self.text()
        message: Dict[str, Any] = {
            "role": "assistant",
            "content": text or (None if self.tool_calls else ""),
            "refusal": None,
        }
        if self.tool_calls:
            message["tool_calls"] = [dict(call) for call in self.tool_calls]
        if self.reasoning:
            message["reasoning_content"] = _decode_str('"' + "".join(p[1:-1] for p in self.reasoning) + '"')
        return {
            "id": self.head.id,
            "object": "chat.completion",
            "created": int(self.head.created_at),
            "model": self.head.model,
            "system_fingerprint": None,
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": self.finish_reason()}],
            "usage": chat_usage(self.usage) or chat_usage({"input_tokens": 0, "output_tokens": 0}),
        }
