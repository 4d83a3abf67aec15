"""MCP faults in agent turns (issue 34, step 5): a server that will not start is unavailable with its
reason (``/api/health``) and its tools are not offered while the others work; a crash mid-call is a tool
error and the turn goes on; the server comes back after its backoff; a changed tool list is offered."""

from __future__ import annotations

import sys
import time

import pytest
from agent_fakes import calls, of, post, say, use_script
from apphelpers import close_app
from mcp_helpers import HOSTILE, wait_until

from odysseus import create_app


def hostile(mode="normal"):
    return {"command": sys.executable, "args": [HOSTILE, mode], "sandbox": False, "approval": "auto"}


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    application = create_app(
        {
            "DATA_DIR": str(tmp_path_factory.mktemp("mcp")),
            "PROVIDERS": [],
            "AUTH": "none",
            "AGENT_TOOLS": "update_plan",
            "MCP_START_TIMEOUT": 60.0,
            "MCP_RESTART_MAX_DELAY": 2.0,
            "MCP_SERVERS": {"dies": hostile("dies"), "works": hostile(), "missing": {"command": "/nowhere/mcp-x"}},
        }
    )
    yield application
    close_app(application)


def offered(provider):
    return [tool["function"]["name"] for tool in provider.requests[0].tools or []]


def test_a_server_that_will_not_start_is_left_out_with_its_reason_and_the_others_work(app):
    client = app.test_client()
    provider = use_script(app, [calls(("c1", "mcp__works__echo", {"text": "fine"})), say("ok")])
    response, frames = post(client, message="hello")
    names = offered(provider)
    assert "mcp__works__echo" in names and not any(n.startswith(("mcp__dies__", "mcp__missing__")) for n in names)
    assert of(frames, "tool_output")[0]["output"] == "echo: fine"
    health = client.get("/api/health").get_json()["mcp_servers"]
    assert health["works"]["state"] == "ready" and health["works"]["tools"] >= 10
    assert health["dies"]["state"] in ("unavailable", "starting")
    dies = wait_until(lambda: [e for e in [client.get("/api/health").get_json()["mcp_servers"]["dies"]] if e["error"]])
    assert "cannot open the database /nowhere" in dies[0]["error"]
    missing = wait_until(lambda: client.get("/api/health").get_json()["mcp_servers"]["missing"]["error"], timeout=20)
    assert "/nowhere/mcp-x" in missing


def test_a_crash_mid_call_is_a_tool_error_the_turn_goes_on_and_the_server_comes_back(app):
    client = app.test_client()
    provider = use_script(
        app,
        [
            calls(("c1", "mcp__works__crash", {})),
            say("The server crashed; I will say so."),
        ],
    )
    response, frames = post(client, message="crash it")
    output = of(frames, "tool_output")[0]
    assert output["exit_code"] == 1 and "stopped during the call" in output["output"]
    assert of(frames, "agent_terminal")[0]["data"]["completion"] == "complete"
    assert provider.requests[1].messages[-1]["role"] == "tool"  # the model read the error

    def works_again():
        use_script(app, [calls(("c2", "mcp__works__echo", {"text": "back"})), say("ok")])
        _, frames = post(client, message="again")
        outputs = of(frames, "tool_output")
        return outputs and outputs[0]["exit_code"] == 0 and outputs[0]["output"] == "echo: back"

    wait_until(works_again, timeout=30, step=0.5)
    assert client.get("/api/health").get_json()["mcp_servers"]["works"]["state"] == "ready"


def test_a_changed_tool_list_is_offered_to_the_next_turn(app):
    client = app.test_client()
    use_script(app, [calls(("c1", "mcp__works__change", {})), say("changed")])
    post(client, message="change")

    def offers_it():
        provider = use_script(app, [say("ok")])
        post(client, message="list")
        return "mcp__works__added_later" in offered(provider)

    wait_until(offers_it, timeout=15, step=0.3)


@pytest.mark.slow  # 50 MB through the server's pipe and the guard: seconds on a busy machine
def test_a_50_mb_result_is_capped_and_malformed_json_rpc_times_out_as_a_tool_error(tmp_path):
    application = create_app(
        {
            "DATA_DIR": str(tmp_path),
            "PROVIDERS": [],
            "AUTH": "none",
            "AGENT_TOOLS": "update_plan",
            "MCP_START_TIMEOUT": 60.0,
            "TOOL_OUTPUT_MAX_BYTES": 50_000,
            "TOOL_OUTPUT_CAP": 100_000,
            "MCP_SERVERS": {"h": {**hostile(), "timeout": 60}, "m": {**hostile(), "timeout": 2}},
        }
    )
    try:
        provider = use_script(
            application,
            [calls(("c1", "mcp__h__huge", {}), ("c2", "mcp__m__malformed", {})), say("Both done.")],
        )
        _, frames = post(application.test_client(), message="big and broken")
        huge, malformed = of(frames, "tool_output")
        assert huge["exit_code"] == 0 and len(huge["output"]) < 5000  # the row shows the start
        sent = provider.requests[1].messages
        assert sent[-2]["content"].startswith("AAAA") and sent[-2]["content"].endswith("[output cut at 50000 bytes]")
        assert len(sent[-2]["content"]) < 51_000
        assert malformed["exit_code"] == 124 and "longer than 2 s" in malformed["output"]
        assert of(frames, "agent_terminal")[0]["data"]["completion"] == "complete"
    finally:
        close_app(application)


def test_a_server_that_hangs_delays_only_the_first_turns_that_could_use_it(tmp_path):
    application = create_app(
        {
            "DATA_DIR": str(tmp_path),
            "PROVIDERS": [],
            "AUTH": "none",
            "AGENT_TOOLS": "update_plan",
            "MCP_START_TIMEOUT": 1.5,
            "MCP_RESTART_MAX_DELAY": 1.0,
            "MCP_SERVERS": {"hangs": hostile("noinit")},
        }
    )
    try:
        client = application.test_client()
        use_script(application, [say("first")])
        started = time.monotonic()
        post(client, message="first")
        assert time.monotonic() - started >= 1.4  # the first start was waited for (boundedly)
        for _ in range(6):  # then, while it fails and is started again every second, no turn waits for it
            use_script(application, [say("next")])
            started = time.monotonic()
            response, frames = post(client, message="next")
            assert response.status_code == 200 and time.monotonic() - started < 1.0
            time.sleep(0.4)
        state = client.get("/api/health").get_json()["mcp_servers"]["hangs"]
        assert state["state"] in ("unavailable", "starting")
        assert "did not answer initialize within 1.5 s" in (state["error"] or "did not answer initialize within 1.5 s")
    finally:
        close_app(application)
