"""The set-up and sign-in pages in a real browser (Debian's chromium driven by Playwright)."""

from __future__ import annotations

from browser_helpers import open_app, shot

from odysseus.llm.demo import demo_reply

PASSWORD = "correct horse battery"


def status(page) -> dict:
    return page.evaluate("fetch('/api/auth/status').then(r => r.json())")


def test_setup_then_sign_out_and_in_again(server_factory, page):
    server = server_factory(env={"ODYSSEUS_AUTH": "password"})
    page.goto(server.url + "/login?next=/api/sessions")
    assert page.url.startswith(server.url + "/setup")  # a fresh install sends you to set-up
    page.fill("#username", "alice")
    page.fill("#password", PASSWORD)
    page.fill("#password2", PASSWORD + "typo")
    page.click("#auth-submit")
    assert "differ" in page.inner_text("#auth-error")
    page.fill("#password2", PASSWORD)
    with page.expect_navigation():
        page.click("#auth-submit")
    assert status(page)["user"]["username"] == "alice"

    # A same-origin fetch POST carries Origin, so it passes the cross-site check without the header;
    # auth.js's helpers add the X-Odysseus-CSRF header as well.
    created = page.evaluate("""fetch('/api/sessions', {method: 'POST', headers: {'Content-Type': 'application/json'},
                                 body: JSON.stringify({title: 'from the browser'})}).then(r => r.status)""")
    assert created == 201

    page.goto(server.url + "/login")  # signed in: straight on
    assert page.url == server.url + "/"
    page.goto(server.url + "/setup")  # set-up is closed now
    assert page.url.startswith(server.url + "/login") or page.url == server.url + "/"
    page.evaluate("fetch('/api/auth/logout', {method: 'POST'}).then(r => r.status)")
    assert status(page)["signed_in"] is False

    page.goto(server.url + "/api/sessions")  # an API route answers 401 JSON, it does not redirect
    assert '"sign in required"' in page.content()
    page.goto(server.url + "/login?next=/api/sessions")
    page.fill("#username", "alice")
    page.fill("#password", "wrong password")
    page.click("#auth-submit")
    page.wait_for_function("document.getElementById('auth-error').textContent.length > 0")
    assert "wrong username or password" in page.inner_text("#auth-error")
    page.fill("#password", PASSWORD)
    with page.expect_navigation():
        page.click("#auth-submit")
    assert page.url == server.url + "/api/sessions"
    assert "from the browser" in page.content()


def test_signed_in_chat_page_streams_with_the_csrf_token(server_factory, page):
    """In password mode the page sends X-Odysseus-CSRF from its meta tag and streams a reply."""
    server = server_factory(env={"ODYSSEUS_AUTH": "password", "ODYSSEUS_DEMO_TOKEN_DELAY": "0.005"})
    page.goto(server.url + "/")
    assert page.url.startswith(server.url + "/setup")
    page.fill("#username", "alice")
    page.fill("#password", PASSWORD)
    page.fill("#password2", PASSWORD)
    with page.expect_navigation():
        page.click("#auth-submit")
    open_app(page, server.url)
    token = page.get_attribute('meta[name="csrf-token"]', "content")
    assert token and token == status(page)["csrf_token"]
    sent = []
    page.on("request", lambda r: sent.append(r.headers) if r.url.endswith("/api/chat_stream") else None)
    page.fill("#input", "signed in hello")
    page.press("#input", "Enter")
    page.wait_for_selector(".msg.assistant[data-outcome=ok]", timeout=20000)
    assert sent and sent[0].get("x-odysseus-csrf") == token
    assert demo_reply("signed in hello")[:40] in page.inner_text(".msg.assistant")
    # The header names the signed-in user and offers Sign out (sent with the CSRF header).
    assert page.is_visible("#account") and page.inner_text("#account-name") == "alice"
    shot(page, "19-signed-in-header")
    with page.expect_request("**/api/auth/logout") as logout:
        with page.expect_navigation(url="**/login*"):
            page.click("#sign-out")
    assert logout.value.headers.get("x-odysseus-csrf") == token
    assert status(page)["signed_in"] is False
    page.goto(server.url + "/")
    assert page.url.startswith(server.url + "/login")
