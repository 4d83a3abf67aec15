"""Agent Alloy over the real wire: a gunicorn+gevent server, one fake OpenAI server scripted per agent.

Covers the documented event order on both projections, concurrent delegations interleaving
(each in order), refusals (self, up the chain, depth), a timeout and a failing specialist,
stop during delegations (every child's provider connection closed within a second), resume
mid-delegation (no gap, no duplicate), a specialist's approval card and its continuation,
exhibits passing through, routing (404 before the stream, routed_by) and summed usage.
"""

from __future__ import annotations

import os
import time

import pytest
import requests
from alloy_fakes import AgentScripts, FakeProvider, delegate, make_agent, make_workflow, stall, text, tools
from sseclient import open_stream, post_chat
from waiting import wait_for
from liveserver import serving_model

AGENTS = ("chief_boss", "alpha_one", "beta_two", "gamma_three")


@pytest.fixture(scope="module")
def scripts():
    return AgentScripts()


@pytest.fixture(scope="module")
def fake(scripts):
    server = FakeProvider(chooser=scripts)
    yield server
    server.close()


@pytest.fixture(scope="module")
def server(fake, tmp_path_factory):
    with serving_model(
        fake.url,
        str(tmp_path_factory.mktemp("alloy")),
        OPENAI_MODEL="fake-1",
        ODYSSEUS_AGENT_TOOLS="update_plan,shell,present_exhibit",
        ODYSSEUS_AGENT_APPROVAL_TOOLS="shell",
        ODYSSEUS_ALLOY_MAX_DEPTH="2",
        ODYSSEUS_ALLOY_DELEGATION_TIMEOUT="3",
        ODYSSEUS_EVICT_GRACE="30",
    ) as srv:
        for agent_id in AGENTS:
            make_agent(srv.url, agent_id, f"You are {agent_id}.")
        make_agent(srv.url, "shell_runner", "You run shell commands.", tools=["shell"])
        yield srv


@pytest.fixture
def workflow(server, scripts):
    scripts.reset()
    return make_workflow(server.url, "team", "chief_boss", ["alpha_one", "beta_two", "gamma_three", "shell_runner"])


def agent_stream(server, message, **fields):
    return open_stream("POST", server.url + "/api/agent/chat/stream", json={"message": message, **fields})


def chat_frames(stream):
    """Every data frame of a chat-projection stream as a dict with ``type`` and ``_id``; closes the stream."""
    out = []
    try:
        for frame in stream.events():
            data = frame["data"]
            if data == "[DONE]":
                out.append({"type": "[DONE]", "_id": frame["id"]})
            elif frame.get("event") == "error":
                out.append({"type": "error", **data, "_id": frame["id"]})
            elif isinstance(data, dict):
                out.append({"type": data.get("type", "delta"), **data, "_id": frame["id"]})
    finally:
        stream.close()
    return out


def of(frames, kind):
    return [f for f in frames if f["type"] == kind]


def saved_reply(server, session_id):
    messages = requests.get(f"{server.url}/api/sessions/{session_id}/messages", timeout=10).json()["messages"]
    return messages[-1], messages


