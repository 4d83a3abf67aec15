"""Issue #20 in the page, against the real server: copy, LaTeX, footers on stopped replies, kept text,
titles, search, export/import, the settings screen, the demo's tool tour and the streaming self-test."""

from __future__ import annotations

import json
import re

import pytest
import requests
from browser_helpers import fulfil_sse, open_app, shot, sse
from bufferproxy import BufferingProxy
from fakeproviders import FakeProvider, Reply, openai_text

from odysseus.llm.demo import demo_reply


def send(page, text: str) -> None:
    page.fill("#input", text)
    page.press("#input", "Enter")


def session_of(page) -> str:
    page.wait_for_function("() => /session=/.test(location.search)")
    return re.search(r"session=([\w-]+)", page.url).group(1)


def last_reply_source(page) -> str:
    return page.evaluate("[...document.querySelectorAll('.msg.assistant')].at(-1).replyView.text")


def post_chat(server, message: str, **extra) -> str:
    with requests.post(
        server.url + "/api/chat_stream",
        json={"message": message, **extra},
        headers={"Origin": server.url},
        stream=True,
        timeout=60,
    ) as response:
        assert response.status_code == 200, response.text
        for _ in response.iter_content(chunk_size=None):
            pass
        return response.headers["X-Odysseus-Session-Id"]


@pytest.fixture
def fast(server_factory):
    """A server whose demo model answers quickly."""
    return server_factory({"ODYSSEUS_DEMO_TOKEN_DELAY": "0.002"})


# ---------------------------------------------------------------- replies


def test_demo_reply_shows_markdown_code_table_math_and_copy_copies_the_source(fast, page_factory):
    page = page_factory(permissions=["clipboard-read", "clipboard-write"])
    open_app(page, fast.url)
    send(page, "show me")
    page.wait_for_selector(".msg.assistant[data-outcome=ok]")
    reply = page.locator(".msg.assistant")
    page.wait_for_selector(".msg.assistant .katex")  # KaTeX loads on the first formula
    assert reply.locator("pre code.language-python").count() == 1
    assert reply.locator("table tr").count() == 5
    assert reply.locator(".katex").count() == 1  # $e^{i\pi} + 1 = 0$ in the table
    assert "Offline demo model" in reply.locator(".model-label").inner_text()
    reply.hover()
    reply.locator(".copy-message").click()
    page.wait_for_selector(".msg.assistant .copy-message:text('Copied')")
    assert page.evaluate("navigator.clipboard.readText()") == demo_reply("show me")
    page.locator(".msg.user").hover()
    page.locator(".msg.user .copy-message").click()
    assert page.evaluate("navigator.clipboard.readText()") == "show me"
    shot(page, "20-demo-markdown")


MATH = (
    "Inline $a_1 + b_1$ and \\(x^2\\), display:\n\n$$\\int_0^1 x\\,dx = \\frac{1}{2}$$\n\n"
    "\\[\\sum_{i=1}^n i\\]\n\nCode stays: `$not_math$` and\n\n```\nprice = $5 + $6\n$$ x $$\n```\n\n"
    "Money: $5 and $6 is not math; escaped \\$7."
)


def test_latex_renders_with_katex_and_code_is_untouched(fast, page):
    open_app(page, fast.url)
    page.route(
        "**/api/chat_stream",
        lambda route: fulfil_sse(
            route,
            sse({"type": "delta", "delta": MATH}, {"type": "chat_terminal", "data": {"status": "done"}}),
            "s_math",
        ),
    )
    send(page, "math please")
    page.wait_for_selector(".msg.assistant[data-outcome=ok]")
    body = page.locator(".msg.assistant .segment")
    page.wait_for_selector(".msg.assistant .segment .katex")  # KaTeX loads on the first formula
    assert body.locator(".katex").count() == 4
    assert body.locator(".katex-display").count() == 2
    assert body.locator("em").count() == 0  # markdown did not eat a_1 + b_1 as emphasis
    assert body.locator("p code").inner_text() == "$not_math$"
    assert body.locator("pre code").inner_text().strip() == "price = $5 + $6\n$$ x $$"
    text = body.inner_text()
    assert "Money: $5 and $6 is not math; escaped $7." in text
    shot(page, "21-latex")


def test_stopped_reply_keeps_its_footer_after_reload(server, page):
    open_app(page, server.url)
    send(page, "stop me with a footer")
    page.wait_for_function("() => (document.querySelector('.msg.assistant .msg-body')?.innerText || '').length > 30")
    page.click("#send")
    page.wait_for_selector(".msg.assistant[data-outcome=stopped]")
    footer = page.locator(".msg.assistant .metrics").inner_text()
    assert re.search(r"\d+(\.\d)? s", footer) and "tokens" in footer, footer
    page.reload()
    page.wait_for_selector(".msg.assistant[data-outcome=stopped]")
    assert re.search(r"\d+(\.\d)? s", page.locator(".msg.assistant .metrics").inner_text())


