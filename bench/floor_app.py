"""The floor of the chosen stack: a bare Flask app doing a chat turn's unavoidable work, nothing else.

Served by gunicorn's gevent worker exactly like the app (``bench.stack_floor`` starts it). Two modes,
chosen by ``FLOOR_MODE``:

- ``bare``: ``POST /api/chat_stream`` parses the JSON body and streams two SSE frames. What gunicorn,
  Flask and one streamed response cost, with no storage and no model.
- ``turn`` (the default): what any chat server must do for one turn, in the cheapest form we know:
  one write transaction before the first byte (session, user message, run row), the provider request
  on a kept-alive raw socket from a greenlet, its SSE tokens re-framed as SSE with ids, and one write
  transaction at the end (the reply, the run's status). No accounts, no history, no durable event
  log, no resume, no context window, no metrics: everything Odysseus does on top is above this line.

This is a measuring stick, not a server: no input checks, no errors handled beyond ending the stream.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import sqlite3
import tempfile
import time
from typing import Iterator, List, Optional

import gevent
from flask import Flask, Response, request
from gevent.queue import Queue

MODE = os.environ.get("FLOOR_MODE", "turn")
MODEL = os.environ.get("FLOOR_MODEL", "127.0.0.1:8001")
LAST_CHUNK = b"\r\n0\r\n\r\n"  # a chunked body's end (the model server's replies are chunked)
DB_PATH = os.path.join(os.environ.get("FLOOR_DATA_DIR") or tempfile.mkdtemp(prefix="odysseus-floor-"), "floor.db")

SCHEMA = """
create table if not exists sessions (id text primary key, created_at float);
create table if not exists messages (
    id integer primary key, session_id text, role text, content text, created_at float);
create table if not exists runs (
    id text primary key, session_id text, status text, created_at float, finished_at float);
"""

app = Flask(__name__)
_db: Optional[sqlite3.Connection] = None
_idle_sockets: List[socket.socket] = []


def db() -> sqlite3.Connection:
    """The worker's one connection (WAL, NORMAL sync: the app's pragmas), made on first use."""
    global _db
    if _db is None:
        _db = sqlite3.connect(DB_PATH, isolation_level=None, check_same_thread=False)
        _db.execute("PRAGMA journal_mode=WAL")
        _db.execute("PRAGMA synchronous=NORMAL")
        _db.executescript(SCHEMA)
    return _db


def write(statements: List[tuple]) -> None:
    """One write transaction."""
    conn = db()
    conn.execute("BEGIN IMMEDIATE")
    for sql, params in statements:
        conn.execute(sql, params)
    conn.execute("COMMIT")


def frame(event_id: int, payload: dict) -> str:
    """One SSE frame with its id."""
    return f"id: {event_id}\ndata: {json.dumps(payload)}\n\n"


def provider_tokens(message: str) -> Iterator[str]:
    """The model's streamed tokens, over a kept-alive socket (chunked SSE read until its last chunk)."""
    body = json.dumps({"model": "bench", "stream": True, "messages": [{"role": "user", "content": message}]}).encode()
    host, port = MODEL.rsplit(":", 1)
    sock = _idle_sockets.pop() if _idle_sockets else socket.create_connection((host, int(port)))
    sock.sendall(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (MODEL.encode(), len(body), body)
    )
    buffer = tail = b""
    while True:
        data = sock.recv(65536)
        if not data:
            sock.close()
            return
        buffer += data
        # the last chunk's marker, possibly spanning two reads
        ended = LAST_CHUNK in data or LAST_CHUNK in tail + data[:6]
        tail = data[-6:] if len(data) >= 6 else (tail + data)[-6:]
        *lines, buffer = buffer.split(b"\n")
        for line in lines:  # chunk-size lines are hex digits, never "data: "
            if line.startswith(b"data: {"):
                for choice in json.loads(line[6:]).get("choices") or ():  # the usage chunk has none
                    content = (choice.get("delta") or {}).get("content")
                    if content:
                        yield content
        if ended:
            _idle_sockets.append(sock)
            return


def drive(run_id: str, session_id: str, message: str, out: Queue) -> None:
    """The run's greenlet: stream the model's tokens to ``out``, then save the reply."""
    parts: List[str] = []
    event_id = 1
    for content in provider_tokens(message):
        event_id += 1
        parts.append(content)
        out.put(frame(event_id, {"delta": content}))
    now = time.time()
    write(
        [
            (
                "insert into messages (session_id, role, content, created_at) values (?, ?, ?, ?)",
                (session_id, "assistant", "".join(parts), now),
            ),
            ("update runs set status = 'done', finished_at = ? where id = ?", (now, run_id)),
        ]
    )
    out.put(frame(event_id + 1, {"type": "chat_terminal", "data": {"status": "done", "run_id": run_id}}))
    out.put("data: [DONE]\n\n")
    out.put(None)


@app.get("/api/health")
def health() -> dict:
    """For the launcher's readiness check."""
    return {"status": "ok", "mode": MODE}


@app.post("/api/chat_stream")
def chat_stream() -> Response:
    """One turn in the selected mode."""
    message = (request.get_json() or {}).get("message", "")
    if MODE == "bare":
        frames = [": connected\n\n", frame(1, {"delta": message[:8]}), "data: [DONE]\n\n"]
        return Response(iter(frames), mimetype="text/event-stream")
    session_id, run_id, now = "s_" + secrets.token_urlsafe(16), "run_" + secrets.token_urlsafe(16), time.time()
    write(
        [
            ("insert into sessions (id, created_at) values (?, ?)", (session_id, now)),
            (
                "insert into messages (session_id, role, content, created_at) values (?, ?, ?, ?)",
                (session_id, "user", message, now),
            ),
            (
                "insert into runs (id, session_id, status, created_at) values (?, ?, 'running', ?)",
                (run_id, session_id, now),
            ),
        ]
    )
    out: Queue = Queue()
    gevent.spawn(drive, run_id, session_id, message, out)

    def stream() -> Iterator[str]:
        yield ": connected\n\n"
        while (item := out.get()) is not None:
            yield item

    return Response(stream(), mimetype="text/event-stream", headers={"Cache-Control": "no-cache"})
