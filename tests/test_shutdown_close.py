"""On SIGTERM a finished stream closes at once and the worker exits when its runs are done (issue 38, item 8).

gevent's pywsgi keeps an HTTP/1.1 connection open after a response for the client's next request,
and gunicorn's graceful shutdown waits for every open connection: a reply that had sent its
``[DONE]`` kept its client (one reading to EOF) and the worker for the whole graceful timeout
(SHUTDOWN_GRACE + margin, 30 s by default). These tests read raw sockets to EOF.
"""

from __future__ import annotations

import json
import signal
import socket
import threading
import time

import pytest
from liveserver import LiveServer
from waiting import wait_for

pytestmark = pytest.mark.slow

GRACE = {"ODYSSEUS_SHUTDOWN_GRACE": "20", "ODYSSEUS_GRACEFUL_MARGIN": "10", "ODYSSEUS_DEMO_TOKEN_DELAY": "0.02"}


class RawStream(threading.Thread):
    """One keep-alive HTTP/1.1 request on a raw socket, read to EOF; notes when ``[DONE]`` and EOF came."""

    def __init__(self, port: int, message: str):
        super().__init__(daemon=True)
        body = json.dumps({"message": message, "mode": "chat"}).encode()
        self.request = (
            b"POST /api/chat_stream HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\nConnection: keep-alive\r\n\r\n" % (port, len(body))
        ) + body
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.data = b""
        self.done_at = None
        self.eof_at = None

    def run(self) -> None:
        self.sock.sendall(self.request)
        self.sock.settimeout(60)
        while True:
            chunk = self.sock.recv(65536)
            if not chunk:
                self.eof_at = time.monotonic()
                return
            self.data += chunk
            if self.done_at is None and b"data: [DONE]" in self.data:
                self.done_at = time.monotonic()


def _whole_response(sock: socket.socket) -> bytes:
    """One response with a Content-Length, read whole (its head and body may come in separate packets)."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(
        next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
    )
    while len(body) < length:
        body += sock.recv(65536)
    return data


def test_a_finished_stream_closes_and_the_worker_exits_without_waiting_out_the_grace(tmp_path):
    server = LiveServer(str(tmp_path / "term"), GRACE).start()
    try:
        # an idle keep-alive connection (one request served, the client keeps it for the next one)
        idle = socket.create_connection(("127.0.0.1", server.port))
        idle.sendall(b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert b"200" in _whole_response(idle).split(b"\r\n", 1)[0]
        stream = RawStream(server.port, "a reply that ends during the shutdown")
        stream.start()
        wait_for(lambda: b"delta" in stream.data, 15, what="the reply streaming")
        signalled = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        stream.join(40)
        assert stream.done_at is not None, stream.data[-300:]
        # the response ends with the run: EOF right after [DONE], not at the graceful timeout
        assert stream.eof_at is not None and stream.eof_at - stream.done_at < 2.0, (stream.done_at, stream.eof_at)
        idle.settimeout(5)
        assert idle.recv(65536) == b""  # the idle connection was closed, not left for the timeout
        server.proc.wait(10)
        exited = time.monotonic()
        assert exited - stream.done_at < 5.0, exited - signalled
        # a clean shutdown is a quiet one: no "Exception ignored ... TypeError: 'NoneType' object is not
        # callable" from gevent's get_ident in logging's teardown (issue 37)
        assert "Exception ignored" not in server.logs() and "Traceback" not in server.logs(), server.logs()
    finally:
        server.stop()
