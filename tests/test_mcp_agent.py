"""MCP tools in agent turns (issue 34, step 3): offered as ``mcp__<server>__<tool>``, called through
the broker, their real answer in ``tool_output``; the allow-list and the cap; who may use a server."""

from __future__ import annotations

import json
import sys

import pytest
from agent_fakes import calls, of, post, say, use_script
from apphelpers import close_app
from mcp_helpers import HOSTILE, TIME_SERVER

from odysseus import create_app


def mcp_app(tmp_path, servers, **config):
    return create_app(
        {
            "DATA_DIR": str(tmp_path),
            "PROVIDERS": [],
            "AUTH": "none",
            "AGENT_TOOLS": "update_plan",
            "TOOL_PROGRESS_INTERVAL": 0.2,
            "MCP_START_TIMEOUT": 60.0,
            "MCP_SERVERS": servers,
            **config,
        }
    )


TIME = {"command": TIME_SERVER, "args": ["--local-timezone", "UTC"], "sandbox": False, "approval": "auto"}
HOSTILE_SERVER = {"command": sys.executable, "args": [HOSTILE, "normal"], "sandbox": False, "approval": "auto"}


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    application = mcp_app(tmp_path_factory.mktemp("mcp"), {"time": TIME, "hostile": HOSTILE_SERVER})
    yield application
    close_app(application)


def offered(provider):
    return [tool["function"]["name"] for tool in provider.requests[0].tools or []]


def test_the_model_calls_a_real_mcp_tool_and_reads_its_answer(app):
    client = app.test_client()
    provider = use_script(
        app,
        [calls(("c1", "mcp__time__get_current_time", {"timezone": "Asia/Tokyo"})), say("It is late in Tokyo.")],
    )
    response, frames = post(client, message="What time is it in Tokyo?")
    assert response.status_code == 200, response.get_data(as_text=True)
    names = offered(provider)
    assert "mcp__time__get_current_time" in names and "mcp__time__convert_time" in names and "update_plan" in names
    spec = next(t for t in provider.requests[0].tools if t["function"]["name"] == "mcp__time__get_current_time")
    assert spec["function"]["description"].startswith("[MCP server time] Get current time")
    assert spec["function"]["parameters"]["type"] == "object"
    start = of(frames, "tool_start")[0]
    assert start["mcp"] == {"server": "time", "tool": "get_current_time"}
    assert start["full_command"] == 'time.get_current_time({"timezone": "Asia/Tokyo"})'
    output = of(frames, "tool_output")[0]
    assert output["exit_code"] == 0 and output["mcp"] == {"server": "time", "tool": "get_current_time"}
    answer = json.loads(output["output"])
    assert answer["timezone"] == "Asia/Tokyo" and answer["datetime"].endswith("+09:00")
    sent = provider.requests[1].messages[-1]
    assert sent["role"] == "tool" and json.loads(sent["content"])["timezone"] == "Asia/Tokyo"
    saved = app.extensions["odysseus.store"].messages.list("local", response.headers["X-Odysseus-Session-Id"])
    row = saved[-1]["metadata"]["agent"]["tools"][0]
    assert row["mcp"] == {"server": "time", "tool": "get_current_time"} and row["exit_code"] == 0


def test_odd_names_and_a_ref_loop_are_offered_cleanly(app):
    provider = use_script(app, [say("ok")])
    post(app.test_client(), message="list")
    by_name = {t["function"]["name"]: t["function"] for t in provider.requests[0].tools}
    assert (
        "mcp__hostile__odd_name_with_dots__n_code" in by_name and "mcp__hostile__odd_name_with_dots__n_code_" in by_name
    )
    assert ("mcp__hostile__" + "x" * 80)[:64] in by_name
    assert "$ref" not in json.dumps(by_name["mcp__hostile__loop"]["parameters"])


def test_an_mcp_tool_error_is_a_nonzero_exit_code_and_the_turn_goes_on(app):
    provider = use_script(
        app, [calls(("c1", "mcp__hostile__nope", {}), ("c2", "mcp__hostile__echo", {"text": "after"})), say("done")]
    )
    response, frames = post(app.test_client(), message="try")
    outputs = of(frames, "tool_output")
    assert outputs[0]["exit_code"] == 1 and "no tool named" in outputs[0]["output"]  # not offered: ours says so
    assert outputs[1]["exit_code"] == 0 and outputs[1]["output"] == "echo: after"
    assert of(frames, "agent_terminal")[0]["data"]["completion"] == "complete"
    assert len(provider.requests) == 2


