"""Agent mode in the page against the real server and a scripted OpenAI-compatible model.

Approvals (approve, deny, a pending card answered after a reload), exhibits of every element type
(desktop and phone), Continue after rounds_exhausted, the sidebar's running marks, and that a
reply rendered live looks the same after a reload (rendered from the saved history).
"""

from __future__ import annotations


import pytest
import requests
from browser_helpers import open_app, shot
from liveserver import LiveServer
from searxng import searxng
from scripted_model import ScriptedModel, reply, tool
from sseclient import post_chat

# One JSON snapshot of what each message shows: the parts a reload must reproduce.
SNAPSHOT = """() => [...document.querySelectorAll('#messages .msg')].map(m => ({
  role: m.classList.contains('user') ? 'user' : 'assistant',
  text: m.querySelector('.msg-body').innerText.trim(),
  label: m.querySelector('.model-label')?.innerText || '',
  plan: m.querySelector('.plan')?.innerText || '',
  activity: m.querySelector('.agent-activity')?.innerText || '',
  order: [...m.querySelectorAll('.msg-body > .segment, .msg-body > .tool-row')].map(n =>
          n.classList.contains('tool-row') ? 'row:' + n.dataset.callId : 'text:' + n.innerText.trim()),
  tools: [...m.querySelectorAll('.tool-row')].map(r => [r.dataset.callId, r.className,
          r.querySelector('summary').innerText, r.querySelector('.tool-output').textContent]),
  exhibits: [...m.querySelectorAll('.exhibit')].map(e => [e.dataset.exhibitId,
          e.querySelector('.exhibit-title')?.innerText || '', e.querySelectorAll('.exhibit-element').length]),
  notices: m.querySelector('.agent-notices')?.innerText || '',
  cards: [...m.querySelectorAll('.approval-card')].map(c => c.dataset.approvalId),
  disabled: [...m.querySelectorAll('.msg-body ~ * button:disabled, .exhibit button:disabled')].map(b => b.innerText),
  outcome: m.dataset.outcome || '',
  status: m.querySelector('.status-line')?.innerText || '',
}))"""

MERMAID = {"type": "mermaid", "content": "graph TD; A[Browser]-->B[Server]", "title": "Flow"}
CHOICE = {"type": "choice", "prompt": "Which DB?", "options": ["PostgreSQL", "Neo4j"]}
TABLE = {
    "type": "table",
    "columns": ["Model", "Cost"],
    "caption": "Prices",
    "rows": [["opus", 0.4], ["haiku", 0.02], ["sonnet", 0.1]],
}
CITATION = {
    "type": "citation",
    "sources": [
        {
            "label": "NLLB paper",
            "url": "https://example.org/nllb",
            "quote": "No language left behind.",
            "kind": "active",
            "source_type": "web",
        },
        {"label": "Archive one", "url": "https://example.org/a"},
        {"label": "Archive two"},
    ],
}


SEARCH_RESULTS = [
    {"url": "https://ithaca.example/one", "title": "Ithaca one", "content": "first"},
    {"url": "https://ithaca.example/two", "title": "Ithaca two", "content": "second"},
]


@pytest.fixture(scope="module")
def model():
    with ScriptedModel() as scripted:
        yield scripted


@pytest.fixture(scope="module")
def searx():
    with searxng(SEARCH_RESULTS) as url:
        yield url


def _env(model, **extra):
    return {
        "ODYSSEUS_AUTH": "none",
        "OPENAI_BASE_URL": model.url + "/v1",
        "OPENAI_API_KEY": "sk-x",
        "ODYSSEUS_HEARTBEAT_INTERVAL": "0.5",
        "ODYSSEUS_EVICT_GRACE": "30",
        **extra,
    }


