"""Web sources in chat mode over the real wire: a SearXNG stand-in, local pages, a recording model.

The live server may fetch only 127.0.0.1 (``FETCH_ALLOWED_NETWORKS``); a result on 127.0.0.2
stands for a private address the SSRF guard must refuse (it is never contacted, its snippet is
used instead).
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests
from scripted_model import ScriptedModel, reply
from searxng import searxng
from sseclient import post_chat, types_of

from odysseus import create_app

LONG = "Penelope weaves by day and unweaves by night. " * 200  # ~9,400 characters


class Pages:
    """Local HTML pages on one loopback address; records every path asked."""

    def __init__(self, host: str, pages: dict):
        self.hits = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):  # noqa: N802
                outer.hits.append(self.path)
                body = pages.get(self.path)
                data = (body or "missing").encode()
                self.send_response(200 if body else 404)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.url = f"http://{host}:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from liveserver import LiveServer

    public = Pages(
        "127.0.0.1",
        {
            "/ithaca": "<html><head><title>Ithaca</title></head><body><nav>menu</nav><p>Ithaca is a Greek island "
            "in the Ionian Sea.</p><script>var hidden = 'SCRIPT-TEXT';</script></body></html>",
            "/long": f"<html><body><p>{LONG}</p></body></html>",
        },
    )
    private = Pages("127.0.0.2", {"/secret": "<p>PRIVATE-ADMIN-PANEL</p>"})
    results = [
        {"title": "Ithaca island", "url": public.url + "/ithaca", "content": "A Greek island"},
        {"title": "A long story", "url": public.url + "/long", "content": "About Penelope"},
        {"title": "Router admin", "url": private.url + "/secret", "content": "router snippet"},
        {"title": "Not fetched", "url": public.url + "/fourth", "content": "fourth snippet"},
    ]
    control = {}
    with ScriptedModel() as model, searxng(results, control) as search_url:
        server = LiveServer(
            str(tmp_path_factory.mktemp("web")),
            {
                "OPENAI_BASE_URL": model.url + "/v1",
                "OPENAI_API_KEY": "sk-test-key-not-secret",
                "ODYSSEUS_WEB_SEARCH_BACKEND": "searxng",
                "ODYSSEUS_SEARXNG_URL": search_url,
                "ODYSSEUS_FETCH_ALLOWED_NETWORKS": "127.0.0.1/32",
                "ODYSSEUS_WEB_CONTEXT_PAGES": "3",
                "ODYSSEUS_WEB_PAGE_CHARS": "2000",
                "ODYSSEUS_HEARTBEAT_INTERVAL": "0.5",
            },
        ).start()
        try:
            yield {
                "server": server,
                "model": model,
                "control": control,
                "public": public,
                "private": private,
                "results": results,
            }
        finally:
            server.stop()
            public.close()
            private.close()


def chat(server, message, **fields):
    stream = post_chat(server.url, message, **fields)
    try:
        return stream, stream.events()
    finally:
        stream.close()


def web_block(body):
    return "\n".join(
        m["content"]
        for m in body["messages"]
        if m["role"] == "system" and '<context source="web search">' in m["content"]
    )


def test_use_web_searches_fetches_injects_and_announces_before_the_first_delta(world):
    server, model = world["server"], world["model"]
    model.script(reply("Ithaca is an island [1]."))
    stream, frames = chat(server, "Where is Ithaca?", use_web=True)
    kinds = types_of(frames)
    assert kinds.index("web_sources") < kinds.index("delta") and kinds[-1] == "[DONE]"
    sources = frames[kinds.index("web_sources")]["data"]["data"]
    assert sources == [{"url": r["url"], "title": r["title"], "snippet": r["content"]} for r in world["results"]]
    assert world["control"]["queries"][-1] == "Where is Ithaca?"
    block = web_block(model.requests[-1])
    assert "Ithaca is a Greek island in the Ionian Sea." in block and "untrusted" in block.lower()
    assert "SCRIPT-TEXT" not in block and "menu" not in block  # readable text only
    assert "Penelope weaves" in block and block.count("Penelope weaves") < 60  # capped at WEB_PAGE_CHARS
    assert "router snippet" in block and "PRIVATE-ADMIN-PANEL" not in block
    assert world["private"].hits == []  # the SSRF guard never connected to 127.0.0.2
    assert "/fourth" not in world["public"].hits and "fourth snippet" in block  # beyond WEB_CONTEXT_PAGES
    assert model.requests[-1]["messages"][-1] == {"role": "user", "content": "Where is Ithaca?"}
    session = stream.headers["X-Odysseus-Session-Id"]
    saved = requests.get(f"{server.url}/api/sessions/{session}/messages", timeout=10).json()["messages"]
    assert saved[-1]["metadata"]["web_sources"] == sources and saved[0]["metadata"]["use_web"] is True


def test_without_use_web_nothing_is_searched(world):
    server, model = world["server"], world["model"]
    asked = len(world["control"]["queries"])
    model.script(reply("Plain answer."))
    _, frames = chat(server, "Where is Ithaca?")
    assert "web_sources" not in types_of(frames) and len(world["control"]["queries"]) == asked
    assert web_block(model.requests[-1]) == ""


def test_a_failed_search_is_a_notice_and_the_reply_still_comes(world):
    server, model = world["server"], world["model"]
    world["control"]["status"] = 503
    try:
        model.script(reply("From memory: an island."))
        stream, frames = chat(server, "Where is Ithaca?", use_web=True)
    finally:
        world["control"]["status"] = 200
    kinds = types_of(frames)
    assert "web_sources" not in kinds and kinds.index("notice") < kinds.index("delta") and kinds[-1] == "[DONE]"
    notice = frames[kinds.index("notice")]["data"]
    assert notice["source"] == "web" and "503" in notice["message"]
    session = stream.headers["X-Odysseus-Session-Id"]
    saved = requests.get(f"{server.url}/api/sessions/{session}/messages", timeout=10).json()["messages"]
    assert saved[-1]["content"] == "From memory: an island." and saved[-1]["metadata"]["status"] == "done"


def test_use_web_is_refused_without_a_backend_and_must_be_boolean(tmp_path):
    app = create_app(
        {
            "DATA_DIR": str(tmp_path),
            "AUTH": "none",
            "PROVIDERS": [],
            "WEB_SEARCH_BACKEND": "",
            "DEMO_TOKEN_DELAY": 0.001,
        }
    )
    try:
        client = app.test_client()
        off = client.post("/api/chat_stream", json={"message": "hi", "use_web": True})
        assert off.status_code == 400 and "web search is turned off" in off.get_json()["error"]
        bad = client.post("/api/chat_stream", json={"message": "hi", "use_web": [1]})
        assert bad.status_code == 400 and "use_web" in bad.get_json()["error"]
        assert client.get("/api/sessions").get_json()["sessions"] == []  # nothing stored
        fine = client.post("/api/chat_stream", json={"message": "hi", "use_web": "false"})
        assert fine.status_code == 200
    finally:
        app.extensions["odysseus.runs"].close()
