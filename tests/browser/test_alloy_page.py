"""Agent Alloy in the page: the workflow picker and screen, and delegation cards live and after a reload.

A real server and one fake OpenAI server answering each agent from its own script
(tests/alloy_fakes.py). The cards a live turn built must look exactly the same when the
reply is rebuilt from the saved history: nested cards, streamed text, tool rows, status,
tokens and time, a stopped delegation, and an approval asked by a specialist.
"""

from __future__ import annotations

import sys
import os

import pytest
import requests

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from alloy_fakes import AgentScripts, FakeProvider, delegate, make_agent, make_workflow, stall, text, tools  # noqa: E402
from browser_helpers import open_app, shot  # noqa: E402
from liveserver import LiveServer  # noqa: E402

CARDS = """() => [...document.querySelectorAll('#messages .msg.assistant')].map(m => ({
  text: m.querySelector('.msg-body').innerText.trim(),
  cards: [...m.querySelectorAll('.delegation')].map(c => ({
    id: c.dataset.delegationId, agent: c.dataset.agent, status: c.dataset.status,
    parent: c.parentElement.closest('.delegation')?.dataset.delegationId || null,
    head: c.querySelector('.delegation-head').innerText,
    task: c.querySelector(':scope > .delegation-task').textContent,
    text: c.querySelector(':scope > .delegation-text').textContent,
    tools: [...c.querySelectorAll(':scope > .delegation-tools > .delegation-tool')].map(t => [
      t.className, t.querySelector('summary').innerText, t.querySelector('pre').textContent]),
    error: c.querySelector(':scope > .delegation-error').textContent})),
  approvals: [...m.querySelectorAll('.approval-card')].map(c => [c.dataset.agent || '', c.innerText]),
  outcome: m.dataset.outcome || '',
}))"""


@pytest.fixture(scope="module")
def scripts():
    return AgentScripts()


@pytest.fixture(scope="module")
def alloy_server(scripts, tmp_path_factory):
    fake = FakeProvider(chooser=scripts)
    server = LiveServer(
        str(tmp_path_factory.mktemp("alloypage")),
        {
            "ODYSSEUS_AUTH": "none",
            "OPENAI_BASE_URL": fake.url + "/v1",
            "OPENAI_API_KEY": "sk-x",
            "OPENAI_MODEL": "fake-1",
            "ODYSSEUS_AGENT_TOOLS": "update_plan,shell",
            "ODYSSEUS_AGENT_APPROVAL_TOOLS": "shell",
            "ODYSSEUS_ALLOY_MAX_DEPTH": "2",
            "ODYSSEUS_HEARTBEAT_INTERVAL": "0.5",
            "ODYSSEUS_EVICT_GRACE": "30",
        },
    ).start()
    for agent_id in ("chief_boss", "alpha_one", "beta_two", "shell_runner"):
        make_agent(
            server.url, agent_id, f"You are {agent_id}.", **({"tools": ["shell"]} if agent_id == "shell_runner" else {})
        )
    yield server
    server.stop()
    fake.close()


@pytest.fixture
def team(alloy_server, scripts):
    scripts.reset()
    return make_workflow(alloy_server.url, "team", "chief_boss", ["alpha_one", "beta_two", "shell_runner"])


def pick_team(page, url):
    open_app(page, url)
    page.click("#chat-menu")  # the header's menu lists the workflows; picking one selects the Workflow mode
    page.click(".popup-menu .menu-workflow:has-text('team')")
    assert page.is_checked("input[name=mode][value=workflow]") and page.input_value("#workflow-picker") == "team"


def send(page, message):
    page.fill("#input", message)
    page.press("#input", "Enter")


def wait_done(page, count=1):
    page.wait_for_function(
        "n => document.querySelectorAll('.msg.assistant[data-outcome]').length >= n && !document.querySelector("
        "'.msg.assistant.streaming')",
        arg=count,
        timeout=30000,
    )


def reload_same(page):
    live = page.evaluate(CARDS)
    page.reload()
    page.wait_for_selector("body[data-ready=true]")
    replayed = page.evaluate(CARDS)
    assert live == replayed, f"live {live}\nhistory {replayed}"
    return live


