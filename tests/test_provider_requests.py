"""What a provider request carries and where it goes (llm/http.py, issue 39: the one HTTP path): the same head in
a fixed order, proxies and NO_PROXY as read when the transport was made (a forwarding proxy for http, a real
CONNECT tunnel for https with a self-signed certificate from the CA bundle), cookies kept, redirects followed
without handing the key to another host. Against real loopback HTTP servers and a tunnelling proxy."""

from __future__ import annotations

import base64
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from odysseus.cancel import Cancelled, CancelToken
from odysseus.errors import ProviderHTTPError, ProviderNetworkError, ProviderTimeout
from odysseus.llm.http import Timeouts, Transport
from tlscert import self_signed, server_context
from tunnelproxy import TunnelProxy
from waiting import wait_for

ENV_VARS = ("http_proxy", "https_proxy", "all_proxy", "no_proxy", "requests_ca_bundle", "curl_ca_bundle")
ENV_VARS += tuple(name.upper() for name in ENV_VARS)
TIMEOUTS = Timeouts(connect=5, first_token=5, idle=5)
BODY = {"model": "m", "stream": True, "messages": [{"role": "user", "content": 'héllo \u2028 "quoted"'}]}


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)


class Recorder:
    """A loopback server recording each request (method, target, header lines in order, body); answers JSON.

    ``/redirect`` answers 307 to ``/v1/chat``, ``/see-other`` 303 to ``/v1/chat``, ``/loop`` 302 to itself,
    ``/elsewhere?to=URL`` 307 to that URL, ``/cookie`` sets a cookie, ``/slow`` says nothing for 30 s,
    ``/missing`` is a 404. With ``tls`` (a server context) it speaks HTTPS.
    """

    def __init__(self, name: str, tls=None):
        seen = self.seen = []
        redirects = {
            "/v1/redirect": (307, "/v1/chat"),
            "/v1/see-other": (303, "/v1/chat"),
            "/v1/loop": (302, "/v1/loop"),
        }

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):  # noqa: N802 - http.server's naming
                self.do_POST()

            def do_POST(self):  # noqa: N802 - http.server's naming
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                seen.append((self.command, self.path, list(self.headers.items()), body))
                path = self.path.split("?")[0]
                if path in redirects or path == "/v1/elsewhere":
                    status, where = redirects.get(path) or (307, self.path.split("?to=", 1)[1])
                    self.send_response(status)
                    self.send_header("Location", where)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if path == "/v1/slow":
                    time.sleep(30)
                    return
                reply = json.dumps({"via": name, "method": self.command, "target": self.path}).encode()
                self.send_response(404 if path == "/v1/missing" else 200)
                if path == "/v1/cookie":
                    self.send_header("Set-Cookie", "sticky=abc; Path=/")
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        if tls is not None:
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
        self.scheme = "https" if tls is not None else "http"
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"{self.scheme}://{host}:{self.port}{path}"

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


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    return self_signed(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def tls_model(certificate):
    server = Recorder("tls model", tls=server_context(*certificate))
    yield server
    server.close()


@pytest.fixture
def tunnel():
    server = TunnelProxy()
    yield server
    server.close()


def read(transport: Transport, url: str, body: dict = BODY):
    """The JSON answer of one POST, and the stream's redirect history."""
    stream = transport.open(url, body, CancelToken())
    try:
        answer = json.loads(b"".join(stream.chunks()))
        stream.finish()
        return answer, stream.history
    finally:
        stream.close()


def test_every_post_sends_the_same_head_in_a_fixed_order(model):
    transport = Transport(
        "t", TIMEOUTS, {"Authorization": "Bearer sk-test", "X-Extra": "1", "accept": "text/event-stream"}
    )
    url = model.url("/v1/chat/completions")
    assert read(transport, url)[0] == {"via": "model", "method": "POST", "target": "/v1/chat/completions"}
    assert read(transport, url)[0]["via"] == "model"
    (method, path, headers, body), second = model.seen
    assert second == (method, path, headers, body)
    assert json.loads(body) == BODY and body == json.dumps(BODY).encode()  # ASCII JSON, as requests sent it
    assert headers == [
        ("Host", f"127.0.0.1:{model.port}"),
        ("User-Agent", "odysseus/0.1.0"),
        ("Accept-Encoding", "gzip, deflate"),
        ("accept", "text/event-stream"),  # a configured header replaces the default in its place
        ("Connection", "keep-alive"),
        ("Authorization", "Bearer sk-test"),
        ("X-Extra", "1"),
        ("Content-Type", "application/json"),
        ("Content-Length", str(len(body))),
    ]


def test_a_post_goes_through_the_proxy_read_at_start_and_no_proxy_goes_direct(monkeypatch, model, proxy):
    url = model.url("/v1/chat/completions")
    monkeypatch.setenv("HTTP_PROXY", f"http://us%40r:p%3Ass@127.0.0.1:{proxy.port}")
    through = Transport("t", TIMEOUTS)
    monkeypatch.delenv("HTTP_PROXY")  # changed after the transport was made: not seen
    assert read(through, url)[0] == {"via": "proxy", "method": "POST", "target": url}  # the absolute URL
    assert read(through, url)[0]["via"] == "proxy"
    assert model.seen == []
    credentials = "Basic " + base64.b64encode(b"us@r:p:ss").decode()
    assert ("Proxy-Authorization", credentials) in proxy.seen[0][2]
    assert ("Host", f"127.0.0.1:{model.port}") in proxy.seen[0][2]
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
    monkeypatch.setenv("NO_PROXY", f"localhost,127.0.0.1:{model.port}")
    direct = Transport("t", TIMEOUTS)
    assert read(direct, url)[0] == {"via": "model", "method": "POST", "target": "/v1/chat/completions"}
    assert len(proxy.seen) == 2 and len(model.seen) == 1
    assert not [h for h in model.seen[0][2] if h[0].startswith("Proxy")]


def test_https_goes_through_a_connect_tunnel_and_trusts_the_ca_bundle(monkeypatch, certificate, tls_model, tunnel):
    monkeypatch.setenv("HTTPS_PROXY", tunnel.url)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(certificate[0]))
    transport = Transport("t", TIMEOUTS, {"Authorization": "Bearer sk-tunnelled"})
    url = tls_model.url("/v1/chat/completions")
    try:
        for _ in range(3):
            assert read(transport, url)[0] == {"via": "tls model", "method": "POST", "target": "/v1/chat/completions"}
        assert tunnel.tunnels == 1  # the tunnel's TLS connection is kept alive and reused
        line, headers = tunnel.requests[0]
        assert line == f"CONNECT 127.0.0.1:{tls_model.port} HTTP/1.1"
        assert not [h for h in headers if "sk-tunnelled" in h]  # the key travels inside TLS only
        assert transport.get_json(tls_model.url("/v1/models"))["method"] == "GET"
    finally:
        transport.close()
    wait_for(lambda: tunnel.open_tunnels == 0, what="the closed connection's tunnel to end")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    direct = Transport("t", TIMEOUTS)
    assert read(direct, url)[0]["via"] == "tls model"
    assert tunnel.tunnels == 1


