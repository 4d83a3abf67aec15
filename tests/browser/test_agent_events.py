"""Agent events the scripted model cannot easily produce (fallback, images, every guard at once,
ui_control) and stream errors, injected as scripted SSE (page.route). Approvals, Continue and
exhibits against the real server: test_agent_real.py."""

from __future__ import annotations

import requests
from browser_helpers import fulfil_sse, open_app, shot, sse

PNG = (
    "data:image/png;base64,"
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)

AGENT_TURN = sse(
    {"type": "model_info", "label": "Scripted agent", "route": "b/y"},
    {"type": "fallback", "requested": "a/x", "answered": "b/y", "reason": "a/x: connection refused"},
    {"type": "agent_prep", "data": {"tools_ms": 12}},
    {"type": "agent_step", "round": 1},
    {
        "type": "plan_update",
        "data": {
            "steps": [{"title": "List files", "status": "in_progress"}, {"title": "Clean up", "status": "pending"}]
        },
    },
    {"delta": "I will list the files."},
    {"type": "tool_start", "tool": "shell", "command": "ls", "full_command": "ls -la /srv", "round": 1},
    {"type": "tool_progress", "tool": "shell", "message": "reading directory", "elapsed": 1.0, "round": 1},
    {"type": "tool_output", "tool": "shell", "command": "ls", "output": "a.txt\nb.txt", "exit_code": 0},
    {"type": "tool_start", "tool": "python", "command": "boom()", "round": 1},
    {"type": "tool_output", "tool": "python", "command": "boom()", "output": "NameError", "exit_code": 1},
    {"type": "generated_image", "url": PNG, "prompt": "a single dot"},
    {"type": "ui_control", "data": {"action": "notify", "message": "Hello from the agent"}},
    {"type": "budget_exceeded", "limit": 10, "used": 10},
    {"type": "loop_breaker_triggered", "tool": "shell", "repeats": 3, "signature": "shell:ab", "rounds": [1, 2, 3]},
    {"type": "intent_nudge_exhausted", "nudges": 2},
    {"type": "rounds_exhausted", "rounds": 8},
    {"delta": "Now I need to delete a file."},
    {
        "type": "ask_user",
        "data": {
            "kind": "tool_approval",
            "approval_id": "ap1",
            "tool": "shell",
            "call": {"name": "shell", "arguments": {"command": "rm a.txt"}},
        },
    },
    {"type": "usage", "data": {"input_tokens": 12, "output_tokens": 40}},
    {"type": "metrics", "data": {"total_time": 2.5, "output_tokens": 40, "tokens_per_second": 16, "cost": 0.0012}},
    {"type": "message_saved", "message_id": 999, "role": "assistant"},
    {"type": "agent_terminal", "data": {"status": "awaiting_approval", "message_id": 999}},
)


def scripted(page, sid, script):
    """Route /api/chat_stream to script(body) and return the list of request bodies seen."""
    bodies = []

    def handle(route):
        body = route.request.post_data_json
        bodies.append(body)
        fulfil_sse(route, script(body), sid)

    page.route("**/api/chat_stream", handle)
    return bodies


def new_session(server) -> str:
    return requests.post(server.url + "/api/sessions", json={"title": "Scripted"}, timeout=5).json()["id"]


