"""Sessions sidebar (new, rename, delete, switch while a run goes on), theme, keyboard use."""

from __future__ import annotations

import requests
from browser_helpers import fulfil_sse, open_app, shot, sse

from odysseus.llm.demo import demo_reply


def sessions(server):
    return requests.get(server.url + "/api/sessions", timeout=5).json()["sessions"]


def test_new_rename_delete_and_switch_back_to_a_running_session(server, page):
    open_app(page, server.url)
    page.fill("#input", "first chat")
    page.press("#input", "Enter")
    page.wait_for_selector(".msg.assistant[data-outcome=ok]")
    first = sessions(server)[0]["id"]

    # New chat while a reply streams: the run goes on server-side; switching back attaches once.
    page.click("#new-chat")
    page.fill("#input", "second chat")
    page.press("#input", "Enter")
    page.wait_for_function("() => (document.querySelector('.msg.assistant .msg-body')?.innerText || '').length > 20")
    page.click(f".session[data-session-id='{first}'] .open")
    page.wait_for_selector(".msg.assistant[data-outcome=ok]")
    assert page.inner_text("#send") == "Send"
    second = next(s["id"] for s in sessions(server) if s["id"] != first)
    page.click(f".session[data-session-id='{second}'] .open")
    page.wait_for_selector(".msg.assistant[data-outcome=ok]", timeout=20000)
    assert page.locator(".msg.assistant").count() == 1
    assert page.evaluate("document.querySelector('.msg.assistant').replyView.text") == demo_reply("second chat")

    # Rename with the keyboard.
    page.click(f".session[data-session-id='{second}'] .rename")
    page.fill(".rename-input", "Renamed chat")
    page.press(".rename-input", "Enter")
    page.wait_for_selector(f".session[data-session-id='{second}'] .open:text('Renamed chat')")
    assert {s["id"]: s["title"] for s in sessions(server)}[second] == "Renamed chat"
    assert page.inner_text("#session-title") == "Renamed chat"

    # Delete the open session: the page goes back to an empty new chat.
    page.once("dialog", lambda dialog: dialog.accept())
    page.click(f".session[data-session-id='{second}'] .delete")
    page.wait_for_selector(f".session[data-session-id='{second}']", state="detached")
    assert [s["id"] for s in sessions(server)] == [first]
    assert page.locator(".msg").count() == 0 and page.url.endswith("/")


def test_theme_toggle_and_keyboard_only_use(server, page_factory):
    page = page_factory(color_scheme="light")
    open_app(page, server.url)
    assert page.evaluate("document.documentElement.dataset.effectiveTheme") == "light"
    page.click("#theme-toggle")
    assert page.evaluate("document.documentElement.dataset.effectiveTheme") == "dark"
    page.reload()
    page.wait_for_selector("body[data-ready=true]")
    assert page.evaluate("document.documentElement.dataset.effectiveTheme") == "dark"
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(21, 23, 26)", background
    # Keyboard only: the skip link leads to the composer; Enter sends.
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.className") == "skip-link"
    page.keyboard.press("Enter")
    page.keyboard.type("typed with the keyboard")
    page.keyboard.press("Enter")
    page.wait_for_selector(".msg.assistant[data-outcome=ok]")
    assert page.locator(".msg.user .msg-body").inner_text() == "typed with the keyboard"
    # A markdown reply with code: rendered, highlighted, themed.
    sid = page.url.split("session=")[1]
    markdown = (
        "Here is a **function** with a list:\n\n- it returns a *string*\n- it has no arguments\n\n"
        "```python\ndef hello():\n    # greet\n    return 'world'\n```\n"
    )
    page.route(
        "**/api/chat_stream",
        lambda route: fulfil_sse(
            route,
            sse(
                {"type": "model_info", "label": "Offline demo model"},
                {"delta": markdown},
                {"type": "metrics", "data": {"total_time": 0.8, "output_tokens": 31, "tokens_per_second": 38.7}},
                {"type": "chat_terminal", "data": {"status": "done"}},
            ),
            sid,
        ),
    )
    page.fill("#input", "show me some code")
    page.keyboard.press("Enter")
    page.wait_for_function("() => document.querySelectorAll('.msg.assistant[data-outcome=ok]').length == 2")
    code = page.locator(".msg.assistant pre code").last
    assert code.locator(".hljs-keyword").first.inner_text() == "def"
    assert page.locator(".msg.assistant strong").last.inner_text() == "function"
    shot(page, "11-dark-theme")


def test_phone_sized_chat(server, page_factory):
    page = page_factory(width=390, height=844, is_mobile=True, has_touch=True)
    open_app(page, server.url)
    page.fill("#input", "hello from a phone")
    page.click("#send")
    page.wait_for_selector(".msg.assistant[data-outcome=ok]")
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    box = page.locator("#send").bounding_box()
    assert box["x"] + box["width"] <= 390 and box["y"] + box["height"] <= 844
    shot(page, "12-phone-chat")


def test_api_conversations_are_out_of_the_list_until_the_toggle_shows_them(server, page):
    made = requests.post(server.url + "/v1/responses", json={"model": "demo/odysseus-demo", "input": "from a script"})
    api_session = made.headers["X-Odysseus-Session-Id"]
    open_app(page, server.url)
    page.fill("#input", "a chat of my own")
    page.press("#input", "Enter")
    page.wait_for_selector(".msg.assistant[data-outcome=ok]")
    own = next(s["id"] for s in sessions(server))
    page.wait_for_selector(f".session[data-session-id='{own}']")
    assert page.locator(f".session[data-session-id='{api_session}']").count() == 0
    page.check("#api-sessions")
    page.wait_for_selector(f".session[data-session-id='{api_session}']")
    assert page.locator(f".session[data-session-id='{own}']").count() == 0
    page.click(f".session[data-session-id='{api_session}'] .open")
    page.wait_for_selector(".msg.assistant[data-outcome=ok]")
    assert page.locator(".msg.user").first.inner_text().startswith("from a script")
    page.reload()  # the choice is remembered
    page.wait_for_selector("body[data-ready=true]")
    assert page.is_checked("#api-sessions")
    page.uncheck("#api-sessions")
    page.wait_for_selector(f".session[data-session-id='{own}']")
    assert page.locator(f".session[data-session-id='{api_session}']").count() == 0
