"""Agent mode end to end: a real gunicorn+gevent server talking to a scripted OpenAI-compatible model.

Covers the tool round trip as the provider sees it (results paired by call id), the approval
round trips, a disconnect in the middle of a tool run (the run completes, resume shows the
tool rows, the tool ran once) and a provider failure mid-run (one sanitized terminal record).
"""

from __future__ import annotations

import os

import pytest
import requests
from scripted_model import ScriptedModel, reply, tool
from sseclient import open_stream, post_chat, text_of
from waiting import wait_for
from liveserver import serving_model


@pytest.fixture(scope="module")
def model():
    with ScriptedModel() as scripted:
        yield scripted


@pytest.fixture(scope="module")
def server(model, tmp_path_factory):
    with serving_model(
        model.url,
        str(tmp_path_factory.mktemp("agent")),
        ODYSSEUS_AGENT_TOOLS="shell,run_python,update_plan,fetch_url",
        ODYSSEUS_TOOL_PROGRESS_INTERVAL="0.3",
        ODYSSEUS_EVICT_GRACE="30",
    ) as srv:
        yield srv


def frames_of(stream):
    """Every data frame as a dict with ``type`` (delta frames get type delta); closes the stream."""
    out = []
    try:
        events = stream.events()
    finally:
        stream.close()  # an open keep-alive connection would hold the server's graceful shutdown
    for frame in events:
        data = frame["data"]
        if data == "[DONE]":
            out.append({"type": "[DONE]", "id": frame["id"]})
        elif frame.get("event") == "error":
            out.append({"type": "error", **data})
        elif isinstance(data, dict):
            out.append({"type": data.get("type", "delta"), **data, "id": frame["id"]})
    return out


def of(frames, kind):
    return [f for f in frames if f["type"] == kind]


def agent(server, **body):
    return post_chat(server.url, body.pop("message", ""), mode="agent", **body)


def session_of(stream) -> str:
    """Read the whole turn (so it has ended) and return its session id."""
    frames_of(stream)
    return stream.headers["X-Odysseus-Session-Id"]


def fresh(model, *replies):
    with model.lock:
        model.replies = list(replies)
        model.requests.clear()


def workdir(server, session_id):
    return os.path.join(server.data_dir, "workspaces", "local", session_id)


def test_tool_round_trip_pairs_results_by_call_id_at_the_provider(server, model):
    plan = {"steps": [{"step": "look around", "status": "completed"}]}
    fresh(model, reply("Planning first.", [tool("call_a", "update_plan", **plan)]), reply("All planned."))
    frames = frames_of(agent(server, message="plan something"))
    kinds = [f["type"] for f in frames]
    assert kinds[:3] == ["agent_prep", "agent_step", "model_info"]
    assert kinds.index("tool_start") < kinds.index("plan_update") < kinds.index("tool_output")
    assert kinds[-3:] == ["message_saved", "agent_terminal", "[DONE]"]
    assert of(frames, "tool_start")[0]["call_id"] == "call_a"
    assert text_of([{"data": f} for f in frames if f["type"] == "delta"]) == "Planning first.\n\nAll planned."
    first, second = model.requests
    assert first["tools"][0]["type"] == "function" and first["stream"] is True
    assistant = second["messages"][-2]
    assert assistant["tool_calls"][0]["id"] == "call_a"
    assert second["messages"][-1]["role"] == "tool" and second["messages"][-1]["tool_call_id"] == "call_a"
    terminal = of(frames, "agent_terminal")[0]["data"]
    assert terminal["completion"] == "complete" and terminal["tool_calls"] == 1
    assert len(terminal["routes"]) == 1 and terminal["routes"][0].startswith("openai/")
    assert [r["tool_calls"] for r in terminal["rounds"]] == [[{"id": "call_a", "name": "update_plan"}], []]


