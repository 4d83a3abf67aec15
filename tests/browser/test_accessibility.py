"""axe-core (node_modules/axe-core, a devDependency) over the chat page with a conversation, the
settings dialog open, and the login page, in light and dark: no violation of impact serious or
critical. Every rule runs; a failure prints each rule id with the nodes it found."""

from __future__ import annotations

import os

import pytest
import requests
from browser_helpers import ROOT, open_app
from conversation import seed_conversation, set_theme

AXE = os.path.join(ROOT, "node_modules", "axe-core", "axe.min.js")
PASSWORD = "correct horse battery"


def axe_violations(page) -> list[dict]:
    """Run axe on the page as it is; return the serious and critical violations, trimmed for a report."""
    if not page.evaluate("() => typeof window.axe === 'object'"):
        page.add_script_tag(path=AXE)
    found = page.evaluate(
        """async () => {
             const result = await axe.run(document, {resultTypes: ['violations']});
             return result.violations.filter(v => v.impact === 'serious' || v.impact === 'critical')
               .map(v => ({id: v.id, impact: v.impact, help: v.help,
                           nodes: v.nodes.slice(0, 6).map(n => [n.target.join(' '), n.failureSummary])}));
           }"""
    )
    return found


def report(where: str, violations: list[dict]) -> str:
    lines = [f"{where}: {len(violations)} serious or critical axe violation(s)"]
    for v in violations:
        lines.append(f"- {v['id']} ({v['impact']}): {v['help']}")
        for target, summary in v["nodes"]:
            lines.append(f"    {target}: {summary}")
    return "\n".join(lines)


@pytest.fixture(scope="module")
def axe_source():
    if not os.path.exists(AXE):
        pytest.skip("node_modules/axe-core is missing: run `make vendor` (npm ci)")
    return AXE


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_chat_page_and_settings_dialog_have_no_serious_violations(axe_source, server, page, theme):
    sid = seed_conversation(server)
    open_app(page, server.url, sid)
    set_theme(page, theme)
    page.wait_for_selector(".msg.assistant .tool-row")
    violations = axe_violations(page)
    assert not violations, report(f"chat page ({theme})", violations)
    page.click("#chat-menu")  # the header's menu, open
    page.wait_for_selector(".popup-menu .menu-rename")
    violations = axe_violations(page)
    assert not violations, report(f"header menu ({theme})", violations)
    page.keyboard.press("Escape")
    page.click("#open-settings")
    page.wait_for_selector("#modal[open] .settings")
    violations = axe_violations(page)
    assert not violations, report(f"settings dialog ({theme})", violations)


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_login_page_has_no_serious_violations_and_follows_the_theme(axe_source, server_factory, page, theme):
    server = server_factory(env={"ODYSSEUS_AUTH": "password"})
    setup = requests.post(server.url + "/api/auth/setup", json={"username": "alice", "password": PASSWORD}, timeout=10)
    assert setup.status_code == 201, setup.text
    page.goto(server.url + "/")  # not signed in: the login page
    page.wait_for_selector("#auth-form")
    assert "/login" in page.url
    set_theme(page, theme)
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    dark = sum(int(x) for x in background[background.index("(") + 1 : -1].split(",")[:3]) < 3 * 128
    assert dark == (theme == "dark"), background  # the login page follows theme.js's preference
    page.reload()  # and keeps it on the next load
    assert page.evaluate("document.documentElement.dataset.effectiveTheme") == theme
    violations = axe_violations(page)
    assert not violations, report(f"login page ({theme})", violations)