def test_event_order_concurrency_results_and_saved_record_on_the_agent_api(server, scripts, workflow):
    scripts.script(
        "chief_boss",
        tools(
            delegate("d_a", "alpha_one", "Write the intro."),
            delegate("d_b", "beta_two", "Make a plan."),
            say="Splitting the work.",
        ),
        text("Both parts are in.", " Done."),
    )
    scripts.script(
        "alpha_one",
        text("Intro ", "part ", "one ", "two ", "three ", "four ", "five ", "six ", "seven ", "eight.", delay=0.15),
    )
    scripts.script(
        "beta_two",
        tools(("p1", "update_plan", {"steps": [{"step": "think", "status": "completed"}]}), delay=0.08),
        text("Plan ", "is ", "ready.", delay=0.08),
    )
    stream = agent_stream(server, "Write it together", workflow_id="team")
    session_id = stream.headers["X-Odysseus-Session-Id"]
    frames = stream.events()
    names = [f["event"] for f in frames]
    assert names[:2] == ["run_started", "start"] and names[-2:] == ["done", "close"]
    assert names.count("delegation_start") == 2 and names.count("delegation_complete") == 2
    ids = {f["data"]["target_agent_id"]: f["data"]["delegation_id"] for f in frames if f["event"] == "delegation_start"}
    for delegation_id in ids.values():
        mine = [
            f["event"]
            for f in frames
            if isinstance(f["data"], dict) and f["data"].get("delegation_id") == delegation_id
        ]
        assert mine[0] == "delegation_start" and mine[-1] == "delegation_complete"
        assert "delegation_chunk" in mine
    beta = [f["event"] for f in frames if f["data"].get("delegation_id") == ids["beta_two"]]
    assert beta.index("delegation_tool_call") < beta.index("delegation_tool_result") < beta.index("delegation_chunk")
    # the two specialists streamed at the same time: their events interleave
    owners = [f["data"]["delegation_id"] for f in frames if f["event"] in ("delegation_chunk", "delegation_tool_call")]
    first_beta, last_alpha = owners.index(ids["beta_two"]), len(owners) - 1 - owners[::-1].index(ids["alpha_one"])
    assert first_beta < last_alpha
    completes = {f["data"]["target_agent_id"]: f["data"] for f in frames if f["event"] == "delegation_complete"}
    assert (
        completes["alpha_one"]["status"] == "success"
        and completes["alpha_one"]["result_preview"] == "Intro part one two three four five six seven eight."
    )
    assert completes["alpha_one"]["tokens_input"] == 11 and completes["alpha_one"]["tokens_output"] == 7
    assert completes["beta_two"]["tokens_input"] == 22 and completes["alpha_one"]["duration_ms"] > 0
    call = next(f["data"] for f in frames if f["event"] == "delegation_tool_call")
    assert call["tool"] == "update_plan" and call["tool_call_id"] == "p1" and call["arguments"]["steps"]
    result = next(f["data"] for f in frames if f["event"] == "delegation_tool_result")
    assert result["success"] is True and result["duration_ms"] >= 0 and len(result["content"]) <= 500
    # the last supervisor chunk comes after every delegation finished
    last_complete = max(i for i, n in enumerate(names) if n == "delegation_complete")
    assert "chunk" in names[last_complete:]
    # what the models were sent: the specialists only their task, the supervisor the results by call id
    alpha_body = scripts.requests_of("alpha_one")[0].body
    assert [m["role"] for m in alpha_body["messages"]] == ["system", "user"]
    assert alpha_body["messages"][1]["content"] == "Write the intro." and "Write it together" not in str(alpha_body)
    boss_second = scripts.requests_of("chief_boss")[1].body["messages"]
    tool_msgs = {m["tool_call_id"]: m["content"] for m in boss_second if m["role"] == "tool"}
    assert tool_msgs == {"d_a": "Intro part one two three four five six seven eight.", "d_b": "Plan is ready."}
    reply, messages = saved_reply(server, session_id)
    assert reply["content"] == "Splitting the work.\n\nBoth parts are in. Done."
    records = {r["target_agent_id"]: r for r in reply["metadata"]["delegations"]}
    assert (
        records["alpha_one"]["content"] == "Intro part one two three four five six seven eight."
        and records["alpha_one"]["status"] == "success"
    )
    assert (
        records["beta_two"]["tools"][0]["tool"] == "update_plan" and records["beta_two"]["tools"][0]["success"] is True
    )
    usage = reply["metadata"]["alloy"]["usage_total"]
    assert usage == {"input_tokens": 11 * 2 + 11 + 22, "output_tokens": 7 * 5}
    assert messages[-2]["metadata"]["agent"] == {
        "workflow_id": "team",
        "agent_id": "chief_boss",
        "routed_by": "workflow_id",
    }


