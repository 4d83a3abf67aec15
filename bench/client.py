"""The benchmark load client: one HTTP/1.1 request per connection over asyncio raw sockets.

The same code measures the direct path (the model server) and the app path, so the
comparison is fair. It does not parse SSE: it times the first body byte, the first
byte that carries a token (the marker ``"tk``; tokens are ``tk<i> `` on both paths),
the last byte (the server closes the connection), the largest silence between two
reads once the body started (heartbeat punctuality), the first SSE ``id:`` line,
and counts markers, heartbeats and ``[DONE]``.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional

MARKER = b'"tk'  # a token's JSON string starts with it on both paths; ids never do


@dataclass
class Result:
    """What one request measured (seconds from the moment the connection was opened)."""

    status: int = 0
    headers: Dict[str, str] = field(default_factory=dict)
    first_byte: Optional[float] = None
    first_token: Optional[float] = None
    first_event: Optional[float] = None
    total: Optional[float] = None
    tokens: int = 0
    size: int = 0
    max_gap: float = 0.0
    max_gap_at: Optional[float] = None  # when the largest silence ended (s from the start)
    heartbeats: int = 0
    dones: int = 0
    error: Optional[str] = None
    body: bytes = b""


async def request(
    host: str,
    port: int,
    method: str,
    path: str,
    body: Optional[dict] = None,
    headers: Optional[Dict[str, str]] = None,
    keep_body: bool = False,
    timeout: float = 120.0,
    started: Optional[float] = None,
    on_headers: Optional[Callable[[Result], None]] = None,
    gaps: Optional[List[float]] = None,
) -> Result:
    """Send one request and read the whole response; never raises (errors land in ``error``).

    ``on_headers`` is called once the response headers are in (to start followers). ``gaps``, when
    given, receives the silence before every read that carried a token, after the first token.
    """
    result = Result()
    t0 = started if started is not None else time.perf_counter()
    payload = json.dumps(body).encode() if body is not None else b""
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}:{port}", "Connection: close", "Accept: */*"]
    if body is not None:
        lines += ["Content-Type: application/json", f"Content-Length: {len(payload)}"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    writer = None
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port, limit=1 << 20), timeout)
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + payload)
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        result.status = int(status_line.split(" ")[1])
        result.headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in header_lines if h)}
        if on_headers is not None:
            on_headers(result)
        kept: List[bytes] = []
        tail = b""
        last = None
        last_token: Optional[float] = None
        loop_deadline = time.perf_counter() + timeout
        while True:
            data = await asyncio.wait_for(reader.read(1 << 16), max(0.1, loop_deadline - time.perf_counter()))
            now = time.perf_counter()
            if not data:
                break
            if result.first_byte is None:
                result.first_byte = now - t0
            elif now - last > result.max_gap:
                result.max_gap = now - last
                result.max_gap_at = now - t0
            last = now
            window = tail + data
            found = window.count(MARKER)
            if found and result.first_token is None:
                result.first_token = now - t0
            elif found and gaps is not None and last_token is not None:
                gaps.append(now - last_token)
            if found:
                last_token = now
            result.tokens += found
            result.heartbeats += data.count(b": heartbeat")
            result.dones += data.count(b"data: [DONE]")
            if result.first_event is None and b"id: " in window:
                result.first_event = now - t0
            tail = data[-(len(MARKER) - 1) :]
            result.size += len(data)
            if keep_body:
                kept.append(data)
        result.total = time.perf_counter() - t0
        result.body = b"".join(kept)
    except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError, IndexError) as exc:
        result.error = f"{type(exc).__name__}: {exc}"
    finally:
        if writer is not None:
            writer.close()
    return result


def ids_in(body: bytes) -> List[int]:
    """The SSE ``id:`` values in a raw (chunked) response body, in order."""
    out = []
    for line in body.split(b"\n"):
        if line.startswith(b"id: "):
            try:
                out.append(int(line[4:].strip()))
            except ValueError:
                pass
    return out
