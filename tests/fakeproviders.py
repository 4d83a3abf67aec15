"""Small real HTTP servers speaking the providers' wire protocols, scriptable per request.

A ``FakeProvider`` listens on 127.0.0.1 (port 0) with a threaded stdlib server. Each
POST takes the next scripted ``Reply`` (or the default): an HTTP status, a body for
errors (with ``Retry-After``), or a stream of chunks written one by one with delays,
then an ending: normal, ``stall`` (send nothing more), ``reset`` (RST via SO_LINGER 0),
``cut`` (close without the last chunk) or ``silent`` (never send a first byte). Every
request is recorded with its JSON body and the moment the server saw the client
disconnect, so tests can assert a stop reached the model server.
"""

from __future__ import annotations

import io
import json
import queue
import select
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Dict, List, Optional, Union

Chunk = Union[str, bytes]
HOLD_MAX = 30.0  # the longest a stalled/silent reply waits for the client to go away


def sse(obj: Any) -> str:
    """One default-event SSE frame carrying ``obj`` as JSON."""
    return f"data: {json.dumps(obj)}\n\n"


def sse_event(name: str, obj: Any) -> str:
    """One named SSE frame (Anthropic style)."""
    return f"event: {name}\ndata: {json.dumps(obj)}\n\n"


def ndjson(obj: Any) -> str:
    """One NDJSON line."""
    return json.dumps(obj) + "\n"


#: llama.cpp's own endpoints (prompt counting), which a fake that is not llama.cpp does not serve
LLAMACPP_ONLY = ("/apply-template", "/tokenize")


@dataclass
class Reply:
    """What the server does with one POST."""

    chunks: List[Chunk] = field(default_factory=list)
    delay: float = 0.0  # seconds before each chunk
    status: int = 200
    body: Optional[Any] = None  # error body (dict -> JSON); sent with Content-Length
    headers: Dict[str, str] = field(default_factory=dict)
    end: str = "ok"  # ok | stall | reset | cut | silent
    chunked: bool = True  # False: close-delimited body (HTTP/1.0 style)
    content_type: str = "text/event-stream"
    first_delay: float = 0.0  # extra seconds before the first chunk


@dataclass
class Record:
    """One request the server received."""

    method: str
    path: str
    headers: Dict[str, str]
    body: Any
    received_at: float
    disconnected_at: Optional[float] = None
    finished: threading.Event = field(default_factory=threading.Event)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: "_Server"

    def log_message(self, *args: Any) -> None:  # keep test output clean
        pass

    def _record(self) -> Record:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw
        record = Record(self.command, self.path, dict(self.headers), body, time.monotonic())
        self.server.fake.records.append(record)
        return record

    def do_GET(self) -> None:  # noqa: N802 - http.server naming
        record = self._record()
        fake = self.server.fake
        if self.path in fake.get_status:
            status, payload = fake.get_status[self.path]
        elif self.path in fake.get_json:
            status, payload = 200, fake.get_json[self.path]
        else:
            status, payload = 404, {"error": "not found"}
        self._send_body(status, payload, {})
        record.finished.set()

    def do_POST(self) -> None:  # noqa: N802
        if self.path in LLAMACPP_ONLY:  # not a llama.cpp server: 404, as vLLM or OpenAI answer
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.close_connection = True
            self._send_body(404, {"error": {"message": "File Not Found", "code": 404}}, {})
            return
        record = self._record()
        try:
            self._play(record, self.server.fake.reply_for(record))
        except OSError:
            record.disconnected_at = record.disconnected_at or time.monotonic()
        finally:
            self.close_connection = True
            record.finished.set()

    def _send_body(self, status: int, payload: Any, headers: Dict[str, str]) -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")  # one request per connection: no stale keep-alive reuse
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _wait(self, record: Record, seconds: float) -> bool:
        """Sleep ``seconds`` watching the socket; True when the client disconnected."""
        deadline = time.monotonic() + seconds
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.server.fake.closing.is_set():
                return False
            readable, _, _ = select.select([self.connection], [], [], min(remaining, 0.05))
            if readable:
                try:
                    peek = self.connection.recv(1, socket.MSG_PEEK)
                except OSError:
                    peek = b""
                if not peek:
                    record.disconnected_at = time.monotonic()
                    return True
                time.sleep(min(remaining, 0.05))  # unexpected bytes: ignore them

    def _play(self, record: Record, reply: Reply) -> None:
        if reply.end == "silent":
            self._wait(record, HOLD_MAX)
            return
        if reply.body is not None or reply.status >= 400:
            self._send_body(reply.status, reply.body if reply.body is not None else {"error": "failed"}, reply.headers)
            return
        self.send_response(reply.status)
        self.send_header("Content-Type", reply.content_type)
        if reply.chunked:
            self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        for key, value in reply.headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.flush()
        if reply.first_delay and self._wait(record, reply.first_delay):
            return
        for chunk in reply.chunks:
            if reply.delay and self._wait(record, reply.delay):
                return
            data = chunk.encode() if isinstance(chunk, str) else chunk
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data) if reply.chunked else data)
            self.wfile.flush()
        if reply.end == "stall":
            self._wait(record, HOLD_MAX)
        elif reply.end == "reset":
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.wfile.close()  # drop the file objects' references so close() really closes: RST
            self.rfile.close()
            self.connection.close()
            self.wfile, self.rfile = io.BytesIO(), io.BytesIO()  # http.server flushes them afterwards
        elif reply.end == "cut":
            self.connection.shutdown(socket.SHUT_RDWR)
        elif reply.chunked:
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
            self._wait(record, 0.2)  # notice a client that leaves right away (no-op otherwise)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # the stdlib default backlog of 5 overflows when two dozen runs connect at once, and an
    # overflowing accept queue can reset a fresh connection: real model servers listen wider
    request_queue_size = 128
    fake: "FakeProvider"


