"""The page against the real server: streaming, reload, a cut connection, Stop, script injection."""

from __future__ import annotations

import re
import time

import requests
from browser_helpers import open_app, shot
from sseclient import open_stream, text_of, types_of
from tcpproxy import TcpProxy

from odysseus.llm.demo import demo_reply, demo_thinking

REPLY = ".msg.assistant .msg-body"


def reply_text(page, index: int = -1) -> str:
    texts = page.locator(REPLY).all_inner_texts()
    return " ".join(texts[index].split()) if texts else ""


def reply_source(page, index: int = -1) -> str:
    """The markdown source of a reply (what Copy copies), compared exactly: the demo reply has a table and code."""
    return page.evaluate(
        "i => { const r = [...document.querySelectorAll('.msg.assistant')].at(i);"
        " return r && r.replyView ? r.replyView.text : ''; }",
        index,
    )


def wait_reply_chars(page, count: int) -> None:
    page.wait_for_function(
        "n => { const b = [...document.querySelectorAll('.msg.assistant .msg-body')].pop();"
        " return b && b.innerText.length > n; }",
        arg=count,
    )


def wait_outcome(page, outcome: str, timeout: float = 20000) -> None:
    page.wait_for_selector(f".msg.assistant[data-outcome={outcome}]", timeout=timeout)


def record_requests(page) -> list:
    seen = []
    page.on("request", lambda req: seen.append((req.method, req.url, req.headers)))
    return seen


def send(page, text: str) -> None:
    page.fill("#input", text)
    page.press("#input", "Enter")


def session_of(page) -> str:
    match = re.search(r"session=([\w-]+)", page.url)
    assert match, page.url
    return match.group(1)


def test_type_send_and_see_text_stream_in(server, page):
    seen = record_requests(page)
    open_app(page, server.url)
    assert page.locator("#model-picker option").all_inner_texts() == ["demo/odysseus-demo"]
    send(page, "hello there")
    page.wait_for_selector("#send[data-state=stop]")
    wait_reply_chars(page, 25)
    partial = reply_source(page)
    full = demo_reply("hello there")
    assert full.startswith(partial) and len(partial) < len(full), partial
    shot(page, "01-streaming")
    # Hiding and showing the tab again must neither abort nor re-send anything.
    page.evaluate("""() => {
        for (const state of ["hidden", "visible"]) {
            Object.defineProperty(document, "visibilityState", {value: state, configurable: true});
            Object.defineProperty(document, "hidden", {value: state === "hidden", configurable: true});
            document.dispatchEvent(new Event("visibilitychange"));
            window.dispatchEvent(new Event(state === "hidden" ? "blur" : "focus"));
        }
    }""")
    wait_outcome(page, "ok")
    assert reply_source(page) == full
    assert page.inner_text("#send") == "Send"
    assert page.locator(".msg.assistant .model-label").inner_text() == "Offline demo model"
    assert " ".join(page.locator(".reasoning-text").text_content().split()) == demo_thinking("hello there")
    assert "tokens" in page.locator(".msg.assistant .metrics").inner_text()
    posts = [u for m, u, _ in seen if m == "POST" and u.endswith("/api/chat_stream")]
    assert len(posts) == 1 and not [u for _, u, _ in seen if "/api/chat/stop/" in u]
    sid = session_of(page)
    assert page.locator(f".session[data-session-id='{sid}'] .open[aria-current=page]").count() == 1
    shot(page, "02-reply-done")

    # message_saved enabled edit and delete without a reload.
    page.locator(".msg.assistant .edit").click()
    page.fill(".edit-form textarea", "An **edited** reply")
    page.click(".edit-form button[type=submit]")
    page.wait_for_selector(".msg.assistant .msg-body strong")
    assert reply_text(page) == "An edited reply"
    page.once("dialog", lambda dialog: dialog.accept())
    page.locator(".msg.user .delete").click()
    page.wait_for_function("() => !document.querySelector('.msg.user')")
    rows = requests.get(f"{server.url}/api/sessions/{sid}/messages", timeout=5).json()["messages"]
    assert [(r["role"], r["content"]) for r in rows] == [("assistant", "An **edited** reply")]


