"""The browser's own ``EventSource`` and ``@microsoft/fetch-event-source`` in Chromium, against the real
server through a proxy that cuts connections at random points, across a run switch on one session:
the text each assembled equals the model's, with no gap and no duplicate (issue 12).

The test page and the library (from node_modules, pinned in package.json) are served by
Playwright on the proxy's origin, so only the streams cross the cutting proxy.
"""

from __future__ import annotations

import os
import sys

import pytest
import requests
from browser_helpers import ROOT

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from cutproxy import CutProxy  # noqa: E402

from odysseus.llm.demo import demo_reply  # noqa: E402

LIBRARY = os.path.join(ROOT, "node_modules", "@microsoft", "fetch-event-source", "lib", "esm")

PAGE = """<!doctype html><meta charset="utf-8"><title>sse clients</title>
<script type="module">
import { fetchEventSource } from "/__sse_test/fes/index.js";

// EventSource: follow a session's runs until the server answers 204 (the browser then closes it)
window.followEventSource = (url) => new Promise((resolve) => {
  const got = [];
  const source = new EventSource(url);
  source.onmessage = (e) => got.push({ id: e.lastEventId, data: e.data });
  source.onerror = (e) => {
    if (e instanceof MessageEvent && e.data) got.push({ id: e.lastEventId, error: e.data });
    if (source.readyState === EventSource.CLOSED) resolve(got);
  };
  window.sourceGot = got;
});

// fetch-event-source: POST, retried by the library with Last-Event-ID after every cut; 204 or close ends it
class Finished extends Error {}
// The library takes an id as soon as it parses the "id:" line, before the frame is complete: a cut
// inside a frame would skip that frame on the retry. So the retry sends the id of the last message
// actually received (docs/protocol.md, client recipe).
window.followFetch = (url, body) => new Promise((resolve, reject) => {
  const got = [];
  let opens = 0;
  let received = null;
  const fetchWithReceivedId = (input, init) => {
    const headers = { ...init.headers };
    delete headers["last-event-id"];
    if (received !== null) headers["last-event-id"] = received;
    return fetch(input, { ...init, headers });
  };
  fetchEventSource(url, {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
    openWhenHidden: true, fetch: fetchWithReceivedId,
    async onopen(response) {
      opens += 1;
      if (response.status === 204) throw new Finished();
      if (!response.ok || !response.headers.get("content-type").startsWith("text/event-stream")) {
        throw new Error("bad response " + response.status);
      }
    },
    onmessage(e) { got.push({ id: e.id, event: e.event, data: e.data }); if (e.id) received = e.id; },
    onclose() { throw new Error("closed early"); },  // a cut: retry (a whole run ends with [DONE], then 204)
    onerror(err) {
      if (err instanceof Finished) throw err;
      if (opens > 300) throw err;
      return 50;  // retry soon
    },
  }).then(() => resolve({ got, opens }), (err) => err instanceof Finished ? resolve({ got, opens }) : reject(err));
});
</script>"""


def _content(items):
    """Reply text from chat-projection data frames (reasoning left out)."""
    import json

    text = []
    for item in items:
        data = item.get("data") or ""
        if data.startswith("{"):
            payload = json.loads(data)
            if "delta" in payload and not payload.get("thinking"):
                text.append(payload["delta"])
    return "".join(text)


def _ids(items):
    return [int(item["id"]) for item in items if item.get("id") and item.get("data") is not None]


@pytest.fixture
def cut_app(server_factory, page):
    server = server_factory(
        {
            "ODYSSEUS_DEMO_TOKEN_DELAY": "0.01",
            "ODYSSEUS_SSE_RETRY_MS": "100",
            "ODYSSEUS_HEARTBEAT_INTERVAL": "1",
            "ODYSSEUS_EVICT_GRACE": "60",
        }
    )
    proxy = CutProxy(server.port, low=300, high=3000, max_cuts=25, seed=7)

    def serve(route):
        path = route.request.url.split("/__sse_test/", 1)[1]
        if path == "page.html":
            return route.fulfill(status=200, content_type="text/html", body=PAGE)
        name = path.split("fes/", 1)[1]
        name = name if name.endswith(".js") else name + ".js"  # the library imports "./fetch" without .js
        with open(os.path.join(LIBRARY, os.path.basename(name)), encoding="utf-8") as fh:
            return route.fulfill(status=200, content_type="text/javascript", body=fh.read())

    page.route(f"{proxy.url}/__sse_test/**", serve)
    page.goto(f"{proxy.url}/__sse_test/page.html")
    page.wait_for_function("typeof window.followFetch === 'function'")
    yield server, proxy, page
    proxy.close()


def test_event_source_follows_a_session_through_cuts_and_a_run_switch(cut_app):
    server, proxy, page = cut_app
    first, second = "first run for EventSource " * 2, "second run for EventSource"
    starter = requests.post(server.url + "/api/chat_stream", json={"message": first}, stream=True, timeout=30)
    session_id = starter.headers["X-Odysseus-Session-Id"]
    starter.close()
    page.evaluate(
        "url => { window.done = window.followEventSource(url); }", f"{proxy.url}/api/chat/resume/{session_id}?after=0"
    )
    page.wait_for_function("window.sourceGot && window.sourceGot.length > 20", timeout=30000)
    # run switch: a new send replaces the running run; the same EventSource goes on into it
    requests.post(
        server.url + "/api/chat_stream", json={"message": second, "session_id": session_id}, stream=True, timeout=30
    ).close()
    got = page.evaluate("window.done")
    ids = _ids(got)
    assert ids == sorted(set(ids)), "an id came twice or went back"
    messages = requests.get(f"{server.url}/api/sessions/{session_id}/messages", timeout=10).json()["messages"]
    replies = [m["content"] for m in messages if m["role"] == "assistant"]
    assert len(replies) == 2 and replies[1] == demo_reply(second)
    assert _content(got) == replies[0] + replies[1]  # the partial of run 1, then all of run 2
    assert proxy.cuts >= 5


def test_fetch_event_source_retries_the_post_through_cuts_across_runs(cut_app):
    server, proxy, page = cut_app
    session_id = requests.post(server.url + "/api/sessions", json={"title": "fes"}, timeout=10).json()["id"]
    texts = []
    last = 0
    for n, message in enumerate(["first run for fetch-event-source " * 2, "second run for fetch-event-source"]):
        result = page.evaluate(
            "([url, body]) => window.followFetch(url, body)",
            [
                f"{proxy.url}/api/chat_stream",
                {"message": message, "session_id": session_id, "client_message_id": f"fes-{n}"},
            ],
        )
        got = result["got"]
        ids = _ids(got)
        assert ids == sorted(set(ids)) and ids[0] > last, "an id came twice, went back or repeated a run's"
        last = ids[-1]
        assert [g["data"] for g in got].count("[DONE]") == 1
        texts.append(_content(got))
        assert texts[-1] == demo_reply(message)
        assert result["opens"] > 1  # the POST was cut and retried
    assert proxy.cuts >= 5
