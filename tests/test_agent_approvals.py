"""Tool approvals: the pure checks, and the /api/chat_stream round trips (approve, approve_task, deny,
expired, replayed, wrong session, tampered call) with a scripted in-process provider and a real shell tool."""

from __future__ import annotations

import os
import time

import pytest
from agent_fakes import calls, messages, of, post, say, use_script, workdir

from odysseus import create_app
from odysseus.agent.approvals import call_hash, check
from odysseus.errors import BadRequest

CALL = {"id": "c1", "name": "shell", "arguments": {"command": "touch made.txt"}}


def row(**over):
    base = {
        "id": "apr_x",
        "owner": "me",
        "session_id": "s1",
        "call": CALL,
        "call_hash": call_hash(CALL),
        # built at collection time, so far enough ahead for a long test run
        "expires_at": time.time() + 86400,
        "used_at": None,
    }
    base.update(over)
    return base


@pytest.mark.parametrize(
    "stored, kwargs, reason, status",
    [
        (None, {}, "not_found", 404),
        (row(owner="someone-else"), {}, "not_found", 404),
        (row(), {"decision": "maybe"}, "invalid", 400),
        (row(), {"session_id": "s2"}, "wrong_session", 403),
        (row(used_at=time.time()), {}, "invalid", 400),
        (row(expires_at=time.time() - 1), {}, "expired", 410),
        (row(), {"presented": {"tool": "shell", "arguments": {"command": "rm -rf ~"}}}, "invalid", 400),
        (row(), {"presented": {"tool": "shell", "arguments": CALL["arguments"], "call_id": "other"}}, "invalid", 400),
        (row(call={**CALL, "arguments": {"command": "rm -rf ~"}}), {}, "invalid", 400),
    ],
)
def test_check_refuses_with_a_machine_readable_reason(stored, kwargs, reason, status):
    args = {"owner": "me", "session_id": "s1", "decision": "approve", "now": time.time(), **kwargs}
    with pytest.raises(BadRequest) as info:
        check(stored, **args)
    assert info.value.reason == reason and info.value.status == status
    assert info.value.to_dict()["reason"] == reason


def test_check_accepts_a_valid_answer_with_or_without_the_echoed_call():
    check(row(), owner="me", session_id="s1", decision="approve_task", now=time.time())
    check(
        row(),
        owner="me",
        session_id="s1",
        decision="deny",
        now=time.time(),
        presented={"tool": "shell", "arguments": {"command": "touch made.txt"}, "call_id": "c1"},
    )


# ---------------------------------------------------------------- over /api/chat_stream
def ask(app, client, steps):
    """Start a task whose model calls shell; return (session_id, ask_user data, provider)."""
    provider = use_script(app, steps)
    response, frames = post(client, message="make a file")
    assert response.status_code == 200
    session_id = response.headers["X-Odysseus-Session-Id"]
    asked = of(frames, "ask_user")
    assert asked, frames
    terminal = of(frames, "agent_terminal")[0]["data"]
    assert terminal["completion"] == "awaiting_approval" and terminal["approval_id"] == asked[0]["data"]["approval_id"]
    assert not os.path.exists(os.path.join(workdir(app, session_id), "made.txt"))
    return session_id, asked[0]["data"], provider


