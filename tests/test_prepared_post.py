"""A provider's streaming POST through ``PostPlan`` (issue 22) is the request ``Session.post`` sends: the same
bytes on the wire, proxies and NO_PROXY as read when the session was made, cookies kept, redirects followed.
Against real loopback HTTP servers (a model and a forward proxy)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from odysseus.cancel import CancelToken
from odysseus.llm.http import Timeouts, Transport
from odysseus.llm.prepared_post import PostPlan, plan_for

PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")
PROXY_VARS += tuple(name.upper() for name in PROXY_VARS)
TIMEOUTS = Timeouts(connect=5, first_token=5, idle=5)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in PROXY_VARS:
        monkeypatch.delenv(name, raising=False)


class Recorder:
    """A loopback server recording each POST (target, header lines in order, body); answers a small stream.

    ``/redirect`` answers 307 to ``/v1/chat``; ``/cookie`` sets a cookie.
    """

    def __init__(self, name: str):
        seen = self.seen = []

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):  # noqa: N802 - http.server's naming
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                seen.append((self.path, list(self.headers.items()), body))
                if self.path.endswith("/redirect"):
                    self.send_response(307)
                    self.send_header("Location", "/v1/chat")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                reply = json.dumps({"via": name, "target": self.path}).encode()
                self.send_response(200)
                if self.path.endswith("/cookie"):
                    self.send_header("Set-Cookie", "sticky=abc; Path=/")
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def model():
    server = Recorder("model")
    yield server
    server.close()


@pytest.fixture
def proxy():
    server = Recorder("proxy")
    yield server
    server.close()


BODY = {"model": "m", "stream": True, "messages": [{"role": "user", "content": 'héllo \u2028 "quoted"'}]}


def read(transport: Transport, url: str) -> dict:
    stream = transport.open(url, BODY, CancelToken())
    try:
        return json.loads(b"".join(stream.chunks()))
    finally:
        stream.close()


def test_the_planned_post_sends_the_bytes_session_post_sends(model):
    transport = Transport("t", TIMEOUTS, {"Authorization": "Bearer sk-test", "X-Extra": "1"})
    url = model.url("/v1/chat/completions")
    slow = transport.session.post(url, json=BODY, headers=dict(transport.headers), stream=True, timeout=(5, 5))
    assert slow.json()["via"] == "model"
    slow.close()
    assert read(transport, url) == {"via": "model", "target": "/v1/chat/completions"}
    assert read(transport, url)["via"] == "model"  # the plan, reused
    assert isinstance(transport._plans[url], PostPlan) and len(transport._plans) == 1
    (path1, headers1, body1), (path2, headers2, body2), third = model.seen
    assert (path2, headers2, body2) == (path1, headers1, body1) == third
    assert json.loads(body2) == BODY


def test_a_post_goes_through_the_proxy_read_at_start_and_no_proxy_goes_direct(monkeypatch, model, proxy):
    url = model.url("/v1/chat/completions")
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
    through = Transport("t", TIMEOUTS)
    monkeypatch.delenv("HTTP_PROXY")  # changed after the session was made: not seen
    assert read(through, url) == {"via": "proxy", "target": url}  # a forward proxy gets the absolute URL
    assert read(through, url)["via"] == "proxy"
    assert model.seen == []
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
    monkeypatch.setenv("NO_PROXY", f"localhost,127.0.0.1:{model.port}")
    direct = Transport("t", TIMEOUTS)
    assert read(direct, url) == {"via": "model", "target": "/v1/chat/completions"}
    assert len(proxy.seen) == 2 and len(model.seen) == 1


def test_cookies_a_provider_sets_are_sent_back_and_redirects_are_followed(model):
    transport = Transport("t", TIMEOUTS)
    assert read(transport, model.url("/v1/cookie"))["target"] == "/v1/cookie"
    assert read(transport, model.url("/v1/chat"))["target"] == "/v1/chat"
    assert ("Cookie", "sticky=abc") in model.seen[1][1]
    assert not [h for h in model.seen[0][1] if h[0] == "Cookie"]
    stream = transport.open(model.url("/v1/redirect"), BODY, CancelToken())
    try:
        assert json.loads(b"".join(stream.chunks()))["target"] == "/v1/chat"
        assert [r.status_code for r in stream.response.history] == [307]
    finally:
        stream.close()
    assert [s[0] for s in model.seen[2:]] == ["/v1/redirect", "/v1/chat"]
    assert model.seen[3][2] == model.seen[2][2]  # a 307 re-sends the same body


def test_a_session_with_auth_or_hooks_takes_the_full_path(model):
    transport = Transport("t", TIMEOUTS)
    transport.session.hooks["response"].append(lambda r, **kw: r)
    assert plan_for({}, transport.session, model.url("/v1/chat"), {}) is None
    assert read(transport, model.url("/v1/chat"))["via"] == "model"
    assert transport._plans == {}
    other = Transport("t", TIMEOUTS)
    other.session.auth = ("user", "secret")
    assert read(other, model.url("/v1/chat"))["via"] == "model"
    assert other._plans == {} and ("Authorization", "Basic dXNlcjpzZWNyZXQ=") in model.seen[-1][1]