def test_enter_while_a_reply_runs_says_why_and_keeps_the_text(server, page):
    open_app(page, server.url)
    send(page, "a long one")
    page.wait_for_selector("#send[data-state=stop]")
    page.fill("#input", "my next question")
    page.press("#input", "Enter")
    assert "still being written" in page.inner_text("#composer-note")
    assert page.input_value("#input") == "my next question"
    assert page.locator(".msg.user").count() == 1
    page.wait_for_selector(".msg.assistant[data-outcome=ok]", timeout=30000)
    page.press("#input", "Enter")
    page.wait_for_function("() => document.querySelectorAll('.msg.user').length === 2")
    assert page.input_value("#input") == ""


def test_too_long_and_refused_messages_stay_in_the_box(server_factory, page):
    server = server_factory({"ODYSSEUS_MAX_MESSAGE_CHARS": "50", "ODYSSEUS_DEMO_TOKEN_DELAY": "0.002"})
    posts = []
    page.on("request", lambda r: posts.append(r.url) if r.method == "POST" and "chat_stream" in r.url else None)
    open_app(page, server.url)
    assert page.get_attribute("body", "data-max-message-chars") == "50"
    long_text = "x" * 60
    page.fill("#input", long_text)
    assert page.inner_text("#char-count") == "60 / 50 characters"
    assert page.get_attribute("#char-count", "data-over") == "true"
    page.press("#input", "Enter")
    assert "the limit is 50" in page.inner_text("#composer-note")
    assert page.input_value("#input") == long_text and posts == []
    # The server refuses (here: a body too large): the text comes back with the server's reason.
    page.route(
        "**/api/chat_stream",
        lambda route: route.fulfill(
            status=413, content_type="application/json", body=json.dumps({"error": "request body too large"})
        ),
    )
    page.fill("#input", "fits the limit")
    page.press("#input", "Enter")
    page.wait_for_function("() => document.getElementById('input').value === 'fits the limit'")
    assert "request body too large" in page.inner_text("#composer-note")
    assert page.locator(".msg").count() == 0
    assert requests.get(server.url + "/api/sessions", timeout=5).json()["sessions"] == []


# ---------------------------------------------------------------- conversations


def test_title_is_a_clean_first_line_with_the_demo(fast, page):
    open_app(page, fast.url)
    send(page, "**Plan** a _weekend_ trip\nto Rome with `kids`")
    sid = session_of(page)
    page.wait_for_selector(f".session[data-session-id='{sid}'] .open:text-is('Plan a weekend trip')", timeout=20000)


def test_search_finds_a_word_from_an_old_chat_and_opens_it(fast, page):
    old = post_chat(fast, "Tell me about zebras and their stripes")
    post_chat(fast, "Something about <img src=x onerror=alert(1)> tags")
    post_chat(fast, "An unrelated chat about cooking pasta")
    open_app(page, fast.url)
    page.fill("#search", "zebr")
    page.wait_for_selector("#search-results .search-result")
    assert page.is_hidden("#session-list")
    results = page.locator("#search-results .search-result")
    assert {results.nth(i).get_attribute("data-session-id") for i in range(results.count())} == {old}
    assert page.locator("#search-results mark").first.inner_text().lower() == "zebras"
    page.fill("#search", "onerror")
    page.wait_for_selector("#search-results .search-result:has-text('onerror')")
    assert page.locator("#search-results img").count() == 0
    assert "<img" in page.locator("#search-results .result-snippet").first.inner_text()
    page.fill("#search", "zebras stripes")
    page.wait_for_function(
        "() => [...document.querySelectorAll('#search-results .search-result')]"
        ".every(r => !r.innerText.includes('onerror'))"
    )
    page.locator(f"#search-results .search-result[data-session-id='{old}'] button").first.click()
    page.wait_for_function(f"() => location.search.includes('{old}')")
    page.wait_for_selector(".msg.assistant[data-outcome=ok]")
    page.press("#search", "Escape")
    assert page.is_visible("#session-list")
    shot(page, "22-search")