def test_a_proxy_asking_for_credentials_gets_them_and_a_refusal_is_a_provider_error(
    monkeypatch, certificate, tls_model
):
    secret = "Basic " + base64.b64encode(b"me:pw").decode()
    tunnel = TunnelProxy(authorization=secret)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(certificate[0]))
    url = tls_model.url("/v1/chat/completions")
    try:
        monkeypatch.setenv("HTTPS_PROXY", tunnel.url)
        with pytest.raises(ProviderNetworkError, match="Proxy error for provider t: .*HTTP 407"):
            Transport("t", TIMEOUTS).open(url, BODY, CancelToken())
        monkeypatch.setenv("HTTPS_PROXY", f"http://me:pw@127.0.0.1:{tunnel.port}")
        assert read(Transport("t", TIMEOUTS), url)[0]["via"] == "tls model"
        tunnel.refuse = True
        with pytest.raises(ProviderNetworkError, match="HTTP 403"):
            Transport("t", TIMEOUTS).open(url, BODY, CancelToken())
        assert len(tls_model.seen) == 1
    finally:
        tunnel.close()


@pytest.mark.parametrize("value", ["socks5://127.0.0.1:9", "https://127.0.0.1:9", "http://:9"])
def test_a_proxy_this_client_cannot_use_is_a_clear_error(monkeypatch, value):
    monkeypatch.setenv("HTTPS_PROXY", value)
    with pytest.raises(ProviderNetworkError, match="Proxy error for provider t"):
        Transport("t", TIMEOUTS).open("https://api.example/v1/chat/completions", BODY, CancelToken())


def test_a_stop_while_the_model_thinks_behind_a_tunnel_closes_the_tunnel(monkeypatch, certificate, tls_model, tunnel):
    monkeypatch.setenv("HTTPS_PROXY", tunnel.url)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(certificate[0]))
    transport = Transport("t", Timeouts(connect=5, first_token=30, idle=30))
    token = CancelToken()
    stopped = []
    threading.Timer(0.3, lambda: stopped.append(time.monotonic()) or token.cancel("stopped")).start()
    with pytest.raises(Cancelled):
        transport.open(tls_model.url("/v1/slow"), BODY, token)
    assert time.monotonic() - stopped[0] < 3.0  # the request ended with the stop (the model stays silent 30 s)
    wait_for(lambda: tunnel.tunnels == 1 and tunnel.open_tunnels == 0, timeout=5, what="the tunnel to close")
    assert time.monotonic() - stopped[0] < 1.0  # the proxy (and so the model) saw the disconnect at once