def test_chat_projection_and_refusals_self_up_the_chain_and_depth(server, scripts, workflow):
    scripts.script(
        "chief_boss",
        tools(delegate("d1", "chief_boss", "do it yourself"), delegate("d2", "alpha_one", "lead a sub-task")),
        text("Wrapped up."),
    )
    scripts.script(
        "alpha_one",
        tools(
            delegate("a_self", "alpha_one", "me again"),
            delegate("a_up", "chief_boss", "back up"),
            delegate("a_down", "beta_two", "leaf task"),
        ),
        text("alpha summary"),
    )
    scripts.script("beta_two", tools(delegate("b_deep", "gamma_three", "too deep")), text("beta leaf"))
    frames = chat_frames(post_chat(server.url, "nest please", mode="agent", workflow_id="team"))
    completes = {f["tool_call_id"]: f for f in of(frames, "delegation_complete")}
    assert "itself" in completes["d1"]["error"] and completes["d1"]["refused"] is True
    assert "itself" in completes["a_self"]["error"]
    assert "never goes back up" in completes["a_up"]["error"]
    assert "depth limit (2)" in completes["b_deep"]["error"]
    assert completes["a_down"]["status"] == "success" and completes["a_down"]["result_preview"] == "beta leaf"
    assert completes["d2"]["status"] == "success"
    starts = {f["tool_call_id"]: f for f in of(frames, "delegation_start")}
    assert set(starts) == {"d2", "a_down"}  # refusals send only delegation_complete
    assert starts["a_down"]["parent_delegation_id"] == starts["d2"]["delegation_id"] and starts["a_down"]["depth"] == 2
    assert not scripts.requests_of("gamma_three")
    assert [f["type"] for f in frames][-3:] == ["message_saved", "agent_terminal", "[DONE]"]


def test_timeout_and_failing_specialist(server, scripts, workflow):
    from fakeproviders import Reply

    scripts.script(
        "chief_boss",
        tools(delegate("t1", "alpha_one", "hang"), delegate("t2", "beta_two", "fail")),
        text("Reported the failures."),
    )
    scripts.script("alpha_one", Reply(end="silent"))
    scripts.script("beta_two", Reply(status=500, body={"error": {"message": "specialist model broke"}}))
    started = time.monotonic()
    frames = chat_frames(post_chat(server.url, "try both", mode="agent", workflow_id="team", timeout=60))
    completes = {f["tool_call_id"]: f for f in of(frames, "delegation_complete")}
    assert completes["t1"]["status"] == "failed" and completes["t1"]["error"] == "timed out after 3 s"
    assert completes["t2"]["status"] == "failed" and "500" in completes["t2"]["error"] + str(completes["t2"])
    assert time.monotonic() - started < 30
    hung = scripts.requests_of("alpha_one")[0]
    assert hung.disconnected_at is not None  # the timed-out specialist's connection was closed
    tool_msgs = {
        m["tool_call_id"]: m["content"]
        for m in scripts.requests_of("chief_boss")[1].body["messages"]
        if m["role"] == "tool"
    }
    assert "timed out after 3 s" in tool_msgs["t1"] and tool_msgs["t2"].startswith(
        "Error: the specialist beta_two failed"
    )
    assert of(frames, "agent_terminal")[0]["data"]["completion"] == "complete"


def test_stop_during_delegations_closes_every_child_connection_within_a_second(server, scripts, workflow):
    scripts.script(
        "chief_boss",
        tools(
            delegate("s1", "alpha_one", "long a"),
            delegate("s2", "beta_two", "long b"),
            delegate("s3", "gamma_three", "long c"),
        ),
    )
    for agent in ("alpha_one", "beta_two", "gamma_three"):
        scripts.script(agent, stall(f"{agent} working..."))
    stream = post_chat(server.url, "stop me", mode="agent", workflow_id="team")
    session_id, run_id = stream.headers["X-Odysseus-Session-Id"], stream.headers["X-Odysseus-Run-Id"]
    wait_for(
        lambda: all(scripts.requests_of(a) for a in ("alpha_one", "beta_two", "gamma_three")),
        15,
        what="three specialists",
    )
    seen = 0
    for frame in stream.frames():
        if isinstance(frame.get("data"), dict) and frame["data"].get("type") == "delegation_chunk":
            seen += 1
            if seen == 3:
                break
    stopped_at = time.monotonic()
    assert requests.post(
        f"{server.url}/api/chat/stop/{session_id}", headers={"X-Odysseus-Run-Id": run_id}, timeout=10
    ).json() == {"stopped": True}
    children = [scripts.requests_of(a)[0] for a in ("alpha_one", "beta_two", "gamma_three")]
    wait_for(lambda: all(r.disconnected_at is not None for r in children), 5, what="children disconnected")
    assert all(r.disconnected_at - stopped_at < 1.0 for r in children), [
        r.disconnected_at - stopped_at for r in children
    ]
    rest = chat_frames(stream)
    terminal = of(rest, "agent_terminal")[0]["data"]
    assert terminal["status"] == "stopped" and terminal["completion"] == "stopped"
    reply, _ = saved_reply(server, session_id)
    assert {r["status"] for r in reply["metadata"]["delegations"]} == {"stopped"}
    assert {r["content"] for r in reply["metadata"]["delegations"]} == {
        f"{a} working..." for a in ("alpha_one", "beta_two", "gamma_three")
    }