def test_approval_round_trip_and_refusals_over_http(server, model):
    fresh(
        model,
        reply("", [tool("call_s", "shell", command="echo approved-run >> log.txt; cat log.txt")]),
        reply("Done, the log has one line."),
    )
    first = agent(server, message="write the log")
    session_id = first.headers["X-Odysseus-Session-Id"]
    frames = frames_of(first)
    card = of(frames, "ask_user")[0]["data"]
    assert card["kind"] == "tool_approval" and card["call"]["arguments"]["command"].startswith("echo approved-run")
    assert of(frames, "agent_terminal")[0]["data"]["completion"] == "awaiting_approval"
    assert not os.path.exists(os.path.join(workdir(server, session_id), "log.txt"))

    other = requests.post(server.url + "/api/sessions", json={"title": "x"}, timeout=5).json()["id"]
    base = {"mode": "agent", "tool_approval_id": card["approval_id"], "tool_approval_decision": "approve"}
    wrong = requests.post(server.url + "/api/chat_stream", json={**base, "session_id": other}, timeout=5)
    assert wrong.status_code == 403 and wrong.json()["reason"] == "wrong_session"
    tampered = requests.post(
        server.url + "/api/chat_stream",
        timeout=5,
        json={**base, "session_id": session_id, "tool_approval_call": {**card["call"], "arguments": {"command": "id"}}},
    )
    assert tampered.status_code == 400 and tampered.json()["reason"] == "invalid"

    answer = agent(
        server,
        session_id=session_id,
        tool_approval_id=card["approval_id"],
        tool_approval_decision="approve",
        tool_approval_call=card["call"],
    )
    frames = frames_of(answer)
    assert of(frames, "tool_approval_resolved")[0]["decision"] == "approve"
    assert of(frames, "tool_output")[0]["output"].strip() == "approved-run"
    assert model.requests[-1]["messages"][-1] == {"role": "tool", "tool_call_id": "call_s", "content": "approved-run\n"}

    replay = requests.post(server.url + "/api/chat_stream", json={**base, "session_id": session_id}, timeout=5)
    assert replay.status_code == 400 and replay.json()["reason"] == "invalid"
    with open(os.path.join(workdir(server, session_id), "log.txt")) as fh:
        assert fh.read() == "approved-run\n"


def test_disconnect_during_a_tool_run_completes_once_and_resume_shows_the_rows(server, model):
    command = "echo ran >> count.txt; for i in 1 2 3 4 5 6; do echo tick$i; sleep 0.3; done"
    fresh(model, reply("", [tool("call_slow", "shell", command=command)]), reply("Finished the slow job."))
    session_id = session_of(agent(server, message="slow job"))
    card = wait_for(
        lambda: (
            requests.get(f"{server.url}/api/sessions/{session_id}/messages", timeout=5)
            .json()["messages"][-1]["metadata"]
            .get("agent", {})
            .get("awaiting_approval")
        ),
        what="approval card",
    )
    stream = agent(
        server, session_id=session_id, tool_approval_id=card["approval_id"], tool_approval_decision="approve"
    )
    for frame in stream.frames():
        if isinstance(frame.get("data"), dict) and frame["data"].get("type") == "tool_start":
            break
    stream.close()  # the browser goes away while the tool runs

    wait_for(
        lambda: requests.get(f"{server.url}/api/chat/stream_status/{session_id}", timeout=5).json()["status"] == "done",
        20,
        what="run done",
    )
    resumed = frames_of(open_stream("GET", f"{server.url}/api/chat/resume/{session_id}"))
    assert len(of(resumed, "tool_start")) == 1 and len(of(resumed, "tool_output")) == 1
    assert of(resumed, "tool_progress") and "tick" in " ".join(f["message"] for f in of(resumed, "tool_progress"))
    assert of(resumed, "tool_output")[0]["output"].split() == [f"tick{i}" for i in range(1, 7)]
    assert of(resumed, "agent_terminal")[0]["data"]["completion"] == "complete"
    with open(os.path.join(workdir(server, session_id), "count.txt")) as fh:
        assert fh.read() == "ran\n"  # the tool ran exactly once
    assert len(model.requests) == 2
    saved = requests.get(f"{server.url}/api/sessions/{session_id}/messages", timeout=5).json()["messages"][-1]
    assert saved["metadata"]["agent"]["tools"][0]["call_id"] == "call_slow"
    assert saved["content"] == "Finished the slow job."