def test_approve_runs_the_exact_call_once_and_replay_is_refused(agent_app):
    client = agent_app.test_client()
    session_id, data, provider = ask(
        agent_app,
        client,
        [
            calls(("call_1", "shell", {"command": "touch made.txt && echo made"}), text="I will create it."),
            say("Created the file."),
        ],
    )
    assert data["kind"] == "tool_approval" and data["tool"] == "shell"
    assert data["call"] == {
        "call_id": "call_1",
        "server_id": data["call"]["server_id"],
        "tool": "shell",
        "arguments": {"command": "touch made.txt && echo made"},
    }
    response, frames = post(
        client,
        session_id=session_id,
        tool_approval_id=data["approval_id"],
        tool_approval_decision="approve",
        tool_approval_call=data["call"],
    )
    assert response.status_code == 200
    types = [f["type"] for f in frames]
    assert types.index("tool_approval_resolved") < types.index("tool_start") < types.index("tool_output")
    assert of(frames, "tool_approval_resolved")[0]["decision"] == "approve"
    assert of(frames, "tool_output")[0]["output"].strip() == "made" and of(frames, "tool_output")[0]["exit_code"] == 0
    assert os.path.exists(os.path.join(workdir(agent_app, session_id), "made.txt"))
    sent = provider.requests[-1].messages
    assert sent[-1] == {"role": "tool", "tool_call_id": "call_1", "content": "made\n"}
    assert sent[-2]["tool_calls"][0]["id"] == "call_1"
    assert of(frames, "agent_terminal")[0]["data"]["completion"] == "complete"
    stored = messages(agent_app, session_id)
    assert [m["role"] for m in stored] == ["user", "assistant", "user", "assistant"]
    assert stored[2]["content"] == "Approved: shell"
    assert stored[2]["metadata"]["agent_action"]["tool_approval"]["decision"] == "approve"
    assert stored[3]["content"] == "Created the file."
    # replayed: single use, nothing stored, the tool does not run again
    count = len(stored)
    again = client.post(
        "/api/chat_stream",
        json={
            "mode": "agent",
            "session_id": session_id,
            "tool_approval_id": data["approval_id"],
            "tool_approval_decision": "approve",
        },
    )
    assert again.status_code == 400 and again.get_json()["reason"] == "invalid"
    assert len(messages(agent_app, session_id)) == count and len(provider.requests) == 2


def test_wrong_session_tampered_and_expired_answers_are_refused(agent_app):
    client = agent_app.test_client()
    session_id, data, provider = ask(agent_app, client, [calls(("c9", "shell", {"command": "touch made.txt"}))])
    other = client.post("/api/sessions", json={"title": "other"}).get_json()["id"]
    body = {"mode": "agent", "tool_approval_id": data["approval_id"], "tool_approval_decision": "approve"}
    wrong = client.post("/api/chat_stream", json={**body, "session_id": other})
    assert wrong.status_code == 403 and wrong.get_json()["reason"] == "wrong_session"
    tampered = client.post(
        "/api/chat_stream",
        json={
            **body,
            "session_id": session_id,
            "tool_approval_call": {"tool": "shell", "arguments": {"command": "touch evil.txt"}, "call_id": "c9"},
        },
    )
    assert tampered.status_code == 400 and tampered.get_json()["reason"] == "invalid"
    bad = client.post("/api/chat_stream", json={**body, "session_id": session_id, "tool_approval_decision": "yes"})
    assert bad.status_code == 400 and bad.get_json()["reason"] == "invalid"
    unknown = client.post("/api/chat_stream", json={**body, "session_id": session_id, "tool_approval_id": "apr_nope"})
    assert unknown.status_code == 404 and unknown.get_json()["reason"] == "not_found"
    agent_app.extensions["odysseus.store"].approvals.expire(data["approval_id"])
    expired = client.post("/api/chat_stream", json={**body, "session_id": session_id})
    assert expired.status_code == 410 and expired.get_json()["reason"] == "expired"
    assert len(messages(agent_app, session_id)) == 2 and len(provider.requests) == 1
    assert os.listdir(workdir(agent_app, session_id)) == [] if os.path.isdir(workdir(agent_app, session_id)) else True


def test_deny_does_not_run_the_tool_and_tells_the_model(agent_app):
    client = agent_app.test_client()
    session_id, data, provider = ask(
        agent_app,
        client,
        [calls(("c1", "shell", {"command": "touch made.txt"})), say("Understood, I did not create it.")],
    )
    provider.steps = [say("Understood, I did not create it.")]
    response, frames = post(
        client, session_id=session_id, tool_approval_id=data["approval_id"], tool_approval_decision="deny"
    )
    assert of(frames, "tool_approval_resolved")[0]["decision"] == "deny"
    assert not of(frames, "tool_start")
    assert not os.path.exists(os.path.join(workdir(agent_app, session_id), "made.txt"))
    assert provider.requests[-1].messages[-1]["tool_call_id"] == "c1"
    assert "denied" in provider.requests[-1].messages[-1]["content"]
    assert messages(agent_app, session_id)[2]["content"] == "Denied: shell"


def test_approve_task_covers_later_calls_of_the_same_tool(agent_app):
    client = agent_app.test_client()
    session_id, data, provider = ask(
        agent_app,
        client,
        [
            calls(("c1", "shell", {"command": "echo one"})),
            calls(("c2", "shell", {"command": "echo two"})),
            say("Both ran."),
        ],
    )
    response, frames = post(
        client, session_id=session_id, tool_approval_id=data["approval_id"], tool_approval_decision="approve_task"
    )
    assert not of(frames, "ask_user")
    assert [f["output"].strip() for f in of(frames, "tool_output")] == ["one", "two"]
    assert of(frames, "agent_terminal")[0]["data"]["completion"] == "complete"


