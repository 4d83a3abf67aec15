"""Provider connections: a stream that ended normally leaves its connection for the next turn,
and a pooled connection the server closed meanwhile is replaced without failing the turn."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from odysseus.cancel import CancelToken
from odysseus.config import DEFAULTS
from odysseus.llm.base import ChatRequest, ProviderConfig
from odysseus.llm.openai_compat import OpenAICompatProvider


class _KeepAlive(BaseHTTPRequestHandler):
    """OpenAI-style streaming over HTTP/1.1 keep-alive; records each request's client port."""

    protocol_version = "HTTP/1.1"
    ports: list = []
    trailing_delay = 0.0
    drop_second_request = False  # close a kept-alive connection when its 2nd request arrives

    def log_message(self, *args):
        pass

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.served = getattr(self, "served", 0) + 1
        if type(self).drop_second_request and self.served == 2:
            self.close_connection = True  # what a server's idle timeout looks like to the client
            return
        type(self).ports.append(self.client_address[1])
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for payload in (
            {"choices": [{"index": 0, "delta": {"content": "hi"}}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        ):
            self._chunk(f"data: {json.dumps(payload)}\n\n".encode())
        self._chunk(b"data: [DONE]\n\n")
        if type(self).trailing_delay:
            time.sleep(type(self).trailing_delay)
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


@pytest.fixture
def keepalive():
    _KeepAlive.ports = []
    _KeepAlive.trailing_delay = 0.0
    _KeepAlive.drop_second_request = False
    server = ThreadingHTTPServer(("127.0.0.1", 0), _KeepAlive)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def _provider(server) -> OpenAICompatProvider:
    cfg = ProviderConfig(
        name="local", kind="openai", base_url=f"http://127.0.0.1:{server.server_address[1]}/v1", models=["m"]
    )
    return OpenAICompatProvider(cfg, dict(DEFAULTS))


def _turn(provider) -> str:
    events = list(provider.stream(ChatRequest(model="m", messages=[{"role": "user", "content": "x"}]), CancelToken()))
    return "".join(e.data["delta"] for e in events if e.type == "delta")


def test_a_finished_stream_leaves_its_connection_for_the_next_turn(keepalive):
    provider = _provider(keepalive)
    assert [_turn(provider) for _ in range(3)] == ["hi"] * 3
    assert len(_KeepAlive.ports) == 3 and len(set(_KeepAlive.ports)) == 1


def test_a_body_that_does_not_end_promptly_is_closed_not_reused(keepalive):
    _KeepAlive.trailing_delay = 10.0  # far past DRAIN_SECONDS (0.25 s): the turn must not wait for it
    provider = _provider(keepalive)
    started = time.monotonic()
    assert _turn(provider) == "hi"
    # the time is the property: the turn ends after the short drain, not when the body would end (10 s);
    # the bound is generous for a loaded machine
    assert time.monotonic() - started < 5.0
    _KeepAlive.trailing_delay = 0.0
    assert _turn(provider) == "hi"
    assert len(set(_KeepAlive.ports)) == 2


def test_a_pooled_connection_closed_by_the_server_is_replaced(keepalive):
    _KeepAlive.drop_second_request = True
    provider = _provider(keepalive)
    assert [_turn(provider) for _ in range(2)] == ["hi", "hi"]
    assert len(_KeepAlive.ports) == 2 and len(set(_KeepAlive.ports)) == 2  # the second on a new connection