def test_delegation_cards_stream_live_nest_and_look_the_same_after_a_reload(alloy_server, scripts, team, page):
    scripts.script(
        "chief_boss",
        tools(delegate("c_a", "alpha_one", "Research the topic."), delegate("c_b", "beta_two", "Plan the write-up.")),
        text("Here is the combined answer."),
    )
    scripts.script(
        "alpha_one",
        tools(delegate("n1", "shell_runner", "Check one fact.")),
        text(*[f"alpha{i} " for i in range(10)], delay=0.12),
    )
    scripts.script(
        "beta_two",
        tools(("p1", "update_plan", {"steps": [{"step": "outline", "status": "completed"}]})),
        text("plan ", "ready", delay=0.1),
    )
    scripts.script("shell_runner", text("fact ", "checked", delay=0.1))
    pick_team(page, alloy_server.url)
    send(page, "Write a report together")
    page.wait_for_selector(".delegation[data-status=running]")  # a card shows while its specialist works
    page.wait_for_selector(".delegation[data-agent=alpha_one] .delegation-children .delegation")  # nested
    wait_done(page)
    shot(page, "alloy-delegation-cards")
    view = page.evaluate(CARDS)[0]
    cards = {(c["agent"], c["task"]): c for c in view["cards"]}
    alpha = cards[("alpha_one", "Research the topic.")]
    nested = cards[("shell_runner", "Check one fact.")]
    planner = cards[("beta_two", "Plan the write-up.")]
    assert alpha["status"] == "success" and alpha["text"] == "".join(f"alpha{i} " for i in range(10))
    assert nested["parent"] == alpha["id"] and nested["text"] == "fact checked"
    assert planner["parent"] is None and planner["tools"][0][0] == "delegation-tool ok"
    assert "update_plan" in planner["tools"][0][1]
    assert "done" in alpha["head"] and " in · " in alpha["head"] and " s" in alpha["head"]
    assert view["text"] == "Here is the combined answer."
    reload_same(page)


def test_a_stopped_delegation_and_a_specialist_approval_look_the_same_after_a_reload(alloy_server, scripts, team, page):
    scripts.script("chief_boss", tools(delegate("s1", "alpha_one", "Work for a long time.")))
    scripts.script("alpha_one", stall("still ", "working"))
    pick_team(page, alloy_server.url)
    send(page, "Start something long")
    page.wait_for_function(
        "() => document.querySelector('.delegation .delegation-text')?.textContent === 'still working'"
    )
    page.click("#send")  # Stop
    wait_done(page)
    stopped = page.evaluate(CARDS)[0]
    assert stopped["outcome"] == "stopped" and stopped["cards"][0]["status"] == "stopped"
    reload_same(page)

    scripts.script("chief_boss", tools(delegate("w1", "shell_runner", "Write the file.")), text("All written."))
    scripts.script("shell_runner", tools(("sh1", "shell", {"command": "echo from-the-page"})), text("Written."))
    send(page, "Write the file")
    page.wait_for_selector(".approval-card[data-agent=shell_runner]")
    wait_done(page, 2)
    waiting = page.evaluate(CARDS)[1]
    assert waiting["cards"][0]["status"] == "awaiting_approval"
    assert "Asked by the specialist shell_runner" in waiting["approvals"][0][1]
    shot(page, "alloy-specialist-approval")
    reload_same(page)
    page.click(".approval-card[data-agent=shell_runner] button.approve")
    wait_done(page, 3)
    resumed = page.evaluate(CARDS)[-1]
    assert resumed["cards"][0]["status"] == "success" and resumed["cards"][0]["agent"] == "shell_runner"
    assert resumed["cards"][0]["tools"][0][2].strip() == "from-the-page"
    assert resumed["text"] == "All written."
    reload_same(page)


def test_the_workflow_screen_creates_and_edits_a_workflow(alloy_server, scripts, page):
    requests.delete(alloy_server.url + "/api/alloy/workflows/writers", timeout=10)
    open_app(page, alloy_server.url)
    page.click("#chat-menu")
    page.click(".popup-menu .menu-workflows")
    page.click("button.wf-new")
    page.fill("input[name=name]", "Writers")
    page.fill("input[name=id]", "writers")
    page.select_option("select[name=supervisor]", "chief_boss")
    page.click("button.primary[type=submit]")
    page.wait_for_selector(".wf-error:not(:empty)")  # no specialist yet: the server's message is shown
    assert "at least one specialist" in page.inner_text(".wf-error")
    assert requests.get(alloy_server.url + "/api/alloy/workflows/writers", timeout=10).status_code == 404
    page.check(".wf-member[data-agent-id=alpha_one] input[type=checkbox]")
    page.fill(".wf-member[data-agent-id=alpha_one] input[name=hint]", "drafts text")
    page.click("button.primary[type=submit]")
    page.wait_for_function("() => document.querySelector('#workflow-picker').value === 'writers'")
    saved = requests.get(alloy_server.url + "/api/alloy/workflows/writers", timeout=10).json()["workflow"]
    assert saved["supervisor_agent_id"] == "chief_boss"
    assert saved["members"][1] == {"agent_id": "alpha_one", "role": "specialist", "delegation_hint": "drafts text"}

    page.click("#chat-menu")
    page.click(".popup-menu .menu-workflows")
    page.click(".workflow-list li[data-workflow-id=writers] button.wf-edit")
    assert page.is_checked(".wf-member[data-agent-id=alpha_one] input[type=checkbox]")
    page.check(".wf-member[data-agent-id=beta_two] input[type=checkbox]")
    page.click("button.primary[type=submit]")
    page.wait_for_selector("#modal:not([open])", state="attached")
    page.wait_for_function("() => !document.querySelector('#modal').open")
    saved = requests.get(alloy_server.url + "/api/alloy/workflows/writers", timeout=10).json()["workflow"]
    assert [m["agent_id"] for m in saved["members"]] == ["chief_boss", "alpha_one", "beta_two"]
    page.reload()
    page.wait_for_selector("body[data-ready=true]")
    assert page.input_value("#workflow-picker") == "writers"  # remembered across reloads