def test_export_markdown_and_json_and_import_round_trips(fast, page):
    sid = post_chat(fast, "Export this conversation")
    open_app(page, fast.url, sid)
    page.wait_for_selector(".msg.assistant[data-outcome=ok]")
    with page.expect_download() as md:
        page.click("#chat-menu")  # the header's one menu
        page.click(".popup-menu .menu-export-md")
    text = open(md.value.path(), encoding="utf-8").read()
    assert text.startswith("# Export this conversation") and "## You\n\nExport this conversation" in text
    with page.expect_download() as js:
        page.click("#chat-menu")
        page.click(".popup-menu .menu-export-json")
    path = js.value.path()
    exported = json.load(open(path, encoding="utf-8"))
    assert [m["role"] for m in exported["messages"]] == ["user", "assistant"]
    page.set_input_files("#import-file", path)
    page.wait_for_function(f"() => location.search.includes('session=') && !location.search.includes('{sid}')")
    page.wait_for_selector(".msg.assistant[data-outcome=ok]")
    new_sid = session_of(page)
    messages = requests.get(f"{fast.url}/api/sessions/{new_sid}/messages", timeout=5).json()["messages"]
    assert [(m["role"], m["content"]) for m in messages] == [(m["role"], m["content"]) for m in exported["messages"]]
    assert last_reply_source(page) == demo_reply("Export this conversation")
    # A bad file is refused with a reason and stores nothing.
    before = len(requests.get(fast.url + "/api/sessions", timeout=5).json()["sessions"])
    bad = str(path) + ".bad.json"
    json.dump(dict(exported, version=99), open(bad, "w"))
    page.set_input_files("#import-file", bad)
    page.wait_for_selector("#toast:has-text('unsupported export version')")
    assert len(requests.get(fast.url + "/api/sessions", timeout=5).json()["sessions"]) == before


# ---------------------------------------------------------------- settings


@pytest.fixture
def recording_model():
    """An OpenAI-compatible model server that records what it is sent."""
    fake = FakeProvider(
        default=Reply(chunks=openai_text("Trip ", "to Rome", usage={"prompt_tokens": 3, "completion_tokens": 2}))
    )
    yield fake
    fake.close()


def test_settings_reach_the_model_and_the_page(server_factory, recording_model, page):
    server = server_factory(
        {
            "OPENAI_BASE_URL": recording_model.url + "/v1",
            "OPENAI_API_KEY": "sk-test",
            "OPENAI_MODEL": "m",
            "ODYSSEUS_TITLE_MODE": "model",
        }
    )
    open_app(page, server.url)
    page.click("#open-settings")
    page.wait_for_selector("#settings-preferences")
    page.fill("#settings textarea[name=system_prompt]", "Answer like a pirate.")
    page.fill("#settings input[name=temperature]", "0.3")
    page.select_option("#settings select[name=theme]", "dark")
    page.select_option("#settings select[name=default_mode]", "agent")
    page.uncheck("#settings input[name=memory_enabled]")
    page.click("#settings .save-preferences")
    page.wait_for_selector("#settings-preferences .result:text('Saved.')")
    assert page.get_attribute("html", "data-theme") == "dark"
    assert page.is_checked("input[name=mode][value=agent]")
    stored = requests.get(server.url + "/api/user/settings", timeout=5).json()["settings"]
    assert stored["memory_enabled"] is False and stored["system_prompt"] == "Answer like a pirate."
    page.keyboard.press("Escape")
    page.check("input[name=mode][value=chat]")
    send(page, "plan my trip")
    page.wait_for_selector(".msg.assistant[data-outcome=ok]")
    first = recording_model.posts[0].body
    assert first["messages"][0] == {"role": "system", "content": "Answer like a pirate."}
    assert first["temperature"] == 0.3
    # The model's answer became the title (a second, short request after the first reply).
    sid = session_of(page)
    page.wait_for_selector(f".session[data-session-id='{sid}'] .open:text-is('Trip to Rome')", timeout=20000)
    assert len(recording_model.posts) == 2
    # Reload: the saved theme and default mode stay.
    page.evaluate("localStorage.clear()")
    page.reload()
    page.wait_for_selector("body[data-ready=true]")
    assert page.get_attribute("html", "data-theme") == "dark"
    assert page.is_checked("input[name=mode][value=agent]")


def _login(page, url, username, password):
    page.goto(url + "/login")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")