def test_continue_after_rounds_exhausted_over_http(tmp_path):
    app = create_app(
        {
            "DATA_DIR": str(tmp_path),
            "PROVIDERS": [],
            "AUTH": "none",
            "AGENT_TOOLS": "update_plan",
            "AGENT_MAX_ROUNDS": 1,
        }
    )
    try:
        client = app.test_client()
        plan = {"steps": [{"step": "a", "status": "in_progress"}]}
        provider = use_script(app, [calls(("p1", "update_plan", plan)), say("All done.")])
        response, frames = post(client, message="plan it")
        session_id = response.headers["X-Odysseus-Session-Id"]
        assert of(frames, "rounds_exhausted")[0]["rounds"] == 1
        assert of(frames, "agent_terminal")[0]["data"]["completion"] == "rounds_exhausted"
        response, frames = post(client, session_id=session_id, **{"continue": True})
        assert response.status_code == 200
        assert of(frames, "agent_step")[0]["round"] == 2
        assert [m.get("tool_call_id") for m in provider.requests[-1].messages if m["role"] == "tool"] == ["p1"]
        assert "All done." in "".join(f.get("delta", "") for f in of(frames, "delta"))
        assert messages(app, session_id)[2]["content"] == "Continue"
        # nothing left to continue now
        refused = client.post("/api/chat_stream", json={"mode": "agent", "session_id": session_id, "continue": True})
        assert refused.status_code == 400 and refused.get_json()["reason"] == "invalid"
    finally:
        app.extensions["odysseus.runs"].close()


def test_image_route_serves_only_the_owner(agent_app):
    client = agent_app.test_client()
    service = agent_app.extensions["odysseus.agent"]
    png = b"\x89PNG\r\n\x1a\n" + b"0" * 20
    url = service.save_image("local", None, png, "image/png")
    got = client.get(url)
    assert got.status_code == 200 and got.data == png and got.mimetype == "image/png"
    foreign = service.save_image("someone-else", None, png, "image/png")
    assert client.get(foreign).status_code == 404
    assert client.get("/api/images/..%2Fodysseus.db").status_code == 404
    assert client.get("/api/images/img_doesnotexist000000.png").status_code == 404


def test_agent_api_runs_agent_mode_with_a_profiles_tools_and_prompt(agent_app):
    client = agent_app.test_client()
    profile = client.post(
        "/api/agent/profiles", json={"name": "planner", "tools": ["update_plan"], "system_prompt": "You plan things."}
    ).get_json()
    plan = {"steps": [{"step": "a", "status": "pending"}]}
    provider = use_script(agent_app, [calls(("p1", "update_plan", plan)), say("Planned.")])
    response = client.post("/api/agent/chat/stream", json={"message": "plan", "profile_id": profile["id"]})
    body = response.get_data(as_text=True)
    assert response.status_code == 200
    assert "event: tool_call" in body and "event: tool_result" in body and '"call_id":"p1"' in body
    first = provider.requests[0]
    assert [t["function"]["name"] for t in first.tools] == ["update_plan"]  # the profile limits the tools
    assert first.messages[0]["content"].startswith("You plan things.")
    assert provider.requests[1].messages[-1]["tool_call_id"] == "p1"


def test_a_retried_approval_answer_attaches_instead_of_running_again(agent_app):
    client = agent_app.test_client()
    session_id, data, provider = ask(
        agent_app, client, [calls(("c1", "shell", {"command": "echo x >> runs.txt"})), say("ok")]
    )
    body = {
        "session_id": session_id,
        "tool_approval_id": data["approval_id"],
        "tool_approval_decision": "approve",
        "client_message_id": "answer-1",
    }
    first, frames = post(client, **body)
    again, frames_again = post(client, **body)
    assert again.status_code == 200 and again.headers["X-Odysseus-Run-Id"] == first.headers["X-Odysseus-Run-Id"]
    assert [f["type"] for f in frames_again if f["type"] == "tool_output"] == ["tool_output"]  # the same log
    with open(os.path.join(workdir(agent_app, session_id), "runs.txt")) as fh:
        assert fh.read() == "x\n"
    assert len(provider.requests) == 2