@pytest.fixture(scope="module")
def agent_server(model, searx, tmp_path_factory):
    """One server for the approval and exhibit tests (each works in its own session)."""
    server = LiveServer(
        str(tmp_path_factory.mktemp("agentpage")),
        _env(
            model,
            ODYSSEUS_AGENT_TOOLS="shell,present_exhibit,update_plan,web_search",
            ODYSSEUS_WEB_SEARCH_BACKEND="searxng",
            ODYSSEUS_SEARXNG_URL=searx,
        ),
    ).start()
    yield server
    server.stop()


def script(model, *replies):
    with model.lock:
        model.replies = list(replies)
        model.requests.clear()


def agent_mode(page):
    page.click(".mode-switch label:has(input[value=agent])")


def send(page, text):
    page.fill("#input", text)
    page.press("#input", "Enter")


def replies_done(page, count):
    page.wait_for_function(
        "n => document.querySelectorAll('.msg.assistant[data-outcome]').length >= n && !document.querySelector("
        "'.msg.assistant.streaming')",
        arg=count,
        timeout=20000,
    )


def reload_and_compare(page):
    """Reload; the history rendering must show exactly what the live rendering showed."""
    live = page.evaluate(SNAPSHOT)
    page.reload()
    page.wait_for_selector("body[data-ready=true]")
    replayed = page.evaluate(SNAPSHOT)
    for index, (a, b) in enumerate(zip(live, replayed, strict=False)):
        assert a == b, f"message {index} differs after a reload:\nlive    {a}\nhistory {b}"
    assert len(live) == len(replayed)
    return live


def test_approve_deny_and_a_pending_card_after_reload(agent_server, model, page):
    plan = {"steps": [{"step": "Say hello", "status": "in_progress"}, {"step": "Report", "status": "pending"}]}
    script(
        model,
        reply("Let me plan.", [tool("call_plan", "update_plan", **plan)]),
        reply("Running it now.", [tool("call_sh1", "shell", command="echo hello-from-shell")]),
        reply("The shell said **hello**."),
        reply("", [tool("call_sh2", "shell", command="rm -rf ./precious")]),
        reply("OK, I left it alone."),
        reply("One more.", [tool("call_sh3", "shell", command="echo third-call")]),
        reply("Third call done."),
    )
    open_app(page, agent_server.url)
    assert page.is_hidden("#account")  # single-user mode: nobody to name, nothing to sign out of
    agent_mode(page)
    send(page, "say hello from the shell")
    card = page.wait_for_selector(".approval-card:not(.expired)")
    replies_done(page, 1)
    first = page.locator(".msg.assistant").first
    assert first.locator(".approval-card h4").inner_text() == "Allow shell?"
    assert first.locator(".approval-detail").inner_text() == "echo hello-from-shell"
    assert first.locator(".plan-step").all_inner_texts() == ["Say hello", "Report"]
    assert first.locator(".tool-row[data-call-id=call_plan].ok").count() == 1
    # the card stands for the turn's "[Waiting for your approval ...]" line: it is not shown twice (issue 35)
    assert "Waiting for your approval" not in first.locator(".msg-body").inner_text()
    assert "[Waiting for your approval to run shell" in page.evaluate(
        "() => document.querySelector('.msg.assistant').replyView.text"
    )  # (still in the saved text, for clients without cards)
    shot(page, "13-agent-approval-card")

    with page.expect_request("**/api/chat_stream") as answer:
        card.query_selector(".approve").click()
    body = answer.value.post_data_json
    assert body["tool_approval_decision"] == "approve" and body["mode"] == "agent" and body["session"]
    page.wait_for_selector(".msg.assistant:nth-of-type(3)[data-outcome=ok]")
    replies_done(page, 2)
    assert page.locator(".approval-card").count() == 0  # answered: the card is gone
    assert page.locator(".msg.user").count() == 1  # the answer is a continuation, not a user bubble
    second = page.locator(".msg.assistant").nth(1)
    assert second.locator(".approval-result").inner_text() == "Approved"
    row = second.locator(".tool-row[data-call-id=call_sh1]")
    assert "ok" in row.get_attribute("class")
    assert row.locator(".tool-output").text_content().strip() == "hello-from-shell"
    assert second.locator(".msg-body strong").inner_text() == "hello"
    assert model.requests[-1]["messages"][-2]["tool_calls"][0]["id"] == "call_sh1"

    send(page, "now delete the precious folder")
    page.wait_for_selector(".approval-card:not(.expired) .deny").click()
    replies_done(page, 4)
    last = page.locator(".msg.assistant").last
    assert last.locator(".approval-result.deny").inner_text() == "Denied"
    assert last.locator(".tool-row").count() == 0  # a denied call never ran
    assert last.locator(".msg-body").inner_text().strip() == "OK, I left it alone."
    denied = [m for m in model.requests[-1]["messages"] if m.get("tool_call_id") == "call_sh2"]
    assert "denied" in denied[0]["content"]

    send(page, "one more thing")
    page.wait_for_selector(".approval-card:not(.expired)")
    replies_done(page, 5)
    snapshot = reload_and_compare(page)
    assert [m["role"] for m in snapshot] == [
        "user",
        "assistant",
        "assistant",
        "user",
        "assistant",
        "assistant",
        "user",
        "assistant",
    ]
    # The pending card came back from history and still works.
    page.wait_for_selector(".approval-card:not(.expired) .approve").click()
    page.wait_for_function("() => document.body.innerText.includes('Third call done.')")
    replies_done(page, 6)
    assert page.locator(".tool-row[data-call-id=call_sh3] .tool-output").text_content().strip() == "third-call"
    reload_and_compare(page)