class FakeProvider:
    """A scriptable model server on 127.0.0.1; use as a context manager or call ``close``."""

    def __init__(self, default: Optional[Reply] = None, chooser: Optional[Callable[[Record], Reply]] = None):
        self.records: List[Record] = []
        self.chooser = chooser  # picks the reply from the request (concurrent tests); else the queue
        self.replies: "queue.Queue[Reply]" = queue.Queue()
        self.default = default or Reply()
        self.get_json: Dict[str, Any] = {}
        self.get_status: Dict[str, tuple] = {}
        self.closing = threading.Event()
        self.server = _Server(("127.0.0.1", 0), _Handler)
        self.server.fake = self
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def script(self, *replies: Reply) -> "FakeProvider":
        """Queue replies for the next POSTs, in order."""
        for reply in replies:
            self.replies.put(reply)
        return self

    def next_reply(self) -> Reply:
        """The next scripted reply, else the default."""
        try:
            return self.replies.get_nowait()
        except queue.Empty:
            return self.default

    def reply_for(self, record: Record) -> Reply:
        """The chooser's reply for this request, else the next scripted one."""
        return self.chooser(record) if self.chooser is not None else self.next_reply()

    @property
    def posts(self) -> List[Record]:
        """The POST requests received so far."""
        return [r for r in self.records if r.method == "POST"]

    def wait_for_posts(self, count: int, timeout: float = 10.0) -> List[Record]:
        """Block until ``count`` POSTs have arrived."""
        deadline = time.monotonic() + timeout
        while len(self.posts) < count and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.posts

    def close(self) -> None:
        """Stop serving and release waiting handlers.

        The listening socket is shut down first: that wakes a serve loop blocked in ``accept()`` (after
        a poll that said ready for a connection something else took), which ``shutdown()`` alone would
        wait for forever.
        """
        self.closing.set()
        try:  # the fakes import nothing of the app: a plain shutdown, not odysseus.llm.http.shutdown_socket
            self.server.socket.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> "FakeProvider":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def refused_url() -> str:
    """A loopback URL where nothing listens."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


# ---------------------------------------------------------------- chunk builders per protocol


def openai_chunk(delta: Optional[dict] = None, finish_reason: Optional[str] = None, **top: Any) -> str:
    """One ``chat.completion.chunk`` SSE frame."""
    choices = (
        []
        if delta is None and finish_reason is None
        else [{"index": 0, "delta": delta or {}, "finish_reason": finish_reason}]
    )
    return sse(
        {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": choices, **top}
    )


def openai_text(*texts: str, usage: Optional[dict] = None, finish_reason: str = "stop", done: bool = True) -> List[str]:
    """A role chunk, one chunk per text, the finish chunk, the usage chunk, ``[DONE]``."""
    chunks = [openai_chunk({"role": "assistant", "content": ""})]
    chunks += [openai_chunk({"content": text}) for text in texts]
    chunks.append(openai_chunk({}, finish_reason))
    if usage is not None:
        chunks.append(openai_chunk(None, usage=usage))
    if done:
        chunks.append("data: [DONE]\n\n")
    return chunks


def ollama_text(
    *texts: str,
    thinking: tuple = (),
    prompt_eval_count: Optional[int] = 7,
    eval_count: Optional[int] = 3,
    done_reason: str = "stop",
) -> List[str]:
    """Ollama /api/chat NDJSON lines: thinking, content, the done line with counts."""
    base = {"model": "llama3", "created_at": "2024-01-01T00:00:00Z"}
    lines = [
        ndjson({**base, "message": {"role": "assistant", "content": "", "thinking": t}, "done": False})
        for t in thinking
    ]
    lines += [ndjson({**base, "message": {"role": "assistant", "content": t}, "done": False}) for t in texts]
    final = {
        **base,
        "message": {"role": "assistant", "content": ""},
        "done": True,
        "done_reason": done_reason,
        "total_duration": 1000,
        "eval_duration": 500,
    }
    if prompt_eval_count is not None:
        final["prompt_eval_count"] = prompt_eval_count
    if eval_count is not None:
        final["eval_count"] = eval_count
    lines.append(ndjson(final))
    return lines


def anthropic_start(input_tokens: int = 12) -> List[str]:
    """``message_start`` (and a ``ping``)."""
    return [
        sse_event(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-x",
                    "content": [],
                    "stop_reason": None,
                    "usage": {"input_tokens": input_tokens, "output_tokens": 1},
                },
            },
        ),
        sse_event("ping", {"type": "ping"}),
    ]


def anthropic_block(index: int, kind: str, pieces: List[str], **start: Any) -> List[str]:
    """A content block: start, one delta per piece, stop. ``kind``: text, thinking or tool_use."""
    delta_type = {"text": "text_delta", "thinking": "thinking_delta", "tool_use": "input_json_delta"}[kind]
    field_name = {"text": "text", "thinking": "thinking", "tool_use": "partial_json"}[kind]
    block = {
        "type": kind,
        **({"text": ""} if kind == "text" else {}),
        **({"thinking": ""} if kind == "thinking" else {}),
        **({"input": {}} if kind == "tool_use" else {}),
        **start,
    }
    frames = [sse_event("content_block_start", {"type": "content_block_start", "index": index, "content_block": block})]
    frames += [
        sse_event(
            "content_block_delta",
            {"type": "content_block_delta", "index": index, "delta": {"type": delta_type, field_name: piece}},
        )
        for piece in pieces
    ]
    frames.append(sse_event("content_block_stop", {"type": "content_block_stop", "index": index}))
    return frames


def anthropic_end(stop_reason: str = "end_turn", output_tokens: int = 5) -> List[str]:
    """``message_delta`` with the stop reason and usage, then ``message_stop``."""
    return [
        sse_event(
            "message_delta",
            {"type": "message_delta", "delta": {"stop_reason": stop_reason}, "usage": {"output_tokens": output_tokens}},
        ),
        sse_event("message_stop", {"type": "message_stop"}),
    ]


def anthropic_text(*texts: str, input_tokens: int = 12, output_tokens: int = 5) -> List[str]:
    """A whole plain-text Messages stream."""
    return (
        anthropic_start(input_tokens)
        + anthropic_block(0, "text", list(texts))
        + anthropic_end(output_tokens=output_tokens)
    )
