"""A fast OpenAI-compatible model server for benchmarks: asyncio over raw sockets.

``POST /v1/chat/completions`` streams ``tokens`` chunks in OpenAI's streaming shape
(role chunk, one content chunk per token ``tk<i> ``, finish chunk, usage chunk,
``data: [DONE]``) as an HTTP/1.1 chunked body; ``GET /v1/models`` lists the model
``bench``. The defaults come from the command line; the last user message may
override them per request with ``tokens=N``, ``delay=SECONDS`` and ``size=BYTES`` (each
token padded to that length with ``x``, for large replies) words, so one server serves
every benchmark. A request's ``max_tokens`` caps the count, as a real server's does (a title
request asks for 32). With zero delay the whole reply is written at once
(the physical limit for the client); with a delay, one token per interval.

Run as its own process: ``python -m bench.model_server --port 8001``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import resource
from typing import Tuple

_DIRECTIVE = re.compile(r"\b(tokens|delay|size)=([0-9.]+)")
_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n"
)


def _chunk(frame: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(frame), frame)


def _frame(delta: dict, finish: str | None = None, usage: dict | None = None) -> bytes:
    body = {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "bench",
        "choices": [] if usage else [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    if usage:
        body["usage"] = usage
    return _chunk(b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n")


def settings(body: dict, tokens: int, delay: float) -> Tuple[int, float, int]:
    """Token count, pacing and token size for one request: the server defaults, overridden by the prompt."""
    messages = body.get("messages") or []
    users = [m.get("content") for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    text = users[-1] if users and isinstance(users[-1], str) else ""
    size = 0
    for key, value in _DIRECTIVE.findall(text):
        if key == "tokens":
            tokens = int(float(value))
        elif key == "size":
            size = int(float(value))
        else:
            delay = float(value)
    return tokens, delay, size


class ModelServer:
    """Serves connections with keep-alive; one coroutine per connection."""

    def __init__(self, tokens: int, delay: float):
        self.tokens = tokens
        self.delay = delay

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Answer requests on one connection until the client closes it."""
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path = lines[0].split(" ")[:2]
                headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)}
                length = int(headers.get("content-length") or 0)
                raw = await reader.readexactly(length) if length else b""
                close = headers.get("connection", "").lower() == "close"
                if method == "GET" and path.endswith("/models"):
                    data = b'{"object":"list","data":[{"id":"bench","object":"model"}]}'
                    writer.write(
                        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                        % (len(data), data)
                    )
                elif method == "POST" and path.endswith("/chat/completions"):
                    await self.stream(writer, json.loads(raw or b"{}"))
                else:
                    writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\n{}")
                await writer.drain()
                if close:
                    break
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            pass
        finally:
            writer.close()

    async def stream(self, writer: asyncio.StreamWriter, body: dict) -> None:
        """One streamed completion."""
        tokens, delay, size = settings(body, self.tokens, self.delay)
        if isinstance(body.get("max_tokens"), int) and body["max_tokens"] > 0:
            tokens = min(tokens, body["max_tokens"])  # as a real server: a title asks for 32 at most

        def token(i: int) -> str:
            text = f"tk{i} "
            return text if len(text) >= size else f"tk{i}" + "x" * (size - len(text)) + " "

        writer.write(_HEAD + _frame({"role": "assistant", "content": ""}))
        if delay <= 0:
            parts = [_frame({"content": token(i)}) for i in range(tokens)]
            for start in range(0, len(parts), 512):
                writer.write(b"".join(parts[start : start + 512]))
                await writer.drain()
        else:
            await writer.drain()
            loop = asyncio.get_running_loop()
            start = loop.time()
            for i in range(tokens):
                # on an absolute schedule: sleep overshoot must not add up differently per stream
                await asyncio.sleep(max(0.0, start + (i + 1) * delay - loop.time()))
                writer.write(_frame({"content": token(i)}))
                await writer.drain()
        writer.write(
            _frame({}, "stop")
            + _frame({}, usage={"prompt_tokens": 1, "completion_tokens": tokens, "total_tokens": tokens + 1})
            + _chunk(b"data: [DONE]\n\n")
            + b"0\r\n\r\n"
        )


async def serve(host: str, port: int, tokens: int, delay: float) -> None:
    """Listen until cancelled."""
    app = ModelServer(tokens, delay)
    server = await asyncio.start_server(app.handle, host, port, backlog=4096, limit=1 << 20)
    async with server:
        await server.serve_forever()


def raise_nofile() -> None:
    """Raise the open-files soft limit to the hard limit (thousands of streams)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def main() -> None:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)
    parser.add_argument("--tokens", type=int, default=200)
    parser.add_argument("--delay", type=float, default=0.0)
    args = parser.parse_args()
    raise_nofile()
    try:
        asyncio.run(serve(args.host, args.port, args.tokens, args.delay))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
