"""web_search (SearXNG JSON, DuckDuckGo HTML) and fetch_url against local HTTP servers; SSRF refusals."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, quote, urlparse

import pytest
import requests

from odysseus.cancel import CancelToken
from odysseus.tools import build_registry
from odysseus.tools.registry import ToolContext, ToolError
from odysseus.tools.web import _Guard, check_url, fetch_url, guarded_session, web_search

PAGE = """<!doctype html><html><head><title>Test  Page</title><style>.x{color:red}</style>
<script>var secret = 1;</script></head><body><nav>Home | About</nav>
<h1>Odysseus</h1><p>The long way <b>home</b>.</p><ul><li>Ithaca</li><li>Troy</li></ul>
<footer>copyright</footer></body></html>"""

DDG = """<html><body><div class="result"><h2><a class="result__a" href="//duckduckgo.com/l/?uddg={u1}&amp;rut=x">
First <b>result</b></a></h2><a class="result__snippet" href="#">Snippet <b>one</b></a></div>
<div class="result"><a class="result__a" href="https://example.org/two">Second</a>
<div class="result__snippet">Snippet two</div></div></body></html>"""


class Handler(BaseHTTPRequestHandler):
    requests_seen: list = []

    def log_message(self, *args):
        pass

    def _send(self, status, body, ctype="text/html; charset=utf-8", headers=None):
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        url = urlparse(self.path)
        Handler.requests_seen.append(("GET", self.path))
        if url.path == "/search":
            q = parse_qs(url.query)
            if q.get("format") != ["json"]:
                return self._send(403, "format not allowed")
            results = [
                {"title": f"About {q['q'][0]}", "url": "https://example.com/a", "content": "alpha"},
                {"title": "dup", "url": "https://example.com/a", "content": "dup"},
                {"title": "B", "url": "https://example.com/b", "content": "beta"},
            ]
            return self._send(200, json.dumps({"results": results}), "application/json")
        if url.path == "/page":
            return self._send(200, PAGE)
        if url.path == "/text":
            return self._send(200, "plain words", "text/plain")
        if url.path == "/big":
            return self._send(200, "<p>" + "word " * 1_000_000 + "</p>")
        if url.path == "/binary":
            return self._send(200, b"\x00\x01", "application/octet-stream")
        if url.path == "/redirect":
            target = parse_qs(url.query)["to"][0]
            return self._send(302, "", headers={"Location": target})
        if url.path == "/drip":
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            try:
                for _ in range(100):
                    self.wfile.write(b"x" * 10)
                    self.wfile.flush()
                    time.sleep(0.1)  # the scenario: a body that trickles for 10 s
            except OSError:
                pass
            return None
        return self._send(404, "missing")

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        form = parse_qs(self.rfile.read(length).decode())
        Handler.requests_seen.append(("POST", self.path, form))
        if self.path.startswith("/html"):
            return self._send(200, DDG.format(u1=quote("https://example.com/first", safe="")))
        return self._send(404, "missing")


@pytest.fixture(scope="module")
def site():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def ctx(**config):
    return ToolContext(
        owner="local",
        session_id="s",
        cancel=CancelToken(),
        config={"FETCH_TIMEOUT": 5.0, "FETCH_MAX_BYTES": 2_000_000, "WEB_SEARCH_RESULTS": 5, **config},
    )


LOCAL = {"FETCH_ALLOWED_NETWORKS": "127.0.0.1/32"}


def test_searxng_backend_results_become_web_sources(site):
    result = web_search({"query": "ithaca"}, ctx(WEB_SEARCH_BACKEND="searxng", SEARXNG_URL=site))
    rows = result.events[0].data["data"]
    assert result.events[0].type == "web_sources"
    assert rows == [
        {"title": "About ithaca", "url": "https://example.com/a", "snippet": "alpha"},
        {"title": "B", "url": "https://example.com/b", "snippet": "beta"},
    ]
    assert "[1] About ithaca" in result.output and "https://example.com/b" in result.output


def test_duckduckgo_html_backend_unwraps_result_links(site):
    result = web_search({"query": "troy"}, ctx(WEB_SEARCH_BACKEND="duckduckgo", DUCKDUCKGO_URL=site + "/html/"))
    rows = result.events[0].data["data"]
    assert rows[0] == {"title": "First result", "url": "https://example.com/first", "snippet": "Snippet one"}
    assert rows[1]["url"] == "https://example.org/two" and rows[1]["snippet"] == "Snippet two"
    assert ("POST", "/html/", {"q": ["troy"]}) in Handler.requests_seen


def test_search_backend_failures_are_tool_errors(site):
    with pytest.raises(ToolError):
        web_search({"query": "x"}, ctx(WEB_SEARCH_BACKEND="searxng", SEARXNG_URL=site + "/nothing"))
    with pytest.raises(ToolError):
        web_search({"query": "x"}, ctx(WEB_SEARCH_BACKEND="searxng", SEARXNG_URL="http://127.0.0.1:9"))
    with pytest.raises(ToolError):
        web_search({"query": "x"}, ctx(WEB_SEARCH_BACKEND=""))


def test_fetch_url_extracts_readable_text(site):
    result = fetch_url({"url": site + "/page"}, ctx(**LOCAL))
    assert "Title: Test Page" in result.output
    assert "Odysseus\nThe long way home.\n- Ithaca\n- Troy" in result.output
    for hidden in ("secret", "color:red", "Home | About", "copyright"):
        assert hidden not in result.output
    assert fetch_url({"url": site + "/text"}, ctx(**LOCAL)).output.endswith("plain words")
    with pytest.raises(ToolError, match="not a text page"):
        fetch_url({"url": site + "/binary"}, ctx(**LOCAL))
    with pytest.raises(ToolError, match="HTTP 404"):
        fetch_url({"url": site + "/missing"}, ctx(**LOCAL))


def test_fetch_url_caps_size_and_time(site):
    big = fetch_url({"url": site + "/big"}, ctx(FETCH_MAX_BYTES=10_000, **LOCAL))
    assert big.meta["bytes"] == 10_000 and len(big.output) < 11_000
    started = time.monotonic()
    with pytest.raises(ToolError, match="too long"):
        fetch_url({"url": site + "/drip"}, ctx(FETCH_TIMEOUT=0.5, **LOCAL))
    assert time.monotonic() - started < 5


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:{port}/page",
        "http://localhost:{port}/page",
        "http://[::1]:{port}/page",
        "http://10.1.2.3/",
        "http://192.168.0.1/",
        "http://169.254.169.254/latest/meta-data/",
        "http://0.0.0.0:{port}/",
        "http://[::ffff:127.0.0.1]:{port}/page",
        "http://100.64.0.1/",
    ],
)
def test_ssrf_guard_refuses_local_private_and_link_local(site, url):
    port = urlparse(site).port
    with pytest.raises(ToolError, match="refused"):
        fetch_url({"url": url.format(port=port)}, ctx())


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://example.com/", "gopher://x/", "http:///nohost"])
def test_fetch_url_refuses_other_schemes(url):
    with pytest.raises(ToolError, match="only http"):
        fetch_url({"url": url}, ctx())


def test_redirect_to_a_private_address_is_refused_at_the_hop(site):
    port = urlparse(site).port
    target = f"http://127.0.0.2:{port}/page"
    before = len(Handler.requests_seen)
    with pytest.raises(ToolError, match="refused"):
        fetch_url({"url": f"{site}/redirect?to={quote(target, safe='')}"}, ctx(**LOCAL))
    assert [r for r in Handler.requests_seen[before:] if r[1] == "/page"] == []
    ok = fetch_url({"url": f"{site}/redirect?to=/text"}, ctx(**LOCAL))
    assert ok.output.endswith("plain words") and ok.meta["url"] == site + "/text"


def test_allow_private_config_and_peer_check(site):
    assert fetch_url({"url": site + "/text"}, ctx(FETCH_ALLOW_PRIVATE=True)).output.endswith("plain words")
    assert check_url("http://127.0.0.1/", {"FETCH_ALLOWED_NETWORKS": "127.0.0.0/8"})
    # The connection-level check holds even when the URL check was passed (DNS rebinding).
    guard = _Guard({})
    with pytest.raises(requests.ConnectionError):
        guarded_session(guard).get(site + "/text", timeout=5)
    assert guard.refused == "127.0.0.1"
    allowed = _Guard(LOCAL)
    assert guarded_session(allowed).get(site + "/text", timeout=5).text == "plain words"


def test_registry_offers_web_search_only_with_a_backend():
    assert (
        "web_search" in build_registry({"AGENT_TOOLS": "web_search,fetch_url", "WEB_SEARCH_BACKEND": "searxng"}).names()
    )
    assert build_registry({"AGENT_TOOLS": "web_search,fetch_url", "WEB_SEARCH_BACKEND": ""}).names() == ["fetch_url"]