def test_agent_events_render_in_their_regions(server, page):
    sid = new_session(server)
    bodies = scripted(page, sid, lambda body: AGENT_TURN)
    open_app(page, server.url, sid)
    page.click(".mode-switch label:has(input[value=agent])")
    page.fill("#input", "tidy the folder")
    page.press("#input", "Enter")
    reply = page.locator(".msg.assistant").first
    page.wait_for_selector(".approval-card[data-approval-id=ap1]")
    page.wait_for_selector(".msg.assistant[data-outcome=ok]")
    assert bodies[0]["mode"] == "agent" and bodies[0]["session"] == sid
    assert reply.locator(".model-label").inner_text() == "Scripted agent"
    assert "Answered by b/y instead of a/x" in reply.locator(".fallback-note").inner_text()
    # agent_prep / agent_step are progress on the status line only (history has no such blocks)
    assert reply.locator(".status-line").inner_text() == ""
    assert reply.locator(".plan-step").all_inner_texts() == ["List files", "Clean up"]
    rows = reply.locator(".msg-body .tool-row")  # they ran after the first text: drawn after it
    assert rows.count() == 2 and reply.locator(".agent-activity .tool-row").count() == 0
    assert "ok" in rows.nth(0).get_attribute("class") and "failed" in rows.nth(1).get_attribute("class")
    assert rows.nth(0).locator(".tool-output").text_content() == "a.txt\nb.txt"
    assert rows.nth(0).locator(".tool-full").text_content() == "ls -la /srv"
    assert rows.nth(1).locator(".tool-status").inner_text() == "exit 1"
    assert reply.locator(".generated-image img").get_attribute("src") == PNG
    assert page.inner_text("#toast") == "Hello from the agent"
    # [issue 35] the text keeps its order with the tool rows: text, the two rows, text
    order = reply.locator(".msg-body > *").evaluate_all(
        "nodes => nodes.map(n => n.classList.contains('tool-row') ? 'row:' + n.querySelector('.tool-name').textContent"
        " : n.textContent.trim())"
    )
    assert order == ["I will list the files.", "row:shell", "row:python", "Now I need to delete a file."]
    notices = reply.locator(".agent-notices")
    assert "limit of 10 tool calls" in notices.locator(".budget-exceeded").inner_text()
    assert "repeating the same action (shell, 3 times)" in notices.locator(".loop-breaker").inner_text()
    assert "never actually did it" in notices.locator(".intent-nudge").inner_text()
    assert "all 8 rounds" in notices.locator(".rounds-exhausted").inner_text()
    assert reply.locator(".metrics").inner_text() == "2.5 s · 40 tokens · 12 in · 16 tok/s · $0.0012"
    assert reply.locator(".msg-actions .edit").count() == 1  # message_saved enabled edit/delete
    assert reply.locator(".approval-detail").inner_text() == "rm a.txt"
    shot(page, "06-agent-events-scripted")


def test_error_event_is_terminal_and_keeps_partial_text(server, page):
    sid = new_session(server)
    body = sse(
        {"delta": "Partial answer"},
        ("error", {"error": "Read timeout", "status": 504}),
        {"delta": " that must not show"},
        done=False,
    )
    scripted(page, sid, lambda _: body)
    open_app(page, server.url, sid)
    page.fill("#input", "anything")
    page.press("#input", "Enter")
    page.wait_for_selector(".msg.assistant[data-outcome=failed]")
    assert page.locator(".msg.assistant .msg-body").inner_text().strip() == "Partial answer"
    assert "Failed: Read timeout" in page.locator(".msg.assistant .status-line").inner_text()
    assert page.inner_text("#send") == "Send"


def test_ui_control_actions(server, page):
    sid = new_session(server)
    body = sse(
        {"type": "ui_control", "data": {"action": "set_theme", "theme": "dark"}},
        {"type": "ui_control", "data": {"action": "set_mode", "mode": "agent"}},
        {"type": "ui_control", "data": {"action": "prefill", "text": "next question"}},
        {"type": "ui_control", "data": {"action": "self_destruct"}},
        {"delta": "ok"},
        {"type": "chat_terminal", "data": {"status": "done"}},
    )
    scripted(page, sid, lambda _: body)
    open_app(page, server.url, sid)
    page.fill("#input", "go")
    page.press("#input", "Enter")
    page.wait_for_selector(".msg.assistant[data-outcome=ok]")
    assert page.evaluate("document.documentElement.dataset.effectiveTheme") == "dark"
    assert page.is_checked("input[name=mode][value=agent]")
    assert page.input_value("#input") == "next question"


def test_page_degrades_to_escaped_text_without_vendor_files(server, page):
    sid = new_session(server)
    page.route("**/static/vendor/**", lambda route: route.fulfill(status=404, body="missing"))
    body = sse(
        {"delta": '**bold** <b>tag</b> <img src=x onerror="window.__pwned=1">'},
        {"type": "chat_terminal", "data": {"status": "done"}},
    )
    scripted(page, sid, lambda _: body)
    open_app(page, server.url, sid)
    page.fill("#input", "go")
    page.press("#input", "Enter")
    page.wait_for_selector(".msg.assistant[data-outcome=ok]")
    text = page.locator(".msg.assistant .msg-body").inner_text()
    assert text.strip() == '**bold** <b>tag</b> <img src=x onerror="window.__pwned=1">'
    assert page.locator(".msg.assistant .msg-body b, .msg.assistant .msg-body img, .msg strong").count() == 0
    assert page.evaluate("window.__pwned") is None
