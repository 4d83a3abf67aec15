"""A loopback proxy that forwards everything and keeps a copy of both directions' bytes, with a
parser of what it saw: each HTTP/1.1 exchange's request (method, path, JSON body) and, for a
streamed answer, the JSON of every SSE ``data:`` line.

The real-server tests put it between Odysseus and llama-server, so that what the model server
really sent (``delta.content``, ``usage``, ``finish_reason``) is read off the wire, independently
of Odysseus's own parsing.
"""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Tuple

from loopproxy import Forward, LoopbackProxy


@dataclass
class Exchange:
    """One request and (as far as it got) its answer."""

    method: str
    path: str
    body: Any
    status: Optional[int] = None
    events: List[Any] = field(default_factory=list)  # parsed SSE data lines ("[DONE]" kept as a string)

    def text(self, key: str = "content") -> str:
        """The concatenated ``choices[0].delta[key]`` of a streamed chat completion."""
        parts = []
        for event in self.events:
            if isinstance(event, dict):
                for choice in event.get("choices") or []:
                    value = (choice.get("delta") or {}).get(key)
                    if isinstance(value, str):
                        parts.append(value)
        return "".join(parts)

    def usage(self) -> Optional[Dict[str, Any]]:
        """The last ``usage`` object the server streamed."""
        found = [e["usage"] for e in self.events if isinstance(e, dict) and e.get("usage")]
        return found[-1] if found else None

    def finish_reasons(self) -> List[str]:
        """Every non-null ``finish_reason`` the server sent."""
        return [
            choice["finish_reason"]
            for event in self.events
            if isinstance(event, dict)
            for choice in event.get("choices") or []
            if choice.get("finish_reason")
        ]


class Wiretap(LoopbackProxy):
    """Forward 127.0.0.1:<port> to 127.0.0.1:<target_port>, recording each connection's bytes."""

    def __init__(self, target_port: int):
        self.recorded: List[Tuple[bytearray, bytearray]] = []  # (request bytes, response bytes) per connection
        super().__init__(target_port)

    def forwarders(self, client: socket.socket, upstream: socket.socket) -> Tuple[Forward, Forward]:
        sent, received = bytearray(), bytearray()
        with self.lock:
            self.recorded.append((sent, received))

        def record(buffer: bytearray) -> Forward:
            def forward(src: socket.socket, dst: socket.socket, data: bytes) -> bool:
                buffer.extend(data)
                dst.sendall(data)
                return True

            return forward

        return record(sent), record(received)

    def exchanges(self, path_prefix: str = "/v1/chat/completions") -> List[Exchange]:
        """Every exchange seen so far whose path starts with ``path_prefix``, in connection order."""
        with self.lock:
            recorded = [(bytes(a), bytes(b)) for a, b in self.recorded]
        found: List[Exchange] = []
        for sent, received in recorded:
            requests = _requests(sent)
            answers = _responses(received)
            for index, (method, path, body) in enumerate(requests):
                exchange = Exchange(method, path, body)
                if index < len(answers):
                    exchange.status, exchange.events = answers[index]
                if path.startswith(path_prefix):
                    found.append(exchange)
        return found

    def forget(self) -> None:
        """Drop what was recorded (connections still open keep recording into fresh buffers)."""
        with self.lock:
            for sent, received in self.recorded:
                del sent[:]
                del received[:]


def _head(data: bytes, start: int) -> Tuple[Optional[str], Dict[str, str], int]:
    end = data.find(b"\r\n\r\n", start)
    if end < 0:
        return None, {}, len(data)
    lines = data[start:end].decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return lines[0], headers, end + 4


def _body(data: bytes, start: int, headers: Dict[str, str], response: bool) -> Tuple[bytes, int]:
    if headers.get("transfer-encoding", "").lower() == "chunked":
        out = bytearray()
        pos = start
        while True:
            line_end = data.find(b"\r\n", pos)
            if line_end < 0:
                return bytes(out), len(data)
            size = int(data[pos:line_end].split(b";")[0] or b"0", 16)
            pos = line_end + 2
            if size == 0:
                return bytes(out), pos + 2
            out += data[pos : pos + size]
            pos += size + 2
    length = int(headers.get("content-length", "0") or 0)
    if response and "content-length" not in headers:
        return data[start:], len(data)  # a response read to the end of the connection
    return data[start : start + length], start + length


def _messages(data: bytes, response: bool) -> Iterator[Tuple[str, Dict[str, str], bytes]]:
    """Each whole HTTP/1.1 message in one direction's bytes: (start line, headers, body)."""
    pos = 0
    while pos < len(data):
        line, headers, body_start = _head(data, pos)
        if line is None:
            return
        body, pos = _body(data, body_start, headers, response=response)
        yield line, headers, body


_NOT_JSON = object()


def _json(raw: Any, otherwise: Any) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return otherwise


def _requests(data: bytes) -> List[Tuple[str, str, Any]]:
    out = []
    for line, _, body in _messages(data, response=False):
        method, _, rest = line.partition(" ")
        out.append((method, rest.rsplit(" ", 1)[0], _json(body, body) if body else None))
    return out


def _responses(data: bytes) -> List[Tuple[int, List[Any]]]:
    out = []
    for line, headers, body in _messages(data, response=True):
        events: List[Any] = []
        if "text/event-stream" in headers.get("content-type", ""):
            for raw in body.split(b"\n"):
                if raw.startswith(b"data:"):
                    payload = raw[5:].strip().decode("utf-8", "replace")
                    events.append(_json(payload, payload))
        elif body:
            parsed = _json(body, _NOT_JSON)
            if parsed is not _NOT_JSON:
                events.append(parsed)
        out.append((int(line.split(" ")[1]), events))
    return out