def test_stopped_and_failed_agent_replies_look_the_same_after_reload(agent_server, model, page):
    script(
        model,
        reply("Starting the long job.", [tool("call_long", "shell", command="echo started; sleep 20")]),
        reply(
            "Let me think 🤔 first.", [tool("call_pl", "update_plan", steps=[{"step": "think", "status": "pending"}])]
        ),
        reply(status=500, error_body='{"error": {"message": "model exploded"}}'),
    )
    open_app(page, agent_server.url)
    agent_mode(page)
    send(page, "run the long job")
    page.wait_for_selector(".approval-card:not(.expired) .approve").click()
    page.wait_for_selector(".tool-row.running[data-call-id=call_long]")
    page.click("#send")  # Stop, while the tool runs
    page.wait_for_selector(".msg.assistant[data-outcome=stopped]", timeout=20000)
    row = page.locator(".tool-row[data-call-id=call_long]")
    assert "cancelled" in row.get_attribute("class") and row.locator(".tool-status").inner_text() == "cancelled"
    send(page, "try again differently")
    page.wait_for_selector(".msg.assistant[data-outcome=failed]", timeout=20000)
    failed = page.locator(".msg.assistant").last
    assert "Failed:" in failed.locator(".status-line").inner_text()
    assert failed.locator(".tool-row[data-call-id=call_pl].ok").count() == 1
    # [issue 35] the tool row sits after the text that came before it, live and (below) after a reload;
    # the emoji outside the BMP checks the saved offset (code points) against the page's UTF-16 text
    order = page.evaluate(SNAPSHOT)[-1]["order"]
    assert order == ["text:Let me think 🤔 first.", "row:call_pl", "text:"]
    snapshot = reload_and_compare(page)
    assert snapshot[-1]["order"] == order
    assert [m["outcome"] for m in snapshot if m["role"] == "assistant"] == ["ok", "stopped", "failed"]


def first_column(page, column=1):
    return page.locator(".table-scroll tbody tr").evaluate_all(f"rows => rows.map(r => r.cells[{column}].textContent)")


