"""Provider transports read the proxy environment once (issue 22; llm/proxy_env.py since issue 39):
HTTP(S)_PROXY and NO_PROXY as they were when the transport was made are honoured, through a real forward
proxy on loopback, and nothing is read from the environment per request."""

from __future__ import annotations

import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from odysseus.llm.http import Timeouts, Transport
from odysseus.llm.proxy_env import NetworkEnv, Proxy, UnsupportedProxy, bypasses

PROXY_VARS = (
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in PROXY_VARS:
        monkeypatch.delenv(name, raising=False)


class _Server:
    """A loopback HTTP server answering every GET with JSON naming itself and the request target."""

    def __init__(self, name: str):
        seen = self.seen = []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's naming
                seen.append(self.path)
                body = json.dumps({"via": name, "target": self.path}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def servers():
    model, proxy = _Server("model"), _Server("proxy")
    yield model, proxy
    model.close()
    proxy.close()


def test_http_proxy_read_at_start_is_used_and_no_proxy_goes_direct(monkeypatch, servers):
    model, proxy = servers
    url = f"http://127.0.0.1:{model.port}/v1/models"
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
    through = Transport("t", Timeouts(connect=5, first_token=5, idle=5))
    assert through.get_json(url) == {"via": "proxy", "target": url}  # a forward proxy gets the absolute URL
    assert model.seen == []
    monkeypatch.setenv("NO_PROXY", f"localhost,127.0.0.1:{model.port}")
    direct = Transport("t", Timeouts(connect=5, first_token=5, idle=5))
    assert direct.get_json(url) == {"via": "model", "target": "/v1/models"}
    assert len(proxy.seen) == 1


def test_the_environment_is_read_once_not_per_request(monkeypatch, servers):
    model, proxy = servers
    url = f"http://127.0.0.1:{model.port}/v1/models"
    monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{proxy.port}")
    transport = Transport("t", Timeouts(connect=5, first_token=5, idle=5))
    monkeypatch.delenv("http_proxy")  # changed after the session was made: not seen
    reads = []
    real_get = os.environ.get

    def counting_get(key, default=None):
        reads.append(key)
        return real_get(key, default)

    monkeypatch.setattr(os.environ, "get", counting_get)
    for _ in range(3):
        assert transport.get_json(url)["via"] == "proxy"
    assert not [k for k in reads if "proxy" in k.lower() or k in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")], reads
    assert len(proxy.seen) == 3 and model.seen == []


def test_no_proxy_forms(monkeypatch):
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("NO_PROXY", "internal.example, 10.0.0.0/8 ,192.168.1.7,api.local:8443,fd00::/8")
    env = NetworkEnv()
    assert env.proxy_url("https://models.internal.example/v1") is None
    assert env.proxy_url("https://10.20.30.40/v1") is None
    assert env.proxy_url("https://192.168.1.7:11434/") is None
    assert env.proxy_url("https://api.local:8443/v1") is None
    assert env.proxy_url("https://[fd00::1]:8443/v1") is None
    assert env.proxy_url("https://api.local:9000/v1") == "http://127.0.0.1:9"
    assert env.proxy_url("https://api.openai.com/v1") == "http://127.0.0.1:9"
    assert env.proxy_url("http://api.openai.com/v1") is None  # HTTPS_PROXY is for https URLs
    assert not bypasses("https://evil-internal.example.com/", "internal.example")
    monkeypatch.setenv("NO_PROXY", "*")
    assert NetworkEnv().proxy_url("https://api.openai.com/v1") is None
    monkeypatch.delenv("NO_PROXY")
    monkeypatch.setenv("ALL_PROXY", "proxy.corp:3128")
    env = NetworkEnv()
    assert env.proxy_url("http://api.example/v1") == "proxy.corp:3128"
    assert env.proxy_for("http://api.example/v1") == Proxy("proxy.corp", 3128, None)  # a bare host:port is http


@pytest.mark.parametrize(
    "value, reason",
    [
        ("socks5://p:1080", "socks5"),
        ("https://p:443", "https"),
        ("http://:3128", "without a host"),
        ("http://p:x", "bad"),
    ],
)
def test_a_proxy_url_this_client_cannot_use_says_why(value, reason):
    with pytest.raises(UnsupportedProxy, match=reason):
        Proxy.parse(value)


def test_proxy_credentials_become_basic_authorization_and_stay_out_of_errors():
    assert Proxy.parse("http://a%40b:p%3Aw@proxy:8080") == Proxy("proxy", 8080, "Basic YUBiOnA6dw==")
    assert Proxy.parse("http://proxy").port == 80
    with pytest.raises(UnsupportedProxy) as info:
        Proxy.parse("http://user:hunter2@proxy:port")
    assert "hunter2" not in str(info.value)


def test_ca_bundle_from_the_environment_is_kept(monkeypatch, tmp_path):
    bundle = tmp_path / "ca.pem"
    bundle.write_text("")
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(bundle))
    env = NetworkEnv()
    assert env.ca_bundle == str(bundle) and env.proxy_url("https://api.example/v1") is None
    monkeypatch.delenv("REQUESTS_CA_BUNDLE")
    monkeypatch.setenv("CURL_CA_BUNDLE", str(tmp_path))
    assert NetworkEnv().ca_bundle == str(tmp_path)