def test_resume_mid_delegation_has_no_gap_and_no_duplicate(server, scripts, workflow):
    scripts.script(
        "chief_boss",
        tools(delegate("r1", "alpha_one", "slow one"), delegate("r2", "beta_two", "slow two")),
        text("Resumed fine."),
    )
    scripts.script("alpha_one", text(*[f"a{i} " for i in range(12)], delay=0.06))
    scripts.script("beta_two", text(*[f"b{i} " for i in range(12)], delay=0.06))
    stream = post_chat(server.url, "resume me", mode="agent", workflow_id="team")
    session_id = stream.headers["X-Odysseus-Session-Id"]
    before = []
    for frame in stream.frames():
        if "comment" in frame:
            continue
        before.append(frame)
        if sum(1 for f in before if isinstance(f["data"], dict) and f["data"].get("type") == "delegation_chunk") == 5:
            break
    stream.close()
    cursor = before[-1]["id"]
    after = open_stream(
        "GET", f"{server.url}/api/chat/resume/{session_id}", headers={"Last-Event-ID": str(cursor)}
    ).events()
    full = open_stream("GET", f"{server.url}/api/chat/resume/{session_id}").events()
    assert before + after == full
    ids = [f["id"] for f in full]
    assert ids == list(range(ids[0], ids[0] + len(ids)))  # contiguous: no gap, no duplicate
    chunks = "".join(
        f["data"]["content"]
        for f in full
        if isinstance(f["data"], dict)
        and f["data"].get("type") == "delegation_chunk"
        and f["data"]["target_agent_id"] == "alpha_one"
    )
    assert chunks == "".join(f"a{i} " for i in range(12))
    run_id = stream.headers["X-Odysseus-Run-Id"]
    attach = open_stream("GET", f"{server.url}/api/agent/chat/stream/attach?run_id={run_id}&after={cursor}").events()
    # the agent projection resumes the same log: the same delegation events under the same ids
    assert [f["id"] for f in attach if f["event"].startswith("delegation_")] == [
        f["id"] for f in after if isinstance(f["data"], dict) and str(f["data"].get("type")).startswith("delegation_")
    ]
    assert [f["event"] for f in attach].count("delegation_complete") == 2


