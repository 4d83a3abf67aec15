"""The page says, in agent mode, when the code tools are off and why (from /api/code-tools)."""

from __future__ import annotations


def _open(page, server):
    page.goto(server.url + "/")
    page.wait_for_selector("body[data-ready='true']")


def test_missing_bubblewrap_shows_a_short_notice_in_agent_mode(server_factory, page):
    server = server_factory(
        env={"ODYSSEUS_AGENT_TOOLS": "shell,run_python", "ODYSSEUS_SANDBOX_BWRAP": "/nonexistent/bwrap"}
    )
    _open(page, server)
    notice = page.locator("#code-tools-notice")
    page.check("input[name='mode'][value='chat']", force=True)
    assert notice.is_hidden()
    page.check("input[name='mode'][value='agent']", force=True)
    assert notice.is_visible()
    assert "Code tools are off" in notice.inner_text() and "bubblewrap not found" in notice.inner_text()
    page.check("input[name='mode'][value='chat']", force=True)
    assert notice.is_hidden()


def test_no_notice_when_the_sandbox_works(server_factory, page):
    server = server_factory(env={"ODYSSEUS_AGENT_TOOLS": "shell,run_python"})
    _open(page, server)
    page.check("input[name='mode'][value='agent']", force=True)
    assert page.locator("#code-tools-notice").is_hidden()
