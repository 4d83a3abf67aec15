"""A scripted OpenAI-compatible model server: ``/v1/chat/completions`` streaming over SSE.

Each request gets the next scripted reply, streamed in the OpenAI shape: text split into
chunks, tool calls split across deltas (id and name first, then the arguments in pieces),
a finish reason, a usage chunk and ``data: [DONE]``. Every request body is recorded, so
tests can assert what the model was sent (for example that tool results are paired with
their calls by id). Runs on 127.0.0.1 in a thread; use as a context manager.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, List, Optional


def reply(
    text: str = "",
    tool_calls: Optional[List[dict]] = None,
    delay: float = 0.0,
    chunk_delay: float = 0.0,
    status: int = 200,
    error_body: str = "",
) -> dict:
    """One scripted reply: text and/or tool calls ``{"id", "name", "arguments": dict}``, with optional pauses;
    or, with ``status`` != 200, an HTTP error answer carrying ``error_body``."""
    return {
        "text": text,
        "tool_calls": tool_calls or [],
        "delay": delay,
        "chunk_delay": chunk_delay,
        "status": status,
        "error_body": error_body,
    }


def tool(call_id: str, name: str, **arguments) -> dict:
    """A scripted tool call."""
    return {"id": call_id, "name": name, "arguments": arguments}


def _chunks(text: str, size: int = 7) -> List[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


class ScriptedModel:
    """The server; ``replies`` is consumed in order (then ``default`` answers)."""

    def __init__(self, replies: Optional[List[dict]] = None, default: Optional[dict] = None, model: str = "scripted"):
        self.replies = list(replies or [])
        self.default = default or reply("(no more scripted replies)")
        self.model = model
        self.requests: List[dict] = []
        #: request body -> the prompt_tokens its usage chunk reports (None: always 11)
        self.prompt_tokens: Optional[Callable[[dict], int]] = None
        self.lock = threading.Lock()
        self.server: Optional[ThreadingHTTPServer] = None
        self.url = ""

    def script(self, *replies: dict) -> None:
        """Append replies to the script."""
        with self.lock:
            self.replies.extend(replies)

    def next_reply(self, body: dict) -> dict:
        with self.lock:
            self.requests.append(body)
            return self.replies.pop(0) if self.replies else self.default

    def start(self) -> "ScriptedModel":
        """Serve on a free loopback port."""
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                if self.path.rstrip("/").endswith("/models"):
                    body = json.dumps({"object": "list", "data": [{"id": model.model, "object": "model"}]}).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                else:
                    self.send_error(404)

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self.send_error(404)
                    return
                script = model.next_reply(body)
                if script.get("status", 200) != 200:
                    payload = script.get("error_body", "").encode()
                    self.send_response(script["status"])
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                try:
                    model.stream(self.wfile, script, body)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                self.close_connection = True

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stream(self, out, script: dict, body: Optional[dict] = None) -> None:
        """Write one reply as OpenAI streaming chunks."""

        def send(payload) -> None:
            text = payload if isinstance(payload, str) else json.dumps(payload)
            out.write(f"data: {text}\n\n".encode())
            out.flush()

        def chunk(delta: dict, finish: Optional[str] = None) -> dict:
            return {
                "id": "chatcmpl-1",
                "object": "chat.completion.chunk",
                "model": self.model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }

        # the delays below are the script's pacing (a slow model), not synchronisation
        if script["delay"]:
            time.sleep(script["delay"])
        send(chunk({"role": "assistant", "content": ""}))
        for piece in _chunks(script["text"]):
            send(chunk({"content": piece}))
            if script["chunk_delay"]:
                time.sleep(script["chunk_delay"])
        for index, call in enumerate(script["tool_calls"]):
            args = json.dumps(call["arguments"])
            half = len(args) // 2
            send(
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": index,
                                "id": call["id"],
                                "type": "function",
                                "function": {"name": call["name"], "arguments": ""},
                            }
                        ]
                    }
                )
            )
            # "fragments": the argument text exactly as split (tests of split escapes); else two halves
            for piece in call.get("fragments") or [args[:half], args[half:]]:
                send(chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
                if call.get("fragment_delay"):
                    time.sleep(call["fragment_delay"])
        send(chunk({}, "tool_calls" if script["tool_calls"] else "stop"))
        prompt = self.prompt_tokens(body or {}) if self.prompt_tokens is not None else 11
        send(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion.chunk",
                "model": self.model,
                "choices": [],
                "usage": {"prompt_tokens": prompt, "completion_tokens": 7, "total_tokens": prompt + 7},
            }
        )
        send("[DONE]")

    def stop(self) -> None:
        """Shut the server down."""
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    def __enter__(self) -> "ScriptedModel":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