def test_specialist_approval_card_then_the_answer_continues_the_workflow(server, scripts, workflow):
    scripts.script(
        "chief_boss",
        tools(delegate("w1", "shell_runner", "write the file"), delegate("w2", "alpha_one", "say hi")),
        text("The file is written."),
    )
    scripts.script(
        "shell_runner", tools(("sh1", "shell", {"command": "echo alloy > out.txt; cat out.txt"})), text("Wrote out.txt")
    )
    scripts.script("alpha_one", text("hi"))
    first = post_chat(server.url, "write it", mode="agent", workflow_id="team")
    session_id = first.headers["X-Odysseus-Session-Id"]
    frames = chat_frames(first)
    card = of(frames, "ask_user")[0]["data"]
    assert card["kind"] == "tool_approval" and card["target_agent_id"] == "shell_runner" and card["tool"] == "shell"
    assert of(frames, "agent_terminal")[0]["data"]["completion"] == "awaiting_approval"
    workdir = os.path.join(server.data_dir, "workspaces", "local", session_id)
    assert not os.path.exists(os.path.join(workdir, "out.txt"))
    reply, _ = saved_reply(server, session_id)
    assert reply["metadata"]["agent"]["awaiting_approval"]["approval_id"] == card["approval_id"]
    assert {r["target_agent_id"]: r["status"] for r in reply["metadata"]["delegations"]} == {
        "shell_runner": "awaiting_approval",
        "alpha_one": "success",
    }

    answer = chat_frames(
        post_chat(
            server.url,
            "",
            mode="agent",
            session_id=session_id,
            workflow_id="team",
            tool_approval_id=card["approval_id"],
            tool_approval_decision="approve",
        )
    )
    kinds = [f["type"] for f in answer]
    assert kinds.index("delegation_start") < kinds.index("tool_approval_resolved") < kinds.index("delegation_complete")
    start = of(answer, "delegation_start")[0]
    assert start["resumed"] is True and start["target_agent_id"] == "shell_runner"
    assert of(answer, "delegation_tool_result")[0]["content"].strip() == "alloy"
    assert of(answer, "delegation_complete")[0]["result_preview"] == "Wrote out.txt"
    with open(os.path.join(workdir, "out.txt")) as fh:
        assert fh.read() == "alloy\n"
    boss_last = scripts.requests_of("chief_boss")[-1].body["messages"]
    assert {m["tool_call_id"]: m["content"] for m in boss_last if m["role"] == "tool"} == {
        "w2": "hi",
        "w1": "Wrote out.txt",
    }
    assert [f["type"] for f in answer][-3:] == ["message_saved", "agent_terminal", "[DONE]"]


def test_exhibits_pass_through_and_are_saved(server, scripts, workflow):
    exhibit = {"id": "exh_team", "title": "Flow", "elements": [{"type": "mermaid", "content": "graph TD; A-->B"}]}
    scripts.script("chief_boss", tools(delegate("e1", "gamma_three", "draw it")), text("Drawn."))
    scripts.script("gamma_three", tools(("x1", "present_exhibit", exhibit)), text("drew it"))
    stream = post_chat(server.url, "draw", mode="agent", workflow_id="team")
    frames = chat_frames(stream)
    shown = of(frames, "exhibit")
    assert len(shown) == 1 and shown[0]["id"] == "exh_team" and not of(frames, "delegation_tool_call")
    reply, _ = saved_reply(server, stream.headers["X-Odysseus-Session-Id"])
    assert [e["id"] for e in reply["metadata"]["exhibits"]] == ["exh_team"]


def test_routing_unknown_workflow_is_404_before_the_stream_and_target_agent_still_works(server, scripts, workflow):
    sessions = len(requests.get(server.url + "/api/sessions", timeout=10).json()["sessions"])
    for path in ("/api/agent/chat/stream", "/api/chat_stream"):
        missing = requests.post(
            server.url + path, json={"message": "x", "mode": "agent", "workflow_id": "nope"}, timeout=10
        )
        assert missing.status_code == 404 and "nope" in missing.json()["error"]
        bad = requests.post(server.url + path, json={"message": "x", "mode": "agent", "workflow_id": 7}, timeout=10)
        assert bad.status_code == 400
    assert len(requests.get(server.url + "/api/sessions", timeout=10).json()["sessions"]) == sessions
    scripts.script("beta_two", text("beta direct"))
    stream = agent_stream(server, "just beta", target_agent_id="beta_two")
    frames = stream.events()
    assert "".join(f["data"]["content"] for f in frames if f["event"] == "chunk") == "beta direct"
    _, messages = saved_reply(server, stream.headers["X-Odysseus-Session-Id"])
    assert messages[-2]["metadata"]["agent"]["routed_by"] == "target_agent_id"
    # workflow_id wins over target_agent_id
    scripts.script("chief_boss", text("boss answers"))
    frames = agent_stream(server, "who answers", workflow_id="team", target_agent_id="beta_two").events()
    assert "".join(f["data"]["content"] for f in frames if f["event"] == "chunk") == "boss answers"
