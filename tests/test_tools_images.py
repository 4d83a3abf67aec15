"""generate_image against a local OpenAI-compatible images endpoint; stored and served from our URL."""

from __future__ import annotations

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from odysseus import create_app
from odysseus.cancel import CancelToken
from odysseus.tools import build_registry
from odysseus.tools.images import generate_image
from odysseus.tools.registry import ToolContext, ToolError

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32


class Images(BaseHTTPRequestHandler):
    seen: list = []
    mode = "b64"
    huge_mib = 0  # MiB of the endless image written before the client hung up
    huge_done = threading.Event()

    def log_message(self, *args):
        pass

    def _json(self, status, payload):
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Images.seen.append((self.path, self.headers.get("Authorization"), body))
        if Images.mode == "b64":
            return self._json(200, {"data": [{"b64_json": base64.b64encode(PNG).decode(), "revised_prompt": "a cat!"}]})
        if Images.mode == "url":
            return self._json(200, {"data": [{"url": f"http://127.0.0.1:{self.server.server_address[1]}/file.png"}]})
        if Images.mode == "huge":
            return self._json(200, {"data": [{"url": f"http://127.0.0.1:{self.server.server_address[1]}/huge.png"}]})
        if Images.mode == "elsewhere":  # another origin on the server's own network (an internal service)
            return self._json(200, {"data": [{"url": f"http://localhost:{Internal.port}/secret.png"}]})
        if Images.mode == "junk":
            return self._json(200, {"data": [{"b64_json": base64.b64encode(b"<html>").decode()}]})
        return self._json(500, {"error": {"message": "secret upstream detail"}})

    def do_GET(self):
        if self.path == "/huge.png":  # a stream with no end in sight: must be cut while reading
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.end_headers()
            Images.huge_mib = 0
            try:
                self.wfile.write(PNG)
                for _ in range(64):
                    self.wfile.write(b"\x00" * (1024 * 1024))
                    Images.huge_mib += 1
            except OSError:
                pass  # the client stopped reading: what this test wants
            Images.huge_done.set()
            return
        self.send_response(200)
        self.send_header("Content-Type", "image/png")
        self.send_header("Content-Length", str(len(PNG)))
        self.end_headers()
        self.wfile.write(PNG)


class Internal(BaseHTTPRequestHandler):
    """An internal service on the loopback address: an image service's answer must not reach it."""

    port = 0
    hits: list = []

    def log_message(self, *args):
        pass

    def do_GET(self):
        Internal.hits.append(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "image/png")
        self.send_header("Content-Length", str(len(PNG)))
        self.end_headers()
        self.wfile.write(PNG)


@pytest.fixture(scope="module")
def internal():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Internal)
    server.daemon_threads = True
    Internal.port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def endpoint():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Images)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def ctx(endpoint, saved):
    config = {"IMAGES_BASE_URL": endpoint, "IMAGES_API_KEY": "k-123", "IMAGES_MODEL": "img-1", "IMAGES_TIMEOUT": 5}
    return ToolContext(
        owner="local",
        session_id="s",
        cancel=CancelToken(),
        config=config,
        save_image=lambda data, mime: saved.append((data, mime)) or "/api/images/img_x.png",
    )


@pytest.mark.parametrize("mode", ["b64", "url"])
def test_generate_image_stores_and_publishes_our_url(endpoint, mode):
    Images.mode = mode
    saved = []
    result = generate_image({"prompt": "a cat", "size": "512x512"}, ctx(endpoint, saved))
    assert saved == [(PNG, "image/png")]
    event = result.events[0]
    assert event.type == "generated_image" and event.data["url"] == "/api/images/img_x.png"
    path, auth, body = Images.seen[-1]
    assert path == "/v1/images/generations" and auth == "Bearer k-123"
    assert body == {"prompt": "a cat", "n": 1, "response_format": "b64_json", "model": "img-1", "size": "512x512"}


@pytest.mark.parametrize("mode, match", [("junk", "not a PNG"), ("fail", "HTTP 500")])
def test_generate_image_failures_are_tool_errors(endpoint, mode, match):
    Images.mode = mode
    with pytest.raises(ToolError, match=match) as info:
        generate_image({"prompt": "a cat"}, ctx(endpoint, []))
    assert "secret upstream" not in str(info.value)


def test_a_url_on_another_origin_goes_through_the_ssrf_guard(endpoint, internal):
    """The answer names an internal address on another port: refused, never fetched (issue 38 item 6)."""
    Images.mode = "elsewhere"
    Internal.hits.clear()
    with pytest.raises(ToolError, match="private or local address"):
        generate_image({"prompt": "a cat"}, ctx(endpoint, []))
    assert Internal.hits == []


def test_an_endless_image_is_cut_while_reading(endpoint):
    Images.mode = "huge"
    saved = []
    Images.huge_done.clear()
    with pytest.raises(ToolError, match="too large"):
        generate_image({"prompt": "a cat"}, ctx(endpoint, saved))
    assert saved == []
    assert Images.huge_done.wait(10)
    assert Images.huge_mib < 40  # cut near MAX_IMAGE_BYTES (20 MiB), not read to the end (64 MiB)


def test_tool_is_offered_only_when_configured(endpoint, tmp_path):
    assert "generate_image" not in build_registry({"AGENT_TOOLS": "generate_image"}).names()
    assert "generate_image" in build_registry({"AGENT_TOOLS": "generate_image", "IMAGES_BASE_URL": endpoint}).names()
    Images.mode = "b64"
    app = create_app({"DATA_DIR": str(tmp_path), "PROVIDERS": [], "AUTH": "none", "IMAGES_BASE_URL": endpoint})
    try:
        service = app.extensions["odysseus.agent"]
        run_ctx = type(
            "Ctx", (), {"owner": "local", "session_id": "s1", "cancel": CancelToken(), "run_id": "r", "metadata": {}}
        )()
        result = generate_image({"prompt": "a dog"}, service.tool_context(run_ctx))
        url = result.events[0].data["url"]
        got = app.test_client().get(url)
        assert got.status_code == 200 and got.data == PNG
        assert (tmp_path / "images" / url.rsplit("/", 1)[1]).read_bytes() == PNG
    finally:
        app.extensions["odysseus.runs"].close()