def test_reload_mid_stream_continues_without_duplicates(server, page):
    open_app(page, server.url)
    send(page, "reload me please")
    wait_reply_chars(page, 40)
    page.reload()
    page.wait_for_selector("body[data-ready=true]")
    # The run is still going: the composer offers Stop right after the reload.
    assert page.inner_text("#send") == "Stop"
    wait_outcome(page, "ok")
    assert page.locator(".msg.assistant").count() == 1
    assert page.locator(".msg.user").count() == 1
    assert reply_source(page) == demo_reply("reload me please")
    assert page.inner_text("#send") == "Send"
    shot(page, "03-after-reload")


def test_cut_connection_reconnects_from_cursor(server, page):
    proxy = TcpProxy(server.port)
    try:
        seen = record_requests(page)
        open_app(page, proxy.url)
        page.evaluate("""() => { window.__statuses = [];
            new MutationObserver(ms => ms.forEach(m => window.__statuses.push(m.target.dataset.status)))
              .observe(document.getElementById('messages'),
                       {subtree: true, attributes: true, attributeFilter: ['data-status']}); }""")
        send(page, "cut the wire")
        wait_reply_chars(page, 40)
        assert proxy.drop_all() >= 1
        wait_outcome(page, "ok")
        assert reply_source(page) == demo_reply("cut the wire")
        assert page.locator(".msg.assistant").count() == 1
        assert "reconnecting" in page.evaluate("window.__statuses")
        cursors = [int(m.group(1)) for _, u, _ in seen if (m := re.search(r"/api/chat/resume/.*after=(\d+)", u))]
        assert cursors and cursors[0] > 10, cursors
        assert len([u for m, u, _ in seen if m == "POST" and u.endswith("/api/chat_stream")]) == 1
    finally:
        proxy.close()


def test_silent_connection_is_detected_and_resumed(server, page):
    proxy = TcpProxy(server.port)
    try:
        seen = record_requests(page)
        open_app(page, proxy.url)
        # Heartbeats come every second; a connection silent for 1.5 s is treated as dropped.
        page.evaluate("document.body.dataset.stallMs = '1500'")
        send(page, "go quiet")
        wait_reply_chars(page, 40)
        assert proxy.freeze_streaming() == 1
        wait_outcome(page, "ok")
        assert reply_source(page) == demo_reply("go quiet")
        assert page.locator(".msg.assistant").count() == 1
        assert [u for _, u, _ in seen if "/api/chat/resume/" in u]
    finally:
        proxy.close()


def _stop_requests(seen):
    return [h for m, u, h in seen if m == "POST" and "/api/chat/stop/" in u]


def test_stop_after_the_run_id_header(server, page):
    seen = record_requests(page)
    open_app(page, server.url)
    with page.expect_response("**/api/chat_stream") as info:
        send(page, "stop this one")
    run_id = info.value.headers["x-odysseus-run-id"]
    wait_reply_chars(page, 30)
    page.click("#send")
    wait_outcome(page, "stopped")
    assert "Stopped" in page.locator(".msg.assistant .status-line").inner_text()
    partial = reply_source(page)
    assert partial and demo_reply("stop this one").startswith(partial) and partial != demo_reply("stop this one")
    assert [h["x-odysseus-run-id"] for h in _stop_requests(seen)] == [run_id]
    assert page.inner_text("#send") == "Send"
    rows = requests.get(f"{server.url}/api/sessions/{session_of(page)}/messages", timeout=5).json()["messages"]
    assert rows[-1]["metadata"]["status"] == "stopped" and rows[-1]["content"] == partial
    shot(page, "04-stopped")