def test_exhibits_live_history_and_phone(agent_server, model, page, page_factory):
    everything = {"id": "exh_all", "title": "Everything", "elements": [MERMAID, CHOICE, TABLE, CITATION]}
    script(
        model,
        reply("Searching first.", [tool("call_ws", "web_search", query="ithaca")]),
        reply("", [tool("call_ex", "present_exhibit", **everything)]),
        reply("Here is everything."),
        reply("You picked Neo4j."),
    )
    open_app(page, agent_server.url)
    agent_mode(page)
    send(page, "show me everything")
    replies_done(page, 1)
    reply_el = page.locator(".msg.assistant").first
    ids = reply_el.locator(".exhibit").evaluate_all("cards => cards.map(c => c.dataset.exhibitId)")
    assert ids == ["exh_src_call_ws", "exh_all"]
    # the auto-captured web citation: passive sources only, listed
    passive = reply_el.locator("[data-exhibit-id=exh_src_call_ws] .sources.passive li a")
    assert passive.evaluate_all("links => links.map(a => a.href)") == [
        "https://ithaca.example/one",
        "https://ithaca.example/two",
    ]
    card = reply_el.locator("[data-exhibit-id=exh_all]")
    page.wait_for_selector("[data-exhibit-id=exh_all] .mermaid-canvas[data-rendered=true] svg", timeout=20000)
    # the labels survive sanitising (SVG text, not HTML in foreignObject)
    assert card.locator(".mermaid-canvas svg text").all_text_contents() == ["Browser", "Server"]
    # table: sorts on a header click
    assert first_column(page) == ["0.4", "0.02", "0.1"]
    card.locator("th button:text('Cost')").click()
    assert first_column(page) == ["0.02", "0.1", "0.4"]
    # citation: the active source folded out with its quote, the passive ones listed under it
    citation = card.locator(".exhibit-citation")
    assert citation.locator(".source.active").get_attribute("open") is not None
    assert citation.locator(".source.active blockquote").inner_text() == "No language left behind."
    assert citation.locator(".more-sources summary").inner_text() == "2 more sources"
    assert citation.locator(".sources.passive li").count() == 2
    card.evaluate("c => c.scrollIntoView({block: 'start'})")
    shot(page, "14-agent-exhibits")
    reload_and_compare(page)
    page.wait_for_selector("[data-exhibit-id=exh_all] .mermaid-canvas[data-rendered=true] svg", timeout=20000)

    # choice (after the reload, from history): the option is sent as the next message
    with page.expect_request("**/api/chat_stream") as sent:
        page.click("[data-exhibit-id=exh_all] button:text('Neo4j')")
    assert sent.value.post_data_json["message"] == "Neo4j" and sent.value.post_data_json["mode"] == "agent"
    replies_done(page, 2)
    assert page.locator(".msg.user .msg-body").all_inner_texts()[-1] == "Neo4j"
    assert model.requests[-1]["messages"][-1] == {"role": "user", "content": "Neo4j"}
    assert page.locator("[data-exhibit-id=exh_all] .choice-option:disabled").count() == 2
    snapshot = reload_and_compare(page)
    assert "Neo4j" in snapshot[1]["disabled"]  # settled the same way from history
    assert page.locator("[data-exhibit-id=exh_all] .choice-option.chosen").inner_text() == "Neo4j"

    # phone-sized: the table collapses to cards; Expand opens it in a modal
    phone = page_factory(width=390, height=844, is_mobile=True, has_touch=True)
    open_app(phone, agent_server.url, page.url.split("session=")[1])
    row = phone.locator("[data-exhibit-id=exh_all] .table-scroll tbody tr").first
    assert row.evaluate("r => getComputedStyle(r).display") == "block"
    assert row.locator("td").first.evaluate("td => getComputedStyle(td, '::before').content") == '"Model"'
    assert phone.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    phone.locator("[data-exhibit-id=exh_all] .exhibit-table-box").scroll_into_view_if_needed()
    shot(phone, "15-phone-exhibit-table-cards")
    phone.click("[data-exhibit-id=exh_all] .expand-table")
    phone.wait_for_selector("dialog#modal[open] table")
    assert phone.locator("dialog#modal .modal-title").inner_text() == "Prices"
    assert phone.locator("dialog#modal tbody tr").count() == 3
    shot(phone, "16-phone-table-modal")
    phone.keyboard.press("Escape")
    phone.wait_for_selector("dialog#modal:not([open])", state="attached")
    # the session list is a drawer: hidden until the menu button opens it
    assert not phone.is_visible("#sidebar") and phone.is_visible("#open-sidebar")
    phone.click("#open-sidebar")
    phone.wait_for_selector("#sidebar", state="visible")
    assert phone.get_attribute("#open-sidebar", "aria-expanded") == "true"
    shot(phone, "18-phone-sidebar")
    phone.keyboard.press("Escape")
    phone.wait_for_selector("#sidebar", state="hidden")