def test_account_settings_password_tokens_and_admin(server_factory, page_factory):
    server = server_factory({"ODYSSEUS_AUTH": "password", "ODYSSEUS_DEMO_TOKEN_DELAY": "0.002"})
    assert (
        requests.post(
            server.url + "/api/auth/setup",
            json={"username": "admin", "password": "admin-pass-1"},
            headers={"Origin": server.url},
            timeout=10,
        ).status_code
        == 201
    )
    page = page_factory()
    page.on("dialog", lambda d: d.accept("bob-new-pass") if d.type == "prompt" else d.accept())
    _login(page, server.url, "admin", "admin-pass-1")
    page.wait_for_selector("body[data-ready=true]")
    page.click("#open-settings")
    page.wait_for_selector("#settings-admin .user-row")
    # tokens: create (shown once), it works, revoke
    page.fill("#settings input[name=token_name]", "script")
    page.click("#settings .create-token")
    secret = page.locator("#settings-tokens .secret").inner_text()
    assert secret.startswith("ody_")
    auth = {"Authorization": f"Bearer {secret}"}
    assert requests.get(server.url + "/api/sessions", headers=auth, timeout=5).status_code == 200
    page.click("#settings-tokens .token-row .revoke")
    page.wait_for_selector("#settings-tokens .token-row", state="detached")
    assert requests.get(server.url + "/api/sessions", headers=auth, timeout=5).status_code == 401
    # admin: create bob, sign-up on, make bob admin, reset his password, disable him
    page.fill("#settings input[name=new_username]", "bob")
    page.fill("#settings input[name=new_user_password]", "bob-pass-123")
    page.click("#settings .create-user")
    page.wait_for_selector("#settings-admin .user-row[data-username=bob]")
    page.check("#settings input[name=allow_signup]")
    page.wait_for_selector("#settings-admin .result:text('Sign-up is open.')")
    assert requests.get(server.url + "/api/auth/status", timeout=5).json()["signup_allowed"] is True
    bob = "#settings-admin .user-row[data-username=bob]"
    page.click(f"{bob} .toggle-admin")
    page.wait_for_selector(f"{bob} .user-state:text-is('admin')")
    page.click(f"{bob} .reset-password")
    page.wait_for_selector("#settings-admin .result:text('Password of bob reset.')")
    login = requests.post(
        server.url + "/api/auth/login",
        json={"username": "bob", "password": "bob-new-pass"},
        headers={"Origin": server.url},
        timeout=10,
    )
    assert login.status_code == 200
    page.click(f"{bob} .toggle-disabled")
    page.wait_for_selector(f"{bob} .user-state:text-is('admin, disabled')")
    refused = requests.post(
        server.url + "/api/auth/login",
        json={"username": "bob", "password": "bob-new-pass"},
        headers={"Origin": server.url},
        timeout=10,
    )
    assert refused.status_code == 403 and "disabled" in refused.json()["error"]
    # password change: the old one stops working
    page.fill("#settings input[name=current_password]", "admin-pass-1")
    page.fill("#settings input[name=new_password]", "admin-pass-2")
    page.click("#settings .change-password")
    page.wait_for_selector("#settings-password .result:text('Password changed')")
    assert (
        requests.post(
            server.url + "/api/auth/login",
            json={"username": "admin", "password": "admin-pass-2"},
            headers={"Origin": server.url},
            timeout=10,
        ).status_code
        == 200
    )
    shot(page, "23-settings-admin")


# ---------------------------------------------------------------- the demo in agent mode


def test_demo_tool_tour_plan_exhibit_and_approval_card(fast, page):
    open_app(page, fast.url)
    page.check("input[name=mode][value=agent]")
    send(page, "show me the tool demo")
    card = page.wait_for_selector(".approval-card", timeout=30000)
    assert page.locator(".plan-box li, .plan-box .plan-step").count() >= 4
    assert page.locator(".exhibits table").count() == 1
    assert "run_python" in card.inner_text()
    shot(page, "24-demo-approval")
    page.locator(".approval-card button", has_text=re.compile("^Approve$")).click()
    page.wait_for_function(
        "() => /whole agent loop/.test(document.querySelector('.msg.assistant:last-of-type')?.replyView?.text || '')",
        timeout=30000,
    )
    page.wait_for_selector(".msg.assistant:last-of-type[data-outcome=ok]")
    assert "Hello from the Odysseus demo!" in page.locator(".tool-row", has_text="run_python").last.text_content()
    assert page.locator(".plan-box").last.text_content().count("Sum up") == 1


# ---------------------------------------------------------------- the streaming self-test


def test_self_test_warns_behind_a_buffering_proxy_and_stays_quiet_without(fast, page_factory):
    direct = page_factory(stream_check=True)
    open_app(direct, fast.url)
    direct.wait_for_selector("body[data-stream-check]", timeout=20000)
    assert direct.get_attribute("body", "data-stream-check") == "ok"
    assert direct.is_hidden("#stream-warning")
    proxy = BufferingProxy(fast.url)
    try:
        behind = page_factory(stream_check=True)
        open_app(behind, proxy.url)
        behind.wait_for_selector("#stream-warning:not([hidden])", timeout=20000)
        warning = behind.inner_text("#stream-warning")
        assert "proxy_buffering off" in warning and "docs/deploy.md" in warning
        assert behind.get_attribute("body", "data-stream-check") == "buffered"
        shot(behind, "25-buffering-warning")
        # From the settings screen, on demand.
        behind.click("#stream-warning button")
        behind.click("#open-settings")
        behind.click("#settings .run-stream-check")
        behind.wait_for_selector(
            "#settings-stream .result[data-kind=error]:has-text('proxy_buffering off')", timeout=20000
        )
    finally:
        proxy.close()
