"""What the Settings screen's Agents section uses (issue 36): the tool list, and agents kept per user
with trimmed, length-limited names stored as text."""

from __future__ import annotations

import pytest
from apphelpers import close_app, two_users

from odysseus import create_app


@pytest.fixture
def users(tmp_path):
    """Alice (the admin) and Bob, signed in to one password-mode app whose code tools only admins get."""
    yield from two_users(str(tmp_path))


def test_the_tool_list_names_the_app_s_tools_and_the_document_tools(tmp_path):
    app = create_app(
        {"DATA_DIR": str(tmp_path), "PROVIDERS": [], "AUTH": "none", "AGENT_TOOLS": "web_search,update_plan"}
    )
    try:
        tools = app.test_client().get("/api/agent/tools").json["tools"]
    finally:
        close_app(app)
    names = [tool["name"] for tool in tools]
    assert names == [
        "web_search",
        "update_plan",
        "create_document",
        "update_document",
        "edit_document",
        "suggest_document",
    ]
    assert all(tool["description"] and tool["needs_approval"] is False for tool in tools)


def test_the_tool_list_leaves_out_code_tools_the_user_may_not_use(users):
    alice, bob = users
    admin_tools = {tool["name"] for tool in alice.call("GET", "/api/agent/tools").json["tools"]}
    user_tools = {tool["name"] for tool in bob.call("GET", "/api/agent/tools").json["tools"]}
    sandbox = alice.client.application.extensions["odysseus.agent"].sandbox.to_dict()
    if sandbox["available"]:
        assert {"run_python", "shell"} <= admin_tools
    assert not {"run_python", "shell"} & user_tools  # only admins get the code tools by default
    assert user_tools <= admin_tools and "web_search" in user_tools


def test_an_agent_made_as_the_page_makes_it_round_trips(client):
    made = client.post(
        "/api/agents",
        json={"name": "  Research \n helper ", "system_prompt": "Be brief.", "model": None, "tools": ["web_search"]},
    )
    assert made.status_code == 201, made.json
    agent = made.json
    assert (agent["name"], agent["tools"], agent["model"]) == ("Research helper", ["web_search"], None)
    changed = client.patch(
        f"/api/agents/{agent['agent_id']}", json={"name": "Helper", "tools": None, "system_prompt": "Be kind."}
    ).json
    assert (changed["name"], changed["tools"], changed["system_prompt"]) == ("Helper", None, "Be kind.")
    assert client.delete(f"/api/agents/{agent['agent_id']}").status_code == 200
    assert client.get("/api/agents").json["agents"] == []


@pytest.mark.parametrize(
    "body, words",
    [
        ({"name": " \t "}, "name must not be empty"),
        ({"name": "n" * 201}, "too long"),
        ({"name": "ok", "tools": "web_search"}, "tools must be a list"),
        ({"name": "ok", "system_prompt": "p" * 20_001}, "too long"),
        ({"name": "ok", "agent_id": "Not An Id"}, "agent_id must be"),
    ],
)
def test_bad_agents_are_refused_and_store_nothing(client, body, words):
    answer = client.post("/api/agents", json=body)
    assert answer.status_code == 400 and words in answer.json["error"], answer.json
    assert client.get("/api/agents").json["agents"] == []


def test_markup_in_an_agent_name_is_stored_as_text(client):
    name = '<img src=x onerror="alert(1)">'
    assert client.post("/api/agents", json={"name": name}).json["name"] == name


def test_another_user_s_agent_answers_404_and_stays_as_it_was(users):
    alice, bob = users
    agent = alice.call("POST", "/api/agents", {"name": "Mine", "agent_id": "keen_curie"}).json
    assert bob.call("GET", "/api/agents").json["agents"] == []
    assert bob.call("GET", "/api/agents/keen_curie").status_code == 404
    assert bob.call("PATCH", "/api/agents/keen_curie", {"name": "pwned"}).status_code == 404
    assert bob.call("DELETE", "/api/agents/keen_curie").status_code == 404
    assert alice.call("GET", "/api/agents/keen_curie").json == agent