def test_provider_failure_mid_run_saves_the_partial_then_one_sanitized_terminal(server, model):
    fresh(
        model,
        reply("Let me plan.", [tool("call_p", "update_plan", steps=[{"step": "a", "status": "pending"}])]),
        reply(status=500, error_body='{"error": {"message": "boom for key sk-leakedsecret12345"}}'),
    )
    frames = frames_of(agent(server, message="fail in round two"))
    kinds = [f["type"] for f in frames]
    assert kinds.count("agent_terminal") == 1
    assert kinds.index("message_saved") < kinds.index("agent_terminal") < kinds.index("error")
    terminal = of(frames, "agent_terminal")[0]["data"]
    assert terminal["status"] == "error" and terminal["completion"] == "failed"
    assert terminal["rounds"][0]["text"] == "Let me plan." and terminal["failure"]["round"] == 2
    assert terminal["tool_calls"] == 1 and terminal["failure"]["status"] == 500
    assert "sk-leakedsecret" not in str(frames) and "sk-test-key" not in str(frames)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _running(marker: str) -> list:
    """Host pids whose command line has ``marker`` (pids printed inside the sandbox are its own namespace's)."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != os.getpid():
            try:
                with open(f"/proc/{name}/cmdline", "rb") as fh:
                    if marker.encode() in fh.read() and _alive(int(name)):
                        found.append(int(name))
            except OSError:
                continue
    return found


def test_stop_during_a_tool_run_kills_the_process_and_saves_the_partial(server, model):
    command = "echo started; exec sleep 30.613"
    fresh(model, reply("Starting the long job.", [tool("call_long", "shell", command=command)]))
    session_id = session_of(agent(server, message="long job"))
    card = wait_for(
        lambda: (
            requests.get(f"{server.url}/api/sessions/{session_id}/messages", timeout=5)
            .json()["messages"][-1]["metadata"]
            .get("agent", {})
            .get("awaiting_approval")
        ),
        what="approval card",
    )
    stream = agent(
        server, session_id=session_id, tool_approval_id=card["approval_id"], tool_approval_decision="approve"
    )
    run_id = stream.headers["X-Odysseus-Run-Id"]
    for frame in stream.frames():
        data = frame.get("data")
        if isinstance(data, dict) and data.get("type") == "tool_progress" and "started" in data["message"]:
            break
    wait_for(lambda: _running("sleep 30.613"), 5, what="the tool process")
    stopped = requests.post(
        f"{server.url}/api/chat/stop/{session_id}", headers={"X-Odysseus-Run-Id": run_id}, timeout=10
    )
    assert stopped.json() == {"stopped": True}
    rest = frames_of(stream)
    terminal = of(rest, "agent_terminal")[0]["data"]
    assert terminal["status"] == "stopped" and terminal["completion"] == "stopped"
    assert not of(rest, "[DONE]") and not of(rest, "tool_output")
    wait_for(lambda: not _running("30.613"), 5, what="tool process killed")
    saved = requests.get(f"{server.url}/api/sessions/{session_id}/messages", timeout=5).json()["messages"][-1]
    assert saved["metadata"]["stopped"] is True and saved["content"] == ""  # this turn had no text yet
    row = saved["metadata"]["agent"]["tools"][0]
    assert row.pop("server_id").startswith("tc_")
    assert saved["metadata"]["agent"]["tools"] == [
        {
            "call_id": "call_long",
            "tool": "shell",
            "command": command,
            "full_command": command,
            "round": 1,
            "text_offset": 0,  # no text came before the call
            "cancelled": True,
        }
    ]
