"""MCP calls in agent turns (issue 34, step 4): the approval card (by default) naming the server, the tool
and the exact arguments, bound to the exact call; ``approval = "auto"`` per server or tool; a progress
event per MCP progress notification; a timeout as a tool error; a stop that ends the call within 1 s."""

from __future__ import annotations

import json
import sys
import time

import pytest
from agent_fakes import calls, of, post, say, sse_frames, use_script
from apphelpers import close_app
from mcp_helpers import HOSTILE, wait_until

from odysseus import create_app

SERVER = {"command": sys.executable, "args": [HOSTILE, "normal"], "sandbox": False}


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    application = create_app(
        {
            "DATA_DIR": str(tmp_path_factory.mktemp("mcp")),
            "PROVIDERS": [],
            "AUTH": "none",
            "AGENT_TOOLS": "update_plan",
            "TOOL_PROGRESS_INTERVAL": 5.0,  # only the MCP notifications make progress events here
            "MCP_START_TIMEOUT": 60.0,
            "MCP_SERVERS": {
                "asks": SERVER,  # approval "ask" by default
                "mixed": {**SERVER, "approval": {"*": "ask", "echo": "auto"}, "timeout": 1.5},
            },
        }
    )
    yield application
    close_app(application)


def test_the_card_names_server_tool_and_exact_arguments_and_approve_runs_that_call(app):
    client = app.test_client()
    arguments = {"text": "exactly this", "extra": [1, {"k": "v"}]}
    use_script(app, [calls(("c1", "mcp__asks__echo", arguments)), say("Echoed.")])
    response, frames = post(client, message="echo it")
    session_id = response.headers["X-Odysseus-Session-Id"]
    card = of(frames, "ask_user")[0]["data"]
    assert card["kind"] == "tool_approval" and card["tool"] == "mcp__asks__echo"
    assert card["mcp"] == {"server": "asks", "tool": "echo"}
    assert card["call"]["arguments"] == arguments
    assert card["full_command"] == "asks.echo(" + json.dumps(arguments, ensure_ascii=False, sort_keys=True) + ")"
    assert not of(frames, "tool_start")  # nothing ran before the answer
    tampered = dict(card["call"], arguments={"text": "something else"})
    refused, _ = post(
        client,
        session_id=session_id,
        tool_approval_id=card["approval_id"],
        tool_approval_decision="approve",
        tool_approval_call=tampered,
    )
    assert refused.status_code == 400 and refused.get_json()["reason"] == "invalid"
    answered, frames = post(
        client,
        session_id=session_id,
        tool_approval_id=card["approval_id"],
        tool_approval_decision="approve",
        tool_approval_call=card["call"],
    )
    assert answered.status_code == 200
    output = of(frames, "tool_output")[0]
    assert output["exit_code"] == 0 and output["output"] == "echo: exactly this" and output["mcp"]["server"] == "asks"
    saved = app.extensions["odysseus.store"].messages.list("local", session_id)
    assert saved[1]["metadata"]["agent"]["awaiting_approval"]["mcp"] == {"server": "asks", "tool": "echo"}


def test_deny_runs_nothing_and_auto_skips_the_card_for_that_tool_only(app):
    client = app.test_client()
    use_script(app, [calls(("c1", "mcp__mixed__echo", {"text": "free"}), ("c2", "mcp__mixed__sleep", {"seconds": 0}))])
    response, frames = post(client, message="two calls")
    assert of(frames, "tool_output")[0]["output"] == "echo: free"  # auto: ran without a card
    card = of(frames, "ask_user")[0]["data"]
    assert card["tool"] == "mcp__mixed__sleep"  # the rest of the server asks
    use_script(app, [say("Fine, I will not.")])
    _, frames = post(
        client,
        session_id=response.headers["X-Odysseus-Session-Id"],
        tool_approval_id=card["approval_id"],
        tool_approval_decision="deny",
    )
    assert of(frames, "tool_approval_resolved")[0]["decision"] == "deny" and not of(frames, "tool_start")


def test_each_progress_notification_is_a_tool_progress_and_a_timeout_is_a_tool_error(app):
    client = app.test_client()
    use_script(
        app,
        [
            calls(("c1", "mcp__mixed__sleep", {"seconds": 0.55})),
            say("slept"),
            calls(("c2", "mcp__mixed__sleep", {"seconds": 30})),
            say("It took too long; moving on."),
        ],
    )
    response, frames = post(client, message="sleep a little")
    answer = of(frames, "ask_user")[0]["data"]
    _, frames = post(
        client,
        session_id=response.headers["X-Odysseus-Session-Id"],
        tool_approval_id=answer["approval_id"],
        tool_approval_decision="approve_task",
    )
    progress = of(frames, "tool_progress")
    assert len(progress) >= 3  # a notification every 0.1 s; TOOL_PROGRESS_INTERVAL alone would give none
    assert [p["progress"] for p in progress] == sorted(p["progress"] for p in progress)
    assert progress[0]["message"].startswith("step ") and progress[0]["call_id"] == "c1"
    assert of(frames, "tool_output")[0]["output"].startswith("slept ")
    # approve_task: the next sleep of this task runs without asking, and passes the server's 1.5 s timeout
    response, frames = post(client, session_id=response.headers["X-Odysseus-Session-Id"], message="longer")
    answer = of(frames, "ask_user")
    assert answer  # a new task asks again
    started = time.monotonic()
    _, frames = post(
        client,
        session_id=response.headers["X-Odysseus-Session-Id"],
        tool_approval_id=answer[0]["data"]["approval_id"],
        tool_approval_decision="approve",
    )
    output = of(frames, "tool_output")[0]
    assert output["exit_code"] == 124 and "longer than 1.5 s" in output["output"]
    assert time.monotonic() - started < 10
    assert of(frames, "agent_terminal")[0]["data"]["completion"] == "complete"  # the turn went on


@pytest.mark.slow  # measured against 1 s: serial only (on four loaded processes it missed by a little)
def test_stop_ends_the_call_within_a_second(app):
    client = app.test_client()
    use_script(app, [calls(("c1", "mcp__mixed__echo", {"text": "warm"})), say("warm")])
    post(client, message="warm up")  # the server is running
    service = app.extensions["odysseus.mcp"]
    use_script(app, [calls(("c1", "mcp__asks__sleep", {"seconds": 30}))])
    response, frames = post(client, message="sleep long")
    card = of(frames, "ask_user")[0]["data"]
    running = client.post(
        "/api/chat_stream",
        json={
            "mode": "agent",
            "session_id": response.headers["X-Odysseus-Session-Id"],
            "tool_approval_id": card["approval_id"],
            "tool_approval_decision": "approve",
        },
    )
    run_id = running.headers["X-Odysseus-Run-Id"]
    body = running.response  # the stream, read below after the stop
    wait_until(lambda: service.client._pending, timeout=30)  # the call is with the broker
    time.sleep(0.4)
    stopped_at = time.monotonic()
    stop = client.post(
        f"/api/chat/stop/{response.headers['X-Odysseus-Session-Id']}", headers={"X-Odysseus-Run-Id": run_id}
    )
    assert stop.status_code == 200
    frames = sse_frames(b"".join(body))
    assert time.monotonic() - stopped_at < 1.0
    terminal = of(frames, "agent_terminal")[0]["data"]
    assert terminal["status"] == "stopped" and terminal["completion"] == "stopped"
