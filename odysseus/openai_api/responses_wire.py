"""The Responses projection: a run's log -> OpenAI Responses stream events and the response object.

A third projection of the one run log (beside ``sse.chat_frame`` and ``sse.agent_frame``), but a
*stateful* one: a Responses stream opens and closes output items and content parts around the
text, and one log event may become several Responses events (the first text delta is preceded by
``response.output_item.added`` and ``response.content_part.added``). So ``ResponseFold`` consumes
the log from its start, in order, and numbers what it emits itself.

Invariants:

- ``sequence_number`` starts at 0 and grows by one per emitted event. It is a pure function of
  the response's stored head (``ResponseHead``) and the log prefix, so a resume that replays the
  log from its start through a fresh fold and drops every event up to ``starting_after`` sends
  exactly the events after it, numbered the same, on any worker and after a restart.
- Output item ids are ``<prefix>_<response suffix>_<output index>``: deterministic as well.
- The fold never reads the clock or the database; the terminal record carries the outcome.

The same fold gives ``GET /v1/responses/{id}`` its object while a run is held (``snapshot``) and,
as ``shape``, what the saved reply keeps so the object can be rebuilt after the replay window
(``odysseus.openai_api.stored``).
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Tuple

from ..events import (
    AGENT_TERMINAL,
    ASK_USER,
    CHAT_TERMINAL,
    DELTA,
    FUNCTION_CALL,
    RUN_STARTED,
    START,
    TOOL_OUTPUT,
    TOOL_START,
    USAGE,
    Event,
    StoredDelta,
)
from .head import ResponseHead

#: the label of our server-side tools on ``mcp_call`` / ``mcp_approval_request`` items (an MCP server's
#: tool carries that server's name, and its own tool name, as OpenAI's remote MCP tools do)
SERVER_LABEL = "odysseus"


def _named(tool: Any, mcp: Any) -> Dict[str, Any]:
    """``name`` and ``server_label`` of a server-side tool's item: ours, or an MCP server's own."""
    if isinstance(mcp, dict) and mcp.get("server") and mcp.get("tool"):
        return {"name": str(mcp["tool"]), "server_label": str(mcp["server"])}
    return {"name": tool, "server_label": SERVER_LABEL}


#: a tool output kept on an ``mcp_call`` item, at most (the saved reply keeps the whole row)
TOOL_OUTPUT_CHARS = 4000
#: the error of an ``mcp_call`` the run ended in the middle of
UNFINISHED = "the call did not finish"
#: the terminal stream event of each final status (``failed``: ``response.failed``)
TERMINAL_EVENTS = {
    "completed": "response.completed",
    "incomplete": "response.incomplete",
    "cancelled": "response.cancelled",
}

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
_decode_str = json.JSONDecoder().decode
_encode_str = json.encoder.encode_basestring  # a str as JSON, as _dumps writes it (ensure_ascii=False)


def frame(event: Dict[str, Any]) -> str:
    """One Responses SSE frame: ``event: <type>`` and the event's JSON (no ``id:``: the SDKs keep it
    across frames and would turn the next heartbeat comment into an empty event)."""
    return f"event: {event['type']}\ndata: {_dumps(event)}\n\n"


def response_status(record: Dict[str, Any]) -> Tuple[str, Optional[Dict[str, Any]], Optional[Dict[str, Any]]]:
    """(status, error, incomplete_details) of a response from its run's terminal record."""
    status = record.get("status")
    if status == "done":
        if record.get("finish_reason") == "length":
            return "incomplete", None, {"reason": "max_output_tokens"}
        return "completed", None, None
    if status == "stopped":
        return "cancelled", None, None
    error = record.get("error") or {}
    http = error.get("status")
    code = "rate_limit_exceeded" if http == 429 else "server_error"
    message = error.get("message") or ("the server restarted during this run" if status == "interrupted" else "failed")
    return "failed", {"code": code, "message": message}, None


