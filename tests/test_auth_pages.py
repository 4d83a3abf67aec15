"""The set-up and sign-in pages in a real browser (Debian's chromium driven by Playwright)."""

from __future__ import annotations

import shutil

import pytest

sync_api = pytest.importorskip("playwright.sync_api")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium")

PASSWORD = "correct horse battery"


@pytest.fixture
def page():
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield browser.new_page()
        finally:
            browser.close()


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