def test_a_proxy_that_never_answers_connect_times_out_or_is_stopped(monkeypatch, tunnel):
    monkeypatch.setenv("HTTPS_PROXY", tunnel.url)
    tunnel.silent = True
    url = "https://api.example/v1/chat/completions"  # never reached: the tunnel is not opened
    began = time.monotonic()
    with pytest.raises(ProviderTimeout, match="Connect timeout"):
        Transport("t", Timeouts(connect=0.5, first_token=30, idle=30)).open(url, BODY, CancelToken())
    assert time.monotonic() - began < 3.0
    token = CancelToken()
    stopped = []
    threading.Timer(0.3, lambda: stopped.append(time.monotonic()) or token.cancel("stopped")).start()
    with pytest.raises(Cancelled):
        Transport("t", Timeouts(connect=30, first_token=30, idle=30)).open(url, BODY, token)
    wait_for(lambda: len(tunnel.hung_up) == 2, timeout=5, what="the proxy to see the stopped connection close")
    assert tunnel.hung_up[1] - stopped[0] < 1.0


def test_cookies_a_provider_sets_are_sent_back_and_a_307_sends_the_same_body(model):
    transport = Transport("t", TIMEOUTS)
    assert read(transport, model.url("/v1/cookie"))[0]["target"] == "/v1/cookie"
    assert read(transport, model.url("/v1/chat"))[0]["target"] == "/v1/chat"
    assert ("Cookie", "sticky=abc") in model.seen[1][2]
    assert not [h for h in model.seen[0][2] if h[0] == "Cookie"]
    answer, history = read(transport, model.url("/v1/redirect"))
    assert answer == {"via": "model", "method": "POST", "target": "/v1/chat"} and history == [307]
    assert [s[1] for s in model.seen[2:]] == ["/v1/redirect", "/v1/chat"]
    assert model.seen[3][3] == model.seen[2][3]  # a 307 re-sends the same body


def test_a_303_asks_again_with_get_and_no_body(model):
    answer, history = read(Transport("t", TIMEOUTS), model.url("/v1/see-other"))
    assert answer == {"via": "model", "method": "GET", "target": "/v1/chat"} and history == [303]
    method, _path, headers, body = model.seen[1]
    assert body == b"" and not [h for h in headers if h[0] in ("Content-Type", "Content-Length")]


def test_a_redirect_to_another_host_does_not_carry_the_key(model):
    transport = Transport("t", TIMEOUTS, {"Authorization": "Bearer sk-mine", "x-api-key": "sk-mine"})
    elsewhere = model.url("/v1/chat", host="localhost")
    answer, history = read(transport, model.url(f"/v1/elsewhere?to={elsewhere}"))
    assert answer["target"] == "/v1/chat" and history == [307]
    first, second = model.seen
    assert ("Authorization", "Bearer sk-mine") in first[2] and ("x-api-key", "sk-mine") in first[2]
    assert not [h for h in second[2] if "sk-mine" in h[1]]
    assert ("Host", f"localhost:{model.port}") in second[2] and second[3] == first[3]
    read(transport, model.url(f"/v1/elsewhere?to={model.url('/v1/chat')}"))  # same origin: the key goes along
    assert ("Authorization", "Bearer sk-mine") in model.seen[-1][2]


def test_a_redirect_loop_ends_as_a_provider_error(model):
    with pytest.raises(ProviderNetworkError, match="Too many redirects"):
        Transport("t", TIMEOUTS).open(model.url("/v1/loop"), BODY, CancelToken())
    assert len(model.seen) == 31 and {s[0] for s in model.seen[1:]} == {"GET"}


def test_credentials_in_the_url_are_sent_as_basic_authorization(model):
    url = f"http://user:s%3Acret@127.0.0.1:{model.port}/v1/chat"
    assert read(Transport("t", TIMEOUTS, {"Authorization": "Bearer replaced"}), url)[0]["target"] == "/v1/chat"
    headers = model.seen[0][2]
    assert ("Authorization", "Basic " + base64.b64encode(b"user:s:cret").decode()) in headers
    assert not [h for h in headers if h[1] == "Bearer replaced"] and ("Host", f"127.0.0.1:{model.port}") in headers


def test_fetch_json_gets_or_posts_a_small_document_and_maps_an_error_status(model):
    transport = Transport("t", TIMEOUTS, {"Authorization": "Bearer sk-x"})
    assert transport.get_json(model.url("/v1/models")) == {"via": "model", "method": "GET", "target": "/v1/models"}
    assert transport.fetch_json(model.url("/api/show"), {"model": "m"})["method"] == "POST"
    assert json.loads(model.seen[1][3]) == {"model": "m"}
    assert ("Authorization", "Bearer sk-x") in model.seen[0][2] and ("Content-Length", "0") not in model.seen[0][2]
    with pytest.raises(ProviderHTTPError) as info:
        transport.get_json(model.url("/v1/missing"))
    assert info.value.status == 404