def usage_object(usage: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """Our normalised usage -> the Responses ``usage`` object (None when the provider sent none)."""
    if not usage:
        return None
    inp = int(usage.get("input_tokens") or 0)
    out = int(usage.get("output_tokens") or 0)
    return {
        "input_tokens": inp,
        "input_tokens_details": {"cached_tokens": int(usage.get("cached_input_tokens") or 0)},
        "output_tokens": out,
        "output_tokens_details": {"reasoning_tokens": int(usage.get("reasoning_tokens") or 0)},
        "total_tokens": inp + out,
    }


class _Item:
    """One output item as the fold builds it.

    A text item's ``parts`` are the JSON-encoded fragments of a logged delta (``encoded``: a memory
    log's ``StoredDelta`` payload, sliced) or the plain text (deltas read back as ``Event``), joined
    once when the text is first asked for.
    """

    __slots__ = ("kind", "index", "id", "fields", "parts", "encoded", "text", "open", "shape", "delta_head", "json")

    def __init__(self, kind: str, index: int, item_id: str, fields: Dict[str, Any], start: int = 0):
        self.kind = kind
        self.index = index
        self.id = item_id
        self.fields = fields
        self.parts: List[str] = []
        self.encoded: Optional[bool] = None  # set by the first part
        self.text: Optional[str] = None
        self.open = True
        self.json: Optional[str] = None  # a closed text item's JSON, made once for its done events
        #: the item in the saved reply's output shape: text items as offsets into its content (message)
        #: or thinking (reasoning), the others whole
        self.shape: Dict[str, Any] = (
            {"type": kind, "start": start, "end": start}
            if kind in ("message", "reasoning")
            else {"type": kind, "id": item_id, **fields}
        )
        name = "response.reasoning_text.delta" if kind == "reasoning" else "response.output_text.delta"
        #: a delta frame is this, the delta's JSON, ``DELTA_TAIL`` of its kind and the sequence number
        self.delta_head = (
            f'event: {name}\ndata: {{"type":"{name}","item_id":"{item_id}","output_index":{index},'
            '"content_index":0,"delta":'
        )

    def add(self, text: str, encoded: bool) -> None:
        """Append a fragment (JSON-encoded or plain); a fold reads one source, so the kinds do not mix."""
        if self.encoded is None:
            self.encoded = encoded
        elif encoded != self.encoded:
            text = _decode_str(text) if encoded else _encode_str(text)
        self.parts.append(text)

    def full_text(self) -> str:
        """The item's text (joined, and decoded once, when first asked)."""
        if self.text is None or self.parts:
            joined = "".join(self.parts)
            if self.encoded:
                joined = _decode_str('"' + "".join(part[1:-1] for part in self.parts) + '"')
            self.text = (self.text or "") + joined
            self.parts = []
        return self.text


#: what follows a delta's JSON in its frame, before the sequence number (message, reasoning)
MESSAGE_TAIL = ',"logprobs":[],"sequence_number":'
DELTA_TAIL = {"message": MESSAGE_TAIL, "reasoning": ',"sequence_number":'}


class ResponseFold:
    """Fold a run's canonical events into Responses stream events and the response's output.

    ``after``: the last sequence number the reader has (``starting_after``); events up to it are
    numbered but not returned. ``feed(event, payload)`` returns the SSE text of the new events.
    """

    def __init__(
        self, head: ResponseHead, after: int = -1, emit: bool = True, keep_text: bool = True, shape: bool = False
    ):
        self.head = head
        self.after = after
        self.emit = emit
        #: False: only the shape and the numbering are kept (``turn.recorded``), not the text itself
        self.keep_text = keep_text
        #: keep ``shape`` up to date with every delta (``turn.recorded``: text items' offsets)
        self.tracks_shape = shape
        self.seq = -1
        self.items: List[_Item] = []
        self.current: Optional[_Item] = None  # the open message or reasoning item text goes to
        self.tools: Dict[str, _Item] = {}  # open mcp_call items by call id
        self.usage: Optional[Dict[str, Any]] = None
        self.status = "in_progress"
        self.error: Optional[Dict[str, Any]] = None
        self.incomplete: Optional[Dict[str, Any]] = None
        self.completed_at: Optional[float] = None
        self.content_chars = 0  # offsets into the saved reply's content and thinking (the skeleton)
        self.thinking_chars = 0
        #: the output's shape, kept up to date as events are folded (``odysseus.openai_api.turn.recorded``)
        self.shape: List[Dict[str, Any]] = []
        self._opening: Optional[str] = None  # the created object's JSON, sent by both opening events
        self._out: List[str] = []

    # ------------------------------------------------------------------ emitting
    def _emit(self, event: Dict[str, Any]) -> None:
        self.seq += 1
        if self.emit and self.seq > self.after:
            event["sequence_number"] = self.seq
            self._out.append(frame(event))

    def _skip(self, count: int = 1) -> bool:
        """True when the next ``count`` events are not sent (numbered only): no need to build them."""
        if not self.emit or self.seq + count <= self.after:
            self.seq += count
            return True
        return False

    # ------------------------------------------------------------------ the fold
    def feed(self, event: Event, payload: Optional[str] = None) -> Optional[str]:
        """Fold one logged event; the SSE text of the Responses events it makes (None: none)."""
        if event.__class__ is StoredDelta and not self.tracks_shape:
            # the hot path: one more piece of a message being streamed from a memory log
            item, text = self.current, event.payload
            if item is not None and item.encoded and item.kind == "message" and text[-2] == '"':
                text = text[9:-1]
                if self.keep_text:
                    item.parts.append(text)
                self.seq = seq = self.seq + 1
                if self.emit and seq > self.after:
                    return f"{item.delta_head}{text}{MESSAGE_TAIL}{seq}}}\n\n"
                return None
        kind = event.type
        if kind == DELTA:
            if event.__class__ is StoredDelta:
                payload = event.payload
                if payload.endswith(',"thinking":true}'):
                    self._text(payload[9:-17], True, True)
                else:
                    self._text(payload[9:-1], False, True)
            else:
                data = event.data
                self._text(data.get("delta") or "", bool(data.get("thinking")), False)
        elif kind == RUN_STARTED:
            self._lifecycle("response.created")
        elif kind == START:
            self._lifecycle("response.in_progress")
        elif kind in (CHAT_TERMINAL, AGENT_TERMINAL):
            self._terminal(event.data.get("data") or {})
        elif kind == FUNCTION_CALL:
            self._function_call(event.data)
        elif kind == TOOL_START:
            self._tool_start(event.data)
        elif kind == TOOL_OUTPUT:
            self._tool_output(event.data)
        elif kind == ASK_USER:
            self._approval_request(event.data.get("data") or {})
        elif kind == USAGE:
            self.usage = dict(event.data.get("data") or {})
        if not self._out:
            return None
        text = "".join(self._out)
        self._out = []
        return text

    # ------------------------------------------------------------------ items
    def _item_id(self, prefix: str, index: int) -> str:
        return f"{prefix}_{self.head.suffix}_{index}"

    def _open(self, kind: str, prefix: str, fields: Dict[str, Any], start: int = 0) -> _Item:
        index = len(self.items)
        item = _Item(kind, index, self._item_id(prefix, index), fields, start)
        self.items.append(item)
        self.shape.append(item.shape)
        return item

    def _text(self, text: str, thinking: bool, encoded: bool) -> None:
        """A text delta: ``text`` is its JSON (a stored delta's payload, sliced) when ``encoded``, else plain."""
        kind = "reasoning" if thinking else "message"
        item = self.current
        if item is None or item.kind != kind:
            item = self._open_text(kind)
        if self.keep_text:
            item.add(text, encoded)
        if self.tracks_shape:
            if encoded:  # the JSON of a str: its length less the quotes, unless it holds escapes
                size = len(_decode_str(text)) if "\\" in text else len(text) - 2
            else:
                size = len(text)
            if thinking:
                self.thinking_chars += size
            else:
                self.content_chars += size
            item.shape["end"] += size
        self.seq += 1
        if self.emit and self.seq > self.after:
            self._out.append(
                f"{item.delta_head}{text if encoded else _encode_str(text)}{DELTA_TAIL[kind]}{self.seq}}}\n\n"
            )

    def _open_text(self, kind: str) -> _Item:
        """Close the open item and open a message or reasoning item (its two announcing events)."""
        self._close_current()
        thinking = kind == "reasoning"
        start = self.thinking_chars if thinking else self.content_chars
        item = self.current = self._open(kind, "rs" if thinking else "msg", {}, start)
        if not self._skip(2):
            self._emit({"type": "response.output_item.added", "output_index": item.index, "item": self._view(item)})
            part = {"type": "reasoning_text", "text": ""} if thinking else _output_text("")
            self._emit(
                {
                    "type": "response.content_part.added",
                    "item_id": item.id,
                    "output_index": item.index,
                    "content_index": 0,
                    "part": part,
                }
            )
        return item

    def _close_current(self, status: str = "completed") -> None:
        item, self.current = self.current, None
        if item is None or not item.open:
            return
        item.open = False
        item.fields["status"] = item.shape["status"] = status
        if self._skip(3):
            return
        # the text is encoded once and spliced into the three done events and, later, the final object
        text, head = (
            _encode_str(item.full_text()),
            f'"item_id":"{item.id}","output_index":{item.index},"content_index":0',
        )
        if item.kind == "message":
            part = f'{{"type":"output_text","text":{text},"annotations":[],"logprobs":[]}}'
            done = f'"type":"response.output_text.done",{head},"text":{text},"logprobs":[]'
            item.json = (
                f'{{"id":"{item.id}","type":"message","role":"assistant","status":"{status}","content":[{part}]}}'
            )
        else:
            part = f'{{"type":"reasoning_text","text":{text}}}'
            done = f'"type":"response.reasoning_text.done",{head},"text":{text}'
            item.json = f'{{"id":"{item.id}","type":"reasoning","summary":[],"content":[{part}],"status":"{status}"}}'
        name = "response.output_text.done" if item.kind == "message" else "response.reasoning_text.done"
        first = self.seq + 1
        self.seq += 3
        frames = (
            f'event: {name}\ndata: {{{done},"sequence_number":{first}}}\n\n',
            f'event: response.content_part.done\ndata: {{"type":"response.content_part.done",{head},"part":{part},'
            f'"sequence_number":{first + 1}}}\n\n',
            f'event: response.output_item.done\ndata: {{"type":"response.output_item.done",'
            f'"output_index":{item.index},"item":{item.json},"sequence_number":{first + 2}}}\n\n',
        )
        self._out.extend(frames[max(0, self.after + 1 - first) :])  # a resume inside these three

    def _function_call(self, data: Dict[str, Any]) -> None:
        self._close_current()
        arguments = data.get("arguments")
        arguments = arguments if isinstance(arguments, str) else _dumps(arguments)
        item = self._open(
            "function_call",
            "fc",
            {"call_id": data.get("call_id"), "name": data.get("name"), "arguments": arguments, "status": "completed"},
        )
        item.open = False
        if self._skip(4):
            return
        added = self._view(item)
        added.update(arguments="", status="in_progress")
        self._emit({"type": "response.output_item.added", "output_index": item.index, "item": added})
        base = {"item_id": item.id, "output_index": item.index}
        self._emit({"type": "response.function_call_arguments.delta", **base, "delta": arguments})
        self._emit({"type": "response.function_call_arguments.done", **base, "arguments": arguments})
        self._emit({"type": "response.output_item.done", "output_index": item.index, "item": self._view(item)})

    def _tool_start(self, data: Dict[str, Any]) -> None:
        self._close_current()
        call_id = str(data.get("call_id") or data.get("server_id") or len(self.items))
        item = self._open(
            "mcp_call",
            "mcp",
            {
                **_named(data.get("tool"), data.get("mcp")),
                "arguments": _dumps(data.get("arguments") or {}),
                "status": "in_progress",
                "output": None,
                "error": None,
            },
        )
        self.tools[call_id] = item
        if self._skip(2):
            return
        self._emit({"type": "response.output_item.added", "output_index": item.index, "item": self._view(item)})
        self._emit({"type": "response.mcp_call.in_progress", "item_id": item.id, "output_index": item.index})

    def _tool_output(self, data: Dict[str, Any]) -> None:
        call_id = str(data.get("call_id") or data.get("server_id") or "")
        item = self.tools.pop(call_id, None)
        if item is None:
            return
        self._end_tool(item, data)

    def _end_tool(self, item: _Item, data: Optional[Dict[str, Any]]) -> None:
        item.open = False
        output = (data or {}).get("output")
        output = output if isinstance(output, str) or output is None else _dumps(output)
        failed = data is None or (data.get("exit_code") not in (0, None))
        item.fields.update(
            output=output[:TOOL_OUTPUT_CHARS] if output else output,
            status="failed" if failed else "completed",
            error=(UNFINISHED if data is None else f"exit code {data.get('exit_code')}") if failed else None,
        )
        item.shape.update(item.fields)
        if self._skip(2):
            return
        name = "response.mcp_call.failed" if failed else "response.mcp_call.completed"
        self._emit({"type": name, "item_id": item.id, "output_index": item.index})
        self._emit({"type": "response.output_item.done", "output_index": item.index, "item": self._view(item)})

    def _approval_request(self, data: Dict[str, Any]) -> None:
        if data.get("kind") != "tool_approval":
            return
        self._close_current()
        call = data.get("call") or {}
        item = self._open(
            "mcp_approval_request",
            "mcpr",
            {
                **_named(call.get("tool") or data.get("tool"), data.get("mcp")),
                "arguments": _dumps(call.get("arguments") or {}),
            },
        )
        item.id = item.shape["id"] = approval_item_id(str(data.get("approval_id") or ""))
        item.open = False
        if self._skip(2):
            return
        view = self._view(item)
        self._emit({"type": "response.output_item.added", "output_index": item.index, "item": view})
        self._emit({"type": "response.output_item.done", "output_index": item.index, "item": view})

    # ------------------------------------------------------------------ lifecycle
    def _lifecycle(self, name: str) -> None:
        """``response.created`` / ``response.in_progress``: the object as created (one JSON text for both)."""
        if self._skip():
            return
        if self._opening is None:
            self._opening = _dumps(self.snapshot(output=False))
        self.seq += 1
        self._out.append(
            f'event: {name}\ndata: {{"type":"{name}","response":{self._opening},"sequence_number":{self.seq}}}\n\n'
        )

    def _terminal(self, record: Dict[str, Any]) -> None:
        status, error, incomplete = response_status(record)
        ended = "completed" if status == "completed" else "incomplete"
        self._close_current(ended)
        for item in list(self.tools.values()):
            self._end_tool(item, None)  # a call the run ended in the middle of
        self.tools = {}
        self.status, self.error, self.incomplete = status, error, incomplete
        if record.get("usage"):  # the run's (what its saved reply keeps too)
            self.usage = dict(record["usage"])
        elapsed = (record.get("timing") or {}).get("total_time_ms")
        self.completed_at = round(self.head.created_at + elapsed / 1000.0, 3) if elapsed is not None else None
        if self._skip():
            return
        name = TERMINAL_EVENTS.get(status, "response.failed")
        self.seq += 1
        self._out.append(
            f'event: {name}\ndata: {{"type":"{name}","response":{self._final_json()},"sequence_number":{self.seq}}}\n\n'
        )

    def _final_json(self) -> str:
        """The final object as JSON: each closed text item's JSON as its done event had it (the text is not
        encoded again), the output last."""
        body = self.snapshot(output=False)
        body.pop("output")
        body["usage"] = usage_object(self.usage)
        items = ",".join(item.json if item.json is not None else _dumps(self._view(item)) for item in self.items)
        return _dumps(body)[:-1] + ',"output":[' + items + "]}"

    # ------------------------------------------------------------------ views
    def _view(self, item: _Item) -> Dict[str, Any]:
        if item.kind in ("message", "reasoning"):
            status = "in_progress" if item.open else item.fields.get("status", "completed")
            return text_item(item.kind, item.id, item.full_text(), status, with_text=not item.open)
        return {"id": item.id, "type": item.kind, **item.fields}

    def output(self) -> List[Dict[str, Any]]:
        """The output items as the response object lists them (open text items with their text so far)."""
        views = []
        for item in self.items:
            if item.open and item.kind in ("message", "reasoning"):
                views.append(text_item(item.kind, item.id, item.full_text(), "in_progress"))
            else:
                views.append(self._view(item))
        return views

    def snapshot(self, output: bool = True) -> Dict[str, Any]:
        """The response object as of the events folded so far."""
        body = self.head.response(self.status)
        body.update(
            output=self.output() if output else [],
            error=self.error,
            incomplete_details=self.incomplete,
            usage=usage_object(self.usage) if output else None,
            completed_at=self.completed_at if self.status == "completed" else None,
        )
        return body


def text_item(kind: str, item_id: str, text: str, status: str, with_text: bool = True) -> Dict[str, Any]:
    """A ``message`` or ``reasoning`` output item (``with_text=False``: as first announced, empty)."""
    if kind == "message":
        return {
            "id": item_id,
            "type": "message",
            "role": "assistant",
            "status": status,
            "content": [_output_text(text)] if with_text else [],
        }
    content = [{"type": "reasoning_text", "text": text}] if with_text else []
    return {"id": item_id, "type": "reasoning", "summary": [], "content": content, "status": status}


def approval_item_id(approval_id: str) -> str:
    """The ``mcp_approval_request`` item id of an approval (what ``mcp_approval_response`` echoes)."""
    return f"mcpr_{approval_id}"


def _output_text(text: str) -> Dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