def test_the_allow_list_and_the_cap_pick_the_tools(tmp_path):
    servers = {
        "picked": {**HOSTILE_SERVER, "tools": ["echo", "sleep", "flood", "missing"]},
        "capped": HOSTILE_SERVER,
    }
    application = mcp_app(tmp_path, servers, MCP_MAX_TOOLS=2)
    try:
        provider = use_script(application, [say("ok")])
        post(application.test_client(), message="list")
        names = [n for n in offered(provider) if n.startswith("mcp__")]
        assert names == ["mcp__picked__echo", "mcp__picked__sleep", "mcp__capped__echo", "mcp__capped__sleep"]
    finally:
        close_app(application)


H = {"Origin": "http://localhost"}


def sign_in(application, username, password, create_as=None):
    client = application.test_client()
    if create_as is None:
        client.post("/api/auth/setup", json={"username": username, "password": password}, headers=H)
    else:
        create_as.post("/api/auth/users", json={"username": username, "password": password}, headers=H)
    assert (
        client.post("/api/auth/login", json={"username": username, "password": password}, headers=H).status_code == 200
    )
    return client


def test_a_server_named_for_some_users_is_offered_to_them_only(tmp_path):
    servers = {"time": {**TIME, "users": ["root"]}, "hostile": {**HOSTILE_SERVER, "profiles": ["prof_only"]}}
    application = mcp_app(tmp_path, servers, AUTH="password")
    try:
        root = sign_in(application, "root", "root-pass-1")
        bob = sign_in(application, "bob", "bob-pass-1", create_as=root)
        for client, expected in ((root, True), (bob, False)):
            provider = use_script(application, [say("ok")])
            response = client.post("/api/chat_stream", json={"mode": "agent", "message": "hi"}, headers=H)
            assert response.status_code == 200
            response.get_data()  # the whole turn
            names = offered(provider)
            assert ("mcp__time__get_current_time" in names) is expected
            assert not any(name.startswith("mcp__hostile__") for name in names)  # only a named profile's turns
    finally:
        close_app(application)


def test_allows_names_users_by_id_or_username_and_profiles():
    from odysseus.mcp.servers import spec_from, validate

    everyone = spec_from("s", validate({"command": "x"}), "config")
    named = spec_from("s", validate({"command": "x", "users": ["alice", "u_bob"], "profiles": ["prof_1"]}), "config")
    assert everyone.allows("anyone", None, None)
    assert named.allows("u_alice", {"id": "u_alice", "username": "alice"}, None)
    assert named.allows("u_bob", {"id": "u_bob", "username": "bob"}, None)
    assert not named.allows("u_carol", {"id": "u_carol", "username": "carol"}, None)
    assert named.allows("u_carol", {"id": "u_carol", "username": "carol"}, "prof_1")
    assert not named.allows("u_carol", {"id": "u_carol", "username": "carol"}, "prof_2")


def test_another_users_mcp_approval_id_is_a_404_and_runs_nothing(tmp_path):
    application = mcp_app(tmp_path, {"hostile": {**HOSTILE_SERVER, "approval": "ask"}}, AUTH="password")
    try:
        root = sign_in(application, "root", "root-pass-1")
        bob = sign_in(application, "bob", "bob-pass-1", create_as=root)
        use_script(application, [calls(("c1", "mcp__hostile__echo", {"text": "root's"}))])
        response = root.post("/api/chat_stream", json={"mode": "agent", "message": "echo"}, headers=H)
        from agent_fakes import sse_frames

        card = of(sse_frames(response.get_data()), "ask_user")[0]["data"]
        assert card["mcp"] == {"server": "hostile", "tool": "echo"}
        bobs = bob.post("/api/sessions", json={"title": "mine"}, headers=H).get_json()["id"]
        for session_id in (bobs, response.headers["X-Odysseus-Session-Id"]):
            stolen = bob.post(
                "/api/chat_stream",
                json={
                    "mode": "agent",
                    "session_id": session_id,
                    "tool_approval_id": card["approval_id"],
                    "tool_approval_decision": "approve",
                },
                headers=H,
            )
            assert stolen.status_code == 404, stolen.get_data(as_text=True)
        use_script(application, [say("done")])
        own = root.post(
            "/api/chat_stream",
            json={
                "mode": "agent",
                "session_id": response.headers["X-Odysseus-Session-Id"],
                "tool_approval_id": card["approval_id"],
                "tool_approval_decision": "approve",
            },
            headers=H,
        )
        assert of(sse_frames(own.get_data()), "tool_output")[0]["output"] == "echo: root's"  # still unused
    finally:
        close_app(application)