def test_continue_after_rounds_exhausted_and_running_marks(model, server_factory, page):
    server = server_factory(
        _env(
            model,
            ODYSSEUS_AGENT_TOOLS="shell,present_exhibit,update_plan",
            ODYSSEUS_AGENT_MAX_ROUNDS="1",
            ODYSSEUS_AGENT_APPROVAL_TTL="1.5",
        )
    )
    script(
        model,
        reply(
            "Step one.",
            [
                tool(
                    "call_p1",
                    "update_plan",
                    steps=[{"step": "one", "status": "completed"}, {"step": "two", "status": "pending"}],
                )
            ],
        ),
        reply("Step two, slowly: " + "tick " * 20, chunk_delay=0.1),
        reply("Other " * 12, chunk_delay=0.15),
    )
    open_app(page, server.url)
    agent_mode(page)
    send(page, "do two steps")
    replies_done(page, 1)
    box = page.locator(".agent-notices .rounds-exhausted")
    assert "all 1 rounds" in box.inner_text()
    assert "[Paused after 1 rounds" in page.locator(".msg.assistant .msg-body").first.inner_text()
    sid = page.url.split("session=")[1]

    with page.expect_request("**/api/chat_stream") as sent:
        box.locator(".continue").click()
    assert sent.value.post_data_json["continue"] is True and sent.value.post_data_json["message"] == "Continue"
    # while the continued run streams, the sidebar marks its session
    page.wait_for_selector(f".session.running[data-session-id='{sid}'] .run-dot")
    replies_done(page, 2)
    page.wait_for_selector(f".session[data-session-id='{sid}']:not(.running)")
    assert page.locator(".msg.assistant").last.locator(".msg-body").inner_text().startswith("Step two, slowly")
    assert box.locator(".continue").is_disabled()
    snapshot = reload_and_compare(page)
    assert (
        snapshot[1]["disabled"] == ["Continue"]
        and snapshot[2]["text"] == "Continue"
        and snapshot[3]["text"].startswith("Step two")
    )

    # A run started elsewhere (another tab) is marked from GET /api/agent/chat/runs, and cleared when it ends.
    other = requests.post(server.url + "/api/sessions", json={"title": "Elsewhere"}, timeout=5).json()["id"]
    stream = post_chat(server.url, "elsewhere", session=other, mode="chat", headers={"Connection": "close"})
    try:
        page.reload()
        page.wait_for_selector("body[data-ready=true]")
        page.wait_for_selector(f".session.running[data-session-id='{other}']")
        shot(page, "17-sidebar-running")
        assert page.locator(f".session.running[data-session-id='{sid}']").count() == 0
    finally:
        stream.events()
        stream.close()
    page.wait_for_selector(f".session[data-session-id='{other}']:not(.running)", timeout=15000)

    # An approval left unanswered past its expiry comes back from history without buttons.
    script(model, reply("", [tool("call_late", "shell", command="echo too-late")]))
    page.click("#new-chat")
    send(page, "ask and wait")
    page.wait_for_selector(".approval-card:not(.expired) .approve")
    page.wait_for_timeout(1600)
    page.reload()
    page.wait_for_selector("body[data-ready=true]")
    card = page.locator(".approval-card.expired")
    assert card.count() == 1 and card.locator("button").count() == 0
    assert "expired" in card.inner_text()
