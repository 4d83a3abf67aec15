"""The page's context parts against the real server: the memories screen, the memory pill and web
sources under a reply (live, then the same after a reload), and the admin's workspace picker.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests
from browser_helpers import open_app, shot
from liveserver import LiveServer
from scripted_model import ScriptedModel, reply, tool
from searxng import searxng

CONTEXT_SNAPSHOT = """() => [...document.querySelectorAll('#messages .msg.assistant')].map(m => ({
  text: m.querySelector('.msg-body').innerText.trim(),
  pill: m.querySelector('.memories-pill summary')?.innerText || '',
  memories: [...m.querySelectorAll('.memory-used')].map(li => [li.dataset.memoryId, li.className, li.innerText]),
  sources: [...m.querySelectorAll('.web-source')].map(li => [li.querySelector('a')?.href || '', li.innerText]),
  notices: [...m.querySelectorAll('.context-notice')].map(n => n.innerText),
  outcome: m.dataset.outcome || '',
}))"""


class Page(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):  # noqa: N802
        body = b"<html><head><title>Ithaca</title></head><body><p>Ithaca is in the Ionian Sea.</p></body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def model():
    with ScriptedModel() as scripted:
        yield scripted


@pytest.fixture(scope="module")
def site(model, tmp_path_factory):
    pages = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=pages.serve_forever, daemon=True).start()
    page_url = f"http://127.0.0.1:{pages.server_address[1]}/ithaca"
    results = [
        {"title": "Ithaca <b>island</b>", "url": page_url, "content": "An island in the Ionian Sea"},
        {"title": "Bad link", "url": "javascript:alert(1)", "content": "never a link"},
    ]
    with searxng(results) as search:
        server = LiveServer(
            str(tmp_path_factory.mktemp("mempage")),
            {
                "ODYSSEUS_AUTH": "none",
                "OPENAI_BASE_URL": model.url + "/v1",
                "OPENAI_API_KEY": "sk-x",
                "ODYSSEUS_WEB_SEARCH_BACKEND": "searxng",
                "ODYSSEUS_SEARXNG_URL": search,
                "ODYSSEUS_FETCH_ALLOWED_NETWORKS": "127.0.0.1/32",
                "ODYSSEUS_AGENT_TOOLS": "shell",
                "ODYSSEUS_AGENT_APPROVAL_TOOLS": "",
                "ODYSSEUS_HEARTBEAT_INTERVAL": "0.5",
            },
        ).start()
        try:
            yield server
        finally:
            server.stop()
            pages.shutdown()
            pages.server_close()


def script(model, *replies):
    with model.lock:
        model.replies = list(replies)
        model.requests.clear()


def memories_of(server):
    return requests.get(server.url + "/api/memory", timeout=10).json()


def test_memories_screen_add_edit_pin_search_delete_and_switches(site, page):
    open_app(page, site.url)
    page.click("#memories-open")
    screen = page.locator(".memories-screen")
    screen.wait_for()
    assert "No memories yet" in screen.locator(".memory-status").inner_text()
    page.fill(".memory-add textarea", "My dog is called <b>Rex</b>")
    page.fill(".memory-add input[aria-label=Category]", "Pets")
    page.click(".memory-add button[type=submit]")
    page.wait_for_selector(".memory-row")
    page.fill(".memory-add textarea", "I prefer metric units")
    page.check("#memory-add-pinned")
    page.click(".memory-add button[type=submit]")
    page.wait_for_function("document.querySelectorAll('.memory-row').length === 2")
    rows = screen.locator(".memory-row")
    assert rows.nth(0).locator(".memory-text").inner_text() == "I prefer metric units"  # pinned first
    assert "pinned" in rows.nth(0).get_attribute("class")
    assert rows.nth(1).locator(".memory-text").inner_text() == "My dog is called <b>Rex</b>"  # text, not HTML
    assert "pets · added by you · used 0 times" in rows.nth(1).locator(".memory-meta").inner_text()

    rows.nth(1).locator("button.edit").click()
    page.fill(".memory-edit textarea", "My dog is called Rex the Second")
    page.click(".memory-edit button[type=submit]")
    page.wait_for_selector(".memory-row .memory-text:text-is('My dog is called Rex the Second')")
    page.locator(".memory-row", has_text="Rex the Second").locator("button.pin").click()
    page.wait_for_function("document.querySelectorAll('.memory-row.pinned').length === 2")
    page.locator(".memory-row", has_text="metric").locator("button.pin").click()
    page.wait_for_function("document.querySelectorAll('.memory-row.pinned').length === 1")

    page.fill(".memory-search input", "dog")
    page.press(".memory-search input", "Enter")
    page.wait_for_function("document.querySelectorAll('.memory-row').length === 1")
    assert "1 found" in screen.locator(".memory-status").inner_text()
    page.fill(".memory-search input", "")
    page.wait_for_function("document.querySelectorAll('.memory-row').length === 2")

    page.uncheck("#memory-enabled")
    page.check("#memory-auto")
    page.wait_for_function("""async () => { const r = await fetch('/api/memory/settings');
        const s = await r.json(); return s.enabled === false && s.auto_extract === true; }""")
    shot(page, "memories-screen")
    page.locator(".memory-row", has_text="metric").locator("button.delete").click()
    page.wait_for_function("document.querySelectorAll('.memory-row').length === 1")
    stored = memories_of(site)
    assert [m["text"] for m in stored["memories"]] == ["My dog is called Rex the Second"]
    assert stored["memories"][0]["pinned"] is True
    # the switches come back as saved when the screen is opened again
    page.click("#modal .modal-close")
    page.click("#memories-open")
    page.wait_for_selector(".memory-row")
    assert page.is_checked("#memory-enabled") is False and page.is_checked("#memory-auto") is True
    requests.patch(site.url + "/api/memory/settings", json={"enabled": True, "auto_extract": False}, timeout=10)
    for memory in memories_of(site)["memories"]:
        requests.delete(f"{site.url}/api/memory/{memory['id']}", timeout=10)


def test_memory_pill_and_web_sources_under_a_reply_match_after_a_reload(site, model, page):
    pinned = requests.post(
        site.url + "/api/memory", json={"text": "Answer briefly", "category": "style", "pinned": True}, timeout=10
    ).json()
    recalled = requests.post(site.url + "/api/memory", json={"text": "I sailed to Ithaca in 2019"}, timeout=10).json()
    script(model, reply("Ithaca is in the **Ionian** Sea."), reply("No web this time."))
    open_app(page, site.url)
    assert page.is_visible("#use-web") and page.is_hidden("#workspace-pick")
    page.check("#use-web")
    page.fill("#input", "Where is Ithaca, where I sailed?")
    page.press("#input", "Enter")
    page.wait_for_selector(".msg.assistant[data-outcome=ok]")
    reply_el = page.locator(".msg.assistant").first
    assert reply_el.locator(".memories-pill summary").inner_text() == "2 memories used"
    sources = reply_el.locator(".web-source")
    assert sources.count() == 2
    assert sources.nth(0).locator("a").get_attribute("href").endswith("/ithaca")
    assert sources.nth(0).locator("a").get_attribute("rel") == "noopener noreferrer nofollow"
    assert "Ithaca <b>island</b>" in sources.nth(0).inner_text()  # a title is text, never markup
    assert sources.nth(1).locator("a").count() == 0  # a javascript: URL is not a link
    sent = model.requests[0]
    assert "Ithaca is in the Ionian Sea." in json.dumps(sent) and "Answer briefly" in json.dumps(sent)
    reply_el.locator(".memories-pill summary").click()
    shot(page, "reply-memories-and-web-sources")
    # the Web toggle is remembered; turn it off for a second reply without sources
    page.uncheck("#use-web")
    page.fill("#input", "Thanks")
    page.press("#input", "Enter")
    page.wait_for_function("document.querySelectorAll('.msg.assistant[data-outcome=ok]').length === 2")
    live = page.evaluate(CONTEXT_SNAPSHOT)
    assert live[1]["sources"] == [] and live[1]["pill"] == "1 memory used"  # only the pinned one
    assert [m[0] for m in live[0]["memories"]] == [pinned["id"], recalled["id"]]
    page.reload()
    page.wait_for_selector("body[data-ready=true]")
    page.wait_for_selector(".msg.assistant[data-outcome=ok]")
    page.locator(".msg.assistant").first.locator(".memories-pill summary").click()
    assert page.evaluate(CONTEXT_SNAPSHOT) == live
    for memory in memories_of(site)["memories"]:
        requests.delete(f"{site.url}/api/memory/{memory['id']}", timeout=10)


def test_workspace_picker_chooses_a_folder_and_a_rejected_one_is_cleared(site, model, page, tmp_path):
    (tmp_path / "alpha").mkdir()
    (tmp_path / "alpha" / "alpha-marker.txt").write_text("here")
    (tmp_path / ".hidden").mkdir()
    open_app(page, site.url)
    page.click(".mode-switch label:has(input[value=agent])")
    assert page.is_hidden("label.web-toggle")
    page.wait_for_selector("#workspace-pick:not([hidden])")
    page.evaluate("p => window.odysseus.controls.browse(p)", str(tmp_path))
    picker = page.locator(".workspace-picker")
    picker.wait_for()
    assert picker.locator(".workspace-list .folder").all_inner_texts() == ["alpha"]  # dot-directories hidden
    picker.locator(".folder", has_text="alpha").click()
    page.wait_for_selector(f".workspace-path:text-is('{tmp_path / 'alpha'}')")
    page.click(".workspace-picker .use")
    assert page.inner_text("#workspace-pick") == f"Workspace: {tmp_path / 'alpha'}"
    # the sandbox binds the chosen folder at /workspace: the folder's own file shows where the shell ran
    script(model, reply("", [tool("c1", "shell", command="ls")]), reply("Done."))
    page.fill("#input", "where are you?")
    page.press("#input", "Enter")
    page.wait_for_selector(".msg.assistant[data-outcome=ok]")
    assert page.locator(".tool-row .tool-output").text_content().strip() == "alpha-marker.txt"

    page.evaluate("() => window.odysseus.controls.setWorkspace('/etc')")
    script(model, reply("", [tool("c2", "shell", command="ls -a")]), reply("Done."))
    page.fill("#input", "and now?")
    page.press("#input", "Enter")
    page.wait_for_function("document.querySelectorAll('.msg.assistant[data-outcome=ok]').length === 2")
    second = page.locator(".msg.assistant").nth(1)
    assert "inside /etc" in second.locator(".context-notice").inner_text()
    assert page.inner_text("#workspace-pick") == "Workspace: this chat's"
    assert "alpha-marker.txt" not in second.locator(".tool-output").text_content()  # this chat's own workspace
    notices = page.evaluate(CONTEXT_SNAPSHOT)[1]["notices"]
    page.reload()
    page.wait_for_selector("body[data-ready=true]")
    page.wait_for_function("document.querySelectorAll('.msg.assistant[data-outcome=ok]').length === 2")
    assert page.evaluate(CONTEXT_SNAPSHOT)[1]["notices"] == notices