def test_stop_before_the_header_is_queued_for_that_run(server, page):
    seen = record_requests(page)
    held = []
    page.route("**/api/chat_stream", lambda route: held.append(route))
    open_app(page, server.url)
    send(page, "stop me early")
    deadline = time.monotonic() + 10
    while not held and time.monotonic() < deadline:
        page.wait_for_timeout(20)
    assert held, "the send never left the page"
    assert page.inner_text("#send") == "Stop"
    page.click("#send")
    page.wait_for_selector(".msg.assistant[data-status=stopping]")
    assert not _stop_requests(seen)  # no run id yet: the stop waits for the header
    with page.expect_response("**/api/chat_stream") as info:
        held[0].continue_()
    run_id = info.value.headers["x-odysseus-run-id"]
    wait_outcome(page, "stopped")
    assert [h["x-odysseus-run-id"] for h in _stop_requests(seen)] == [run_id]
    rows = requests.get(f"{server.url}/api/sessions/{session_of(page)}/messages", timeout=5).json()["messages"]
    assert rows[-1]["metadata"]["status"] == "stopped"
    assert len(rows[-1]["content"]) < len(demo_reply("stop me early"))


def test_stale_stop_never_stops_a_newer_run(server, page):
    held = []
    open_app(page, server.url)
    send(page, "first run")
    wait_reply_chars(page, 20)
    sid = session_of(page)
    page.route("**/api/chat/stop/**", lambda route: held.append(route))
    page.click("#send")  # Stop for the first run, held in flight
    deadline = time.monotonic() + 10
    while not held and time.monotonic() < deadline:
        page.wait_for_timeout(20)
    assert held
    newer = open_stream(
        "POST",
        server.url + "/api/chat_stream",
        json={"message": "second run", "session": sid},
        headers={"Connection": "close"},
    )
    with page.expect_response("**/api/chat/stop/**") as info:
        held[0].continue_()
    assert info.value.json() == {"stopped": False}
    frames = newer.events()
    newer.close()
    assert text_of(frames) == demo_reply("second run")
    assert types_of(frames)[-1] == "[DONE]"


PAYLOAD = "<img src=x onerror=alert(1)><script>window.__pwned=1</script>"


def test_script_injection_reply_is_inert_text(server, page):
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    open_app(page, server.url)
    send(page, PAYLOAD)
    wait_outcome(page, "ok")
    for attempt in ("live", "history"):
        page.wait_for_timeout(300)
        assert page.evaluate("window.__pwned") is None, attempt
        assert dialogs == [], attempt
        assert page.locator(".msg img, .msg script, .msg [onerror]").count() == 0, attempt
        assert PAYLOAD in reply_text(page), attempt
        assert page.locator(".msg.user .msg-body").inner_text() == PAYLOAD
        if attempt == "live":
            shot(page, "05-script-injection-inert")
            page.reload()
            page.wait_for_selector("body[data-ready=true]")
            wait_outcome(page, "ok")


def test_escape_stops_the_reply_and_question_mark_lists_the_shortcuts(server, page):
    """Esc stops a running reply; `?` outside a text field opens the list (issue 35 item 4)."""
    open_app(page, server.url)
    send(page, "stop me with the keyboard")
    wait_reply_chars(page, 30)
    page.locator("#messages").click()  # focus off the message box: Esc works anywhere
    page.keyboard.press("Escape")
    wait_outcome(page, "stopped")
    rows = requests.get(f"{server.url}/api/sessions/{session_of(page)}/messages", timeout=5).json()["messages"]
    assert rows[-1]["metadata"]["status"] == "stopped"
    page.keyboard.press("?")
    dialog = page.locator("#modal[open] .shortcuts")
    dialog.wait_for(timeout=5000)
    assert "stop the reply" in dialog.inner_text()
    page.keyboard.press("Escape")  # the dialog's own Esc closes it
    page.locator("#modal[open]").wait_for(state="detached", timeout=5000)
    page.fill("#input", "what is 2?")  # typed into the box, `?` is just a character
    assert page.locator("#modal[open]").count() == 0


def test_the_single_user_owner_sees_the_providers_section(server, page):
    open_app(page, server.url)
    page.click("#open-settings")
    page.locator("#settings-providers").wait_for(timeout=10000)
