"""Settings → MCP servers in Chromium against the real server (issue 34): an admin sees the configuration's
server read-only, adds a stdio server, tests it (its tools listed), edits it without seeing its secret,
uses its tool in an agent turn (the approval card names the server, the tool and the exact arguments; the
row names its server), sees its state, and removes it; a non-admin never sees the section."""

from __future__ import annotations

import os
import sys

import requests
from browser_helpers import shot
from liveserver import LiveServer
from scripted_model import ScriptedModel, reply, tool

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOSTILE = os.path.join(HERE, "mcp_servers", "hostile.py")
TIME_SERVER = os.path.join(os.path.dirname(sys.executable), "mcp-server-time")
SECRET = "env-secret-for-the-page-1357-ABCD"
PASSWORD = "admin-pass-1"


def _login(page, url, username, password):
    page.goto(url + "/login")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_selector("body[data-ready=true]")


def _open_settings(page):
    page.click("#open-settings")
    page.wait_for_selector("#settings-preferences")


def test_admin_adds_tests_edits_uses_and_removes_an_mcp_server(page_factory, tmp_path):
    config = tmp_path / "odysseus.toml"
    config.write_text(f'[mcp_servers.time]\ncommand = "{TIME_SERVER}"\nsandbox = false\n')
    with ScriptedModel() as model:
        server = LiveServer(
            str(tmp_path / "data"),
            {
                "ODYSSEUS_AUTH": "password",
                "ODYSSEUS_CONFIG": str(config),
                "OPENAI_BASE_URL": model.url + "/v1",
                "OPENAI_API_KEY": "sk-x",
                "ODYSSEUS_AGENT_TOOLS": "update_plan",
                "ODYSSEUS_MCP_START_TIMEOUT": "60",
                "ODYSSEUS_HEARTBEAT_INTERVAL": "0.5",
            },
        ).start()
        try:
            _run(page_factory, server, model)
        finally:
            server.stop()


def _run(page_factory, server, model):
    admin = requests.Session()
    admin.headers["Origin"] = server.url
    setup = admin.post(server.url + "/api/auth/setup", json={"username": "admin", "password": PASSWORD}, timeout=10)
    assert setup.status_code == 201
    made = admin.post(server.url + "/api/auth/users", json={"username": "bob", "password": "bob-pass-123"}, timeout=10)
    assert made.status_code == 201
    page = page_factory()
    page.on("dialog", lambda dialog: dialog.accept())
    _login(page, server.url, "admin", PASSWORD)
    _open_settings(page)
    section = "#settings-mcp"
    config_row = f"{section} .mcp-row[data-name=time]"
    page.wait_for_selector(config_row)
    assert "read-only" in page.inner_text(f"{config_row} .mcp-label")
    assert page.locator(f"{config_row} .edit-mcp").count() == 0
    assert "not started" in page.inner_text(f"{config_row} .mcp-state")
    page.click(f"{config_row} .test-mcp")
    page.wait_for_selector(f"{config_row} .test-result[data-kind=ok]", timeout=60000)
    assert "get_current_time" in page.inner_text(f"{config_row} .mcp-tools")

    # add a stdio server with a secret in its environment
    page.fill(f"{section} input[name=mcp_name]", "hostile")
    page.fill(f"{section} input[name=mcp_command]", sys.executable)
    page.fill(f"{section} textarea[name=mcp_args]", f"{HOSTILE}\nnormal")
    page.fill(f"{section} textarea[name=mcp_env]", f"SECRET={SECRET}")
    page.uncheck(f"{section} input[name=mcp_sandbox]")
    page.click(f"{section} .save-mcp")
    row = f"{section} .mcp-row[data-name=hostile]"
    page.wait_for_selector(row)
    assert page.inner_text(f"{row} .mcp-who") == "everyone"
    page.click(f"{row} .test-mcp")
    page.wait_for_selector(f"{row} .test-result[data-kind=ok]", timeout=60000)
    assert "echo — echo text" in page.inner_text(f"{row} .mcp-tools")
    shot(page, "40-settings-mcp")

    # edit: the secret is not shown; left empty it is kept
    page.click(f"{row} .edit-mcp")
    assert page.input_value(f"{section} textarea[name=mcp_env]") == "SECRET="
    assert "…ABCD" in page.inner_text(f"{section} .mcp-secrets-note")
    assert SECRET not in page.content() and SECRET[:-4] not in page.content()
    page.fill(f"{section} input[name=mcp_timeout]", "30")
    page.click(f"{section} .save-mcp")
    page.wait_for_selector(f"{section} .mcp-result[data-kind=ok]")
    listed = admin.get(server.url + "/api/admin/mcp-servers", timeout=10).json()["servers"]
    hostile = next(s for s in listed if s["name"] == "hostile")
    assert hostile["timeout"] == 30.0 and hostile["env"] == {"SECRET": {"set": True, "last4": "ABCD"}}

    # a bad server says why, in the row
    page.fill(f"{section} input[name=mcp_name]", "broken")
    page.fill(f"{section} input[name=mcp_command]", "/nonexistent/mcp-server")
    page.uncheck(f"{section} input[name=mcp_sandbox]")
    page.click(f"{section} .save-mcp")
    broken = f"{section} .mcp-row[data-name=broken]"
    page.wait_for_selector(broken)
    page.click(f"{broken} .test-mcp")
    page.wait_for_selector(f"{broken} .test-result[data-kind=error]", timeout=60000)
    assert "/nonexistent/mcp-server" in page.inner_text(f"{broken} .test-result")

    # its tool in an agent turn: the card names server, tool and the exact arguments; the row its server
    page.keyboard.press("Escape")
    with model.lock:
        model.replies = [
            reply("", [tool("call_e", "mcp__hostile__echo", text="<b>from the page</b>")]),
            reply("Echoed."),
        ]
        model.requests.clear()
    page.click(".mode-switch label:has(input[value=agent])")
    page.fill("#input", "echo something")
    page.press("#input", "Enter")
    card = page.wait_for_selector(".approval-card:not(.expired)", timeout=60000)
    assert card.query_selector("h4").inner_text() == "Allow echo from the MCP server hostile?"
    assert '"text": "<b>from the page</b>"' in card.query_selector(".approval-detail").inner_text()
    card.query_selector("button.approve").click()
    done = page.wait_for_selector(".tool-row.ok[data-server=hostile]", timeout=60000)
    assert done.query_selector(".tool-server").inner_text() == "MCP hostile"
    assert done.query_selector(".tool-name").inner_text() == "echo"
    assert done.query_selector(".tool-output").text_content() == "echo: <b>from the page</b>"  # shown as text
    assert page.locator(".tool-row b").count() == 0

    # its state after use, then remove it
    _open_settings(page)
    page.wait_for_selector(f"{row}[data-state=ready]")
    assert "ready" in page.inner_text(f"{row} .mcp-state")
    page.click(f"{row} .remove-mcp")
    page.wait_for_selector(row, state="detached")
    assert not any(
        s["name"] == "hostile" for s in admin.get(server.url + "/api/admin/mcp-servers", timeout=10).json()["servers"]
    )

    # a non-admin has no MCP section
    other = page_factory()
    _login(other, server.url, "bob", "bob-pass-123")
    _open_settings(other)
    other.wait_for_selector("#settings-tokens")
    assert other.locator("#settings-mcp").count() == 0
