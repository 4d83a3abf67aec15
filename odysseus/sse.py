"""Pure encoders: a logged event -> the bytes of one wire projection; and an SSE parser.

``chat_frame`` is the ``/api/chat_stream`` projection (spec: chat-stream-events.md):
default-event ``data:`` frames whose JSON carries ``type``, ``{"delta": ...}`` for text,
``data: [DONE]`` on success and ``event: error`` for failures. Every frame of a logged
event carries ``id: <seq>`` so a client can resume after it.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Iterable, Iterator, List, Optional

from . import event_vocabulary
from .events import (
    AGENT_TERMINAL,
    CHAT_TERMINAL,
    DELTA,
    DONE,
    ERROR,
    RESEARCH_FINDINGS,
    RESEARCH_PROGRESS,
    RESEARCH_SOURCES,
    RUN_STARTED,
    START,
    Event,
    StoredDelta,
)

#: Declared events the chat projection does not send (run_started, start, close, run_missing, provider-level
#: ones), derived from odysseus.event_vocabulary; undeclared types are sent as they are.
CHAT_HIDDEN = frozenset(spec.name for spec in event_vocabulary.SPECS if event_vocabulary.CHAT not in spec.projections)


def comment(text: str) -> str:
    """An SSE comment frame (heartbeats, the opening comment)."""
    return f": {text}\n\n"


def _with_type(event_type: str, payload_json: str) -> str:
    head = '{"type":' + json.dumps(event_type)
    return head + "}" if payload_json == "{}" else head + "," + payload_json[1:]


def chat_frame(event: Event, payload_json: Optional[str] = None) -> Optional[str]:
    """Encode ``event`` for /api/chat_stream; None for events this projection does not send."""
    kind = event.type
    if kind in CHAT_HIDDEN:
        return None
    if payload_json is None:
        payload_json = json.dumps(event.data, ensure_ascii=False, separators=(",", ":"))
    head = f"id: {event.seq}\n" if event.seq is not None else ""
    if kind == DELTA:
        return f"{head}data: {payload_json}\n\n"
    if kind == DONE:
        return f"{head}data: [DONE]\n\n"
    if kind == ERROR:
        return f"{head}event: error\ndata: {payload_json}\n\n"
    return f"{head}data: {_with_type(kind, payload_json)}\n\n"


def parse_sse(chunks: Iterable[bytes]) -> Iterator[Dict[str, Optional[str]]]:
    """Parse an SSE byte stream into frames ``{"event", "data", "id", "comment"}``.

    Lines may be split across chunks in any way; a frame ends at a blank line. As in
    ``EventSource``, a block without ``data:`` lines (e.g. only ``retry:``) yields no frame.
    """
    buffer = b""
    frame: Dict[str, Optional[str]] = {}
    data_lines: List[str] = []
    for chunk in chunks:
        buffer += chunk
        while True:
            nl = buffer.find(b"\n")
            if nl < 0:
                break
            line = buffer[:nl].rstrip(b"\r").decode("utf-8")
            buffer = buffer[nl + 1 :]
            if line == "":
                if data_lines:  # as EventSource does: a block without data (retry:, id: only) is no event
                    frame["data"] = "\n".join(data_lines)
                    frame.setdefault("event", "message")
                    yield frame
                frame, data_lines = {}, []
                continue
            if line.startswith(":"):
                yield {"event": None, "data": None, "id": None, "comment": line[1:].strip()}
                continue
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "data":
                data_lines.append(value)
            elif field in ("event", "id", "retry"):
                frame[field] = value


# ---------------------------------------------------------------- agent projection
#: Canonical event -> named SSE event of /api/agent/chat/stream (spec: agent-stream-and-detached-runs.md).
AGENT_NAMES = event_vocabulary.agent_names()  # derived from odysseus.event_vocabulary (agent_name)
TOOL_RESULT_PREVIEW = 500


def named_frame(name: str, data: Dict[str, Any], seq: Optional[int] = None) -> str:
    """One named SSE frame."""
    head = f"id: {seq}\n" if seq is not None else ""
    return f"{head}event: {name}\ndata: {json.dumps(data, ensure_ascii=False, separators=(',', ':'))}\n\n"


def _agent_chunk(payload: str, seq: Optional[int]) -> Optional[str]:
    """The agent ``chunk`` frame of a stored text delta, from its payload (``run_log.text_delta_payload``).

    That payload is ``{"delta":<s>}`` or ``{"delta":<s>,"thinking":true}`` with ``<s>`` written by
    json's string encoder, which ends in a quote: so ``true}`` marks reasoning (not sent), and
    ``<s>`` is the text's JSON as ``named_frame`` would write it.
    """
    if payload.endswith("true}"):
        return None
    head = f"id: {seq}\n" if seq is not None else ""
    return f'{head}event: chunk\ndata: {{"content":{payload[9:-1]}}}\n\n'


def agent_frame(event: Event, payload_json: Optional[str] = None) -> Optional[str]:
    """Encode ``event`` for the agent API; None for events this projection does not send.

    ``run_started`` and ``start`` are two logged events with their own ids, so the
    documented order run_started, start, chunk... holds for every run and a cursor taken
    between them resumes exactly.
    """
    kind, seq = event.type, event.seq
    if event.__class__ is StoredDelta:  # a logged text delta: its payload, sliced (no decode, same bytes)
        return _agent_chunk(event.payload, seq)
    data = event.data
    name = AGENT_NAMES.get(kind)
    if name is None or (kind == DELTA and data.get("thinking")):
        return None
    if kind == RUN_STARTED:
        return named_frame("run_started", {"run_id": data.get("run_id")}, seq)
    if kind == START:
        return named_frame("start", {"task_id": data.get("task_id"), "model": data.get("model")}, seq)
    if kind == DELTA:
        return named_frame("chunk", {"content": data.get("delta", "")}, seq)
    if kind == "tool_start":
        return named_frame(
            "tool_call",
            {"tool": data.get("tool"), "arguments": data.get("arguments", {}), "call_id": data.get("call_id")},
            seq,
        )
    if kind == "tool_output":
        content = data.get("output")
        content = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
        return named_frame(
            "tool_result",
            {"tool": data.get("tool"), "content": content[:TOOL_RESULT_PREVIEW], "call_id": data.get("call_id")},
            seq,
        )
    if kind == ERROR:
        return named_frame("error", {"error": data.get("error"), "status": data.get("status")}, seq)
    if payload_json is not None:
        head = f"id: {seq}\n" if seq is not None else ""
        return f"{head}event: {name}\ndata: {payload_json}\n\n"
    return named_frame(name, data, seq)


# ---------------------------------------------------------------- research job projection
#: Run status -> the job status a research client sees.
JOB_STATUS = {"done": "done", "error": "error", "stopped": "cancelled", "interrupted": "error"}


def job_frame(data: Dict[str, Any], seq: Optional[int] = None) -> str:
    """One job-stream frame: ``data: {...}`` with its id."""
    head = f"id: {seq}\n" if seq is not None else ""
    return f"{head}data: {json.dumps(data, ensure_ascii=False, separators=(',', ':'))}\n\n"


def research_frame(event: Event, payload_json: Optional[str] = None) -> Optional[str]:
    """Encode ``event`` for /api/research/stream: ``data: {phase, ..., status}`` frames with ids.

    Progress frames carry the phase's fields; ``sources``, ``findings`` and ``report`` (one per
    report delta) follow; the last frame is ``{"status": "done"|"error"|"cancelled", "final": true}``,
    built from the terminal record (or, for a failed run, from its ``error`` event).
    """
    kind, data, seq = event.type, event.data, event.seq
    if kind == RESEARCH_PROGRESS:
        return job_frame({**(data.get("data") or {}), "status": "running"}, seq)
    if kind == RESEARCH_SOURCES:
        return job_frame({"phase": "sources", "sources": data.get("data") or [], "status": "running"}, seq)
    if kind == RESEARCH_FINDINGS:
        return job_frame({"phase": "findings", "findings": data.get("data") or [], "status": "running"}, seq)
    if kind == DELTA and not data.get("thinking"):
        return job_frame({"phase": "report", "delta": data.get("delta", ""), "status": "running"}, seq)
    if kind in (CHAT_TERMINAL, AGENT_TERMINAL):
        record = data.get("data") or {}
        status = JOB_STATUS.get(record.get("status") or "", "error")
        if status == "error":
            return None  # the error event that follows is the final frame
        research = record.get("research") or {}
        return job_frame(
            {
                "status": status,
                "final": True,
                "job_id": record.get("run_id"),
                "session_id": record.get("session_id"),
                "message_id": record.get("message_id"),
                "partial": bool(research.get("partial") or record.get("partial")),
            },
            seq,
        )
    if kind == ERROR:
        return job_frame({"status": "error", "final": True, "error": data.get("error"), "partial": True}, seq)
    return None
