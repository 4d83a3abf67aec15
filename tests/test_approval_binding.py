"""Approvals are bound to the exact call: a server-side id per call plus the call's hash.

A model that reuses one provider call id (in one round, or in the next) must not get a
second command run on the first one's approval; every call is shown on its own card.
Real /api/chat_stream round trips with a scripted provider and the real (sandboxed) shell.
"""

from __future__ import annotations

import os

import pytest
from agent_fakes import ScriptedProvider, calls, echo_tool, messages, of, post, say, use_script, workdir

from odysseus.agent.agent_loop import AgentHooks, AgentLoop, Resolution, initial_state
from odysseus.agent.guards import AgentSettings
from odysseus.cancel import CancelToken
from odysseus.errors import OdysseusError
from odysseus.llm.llm_core import Candidate
from odysseus.runs.run import RunContext
from odysseus.tools.registry import ToolContext, ToolRegistry


def start(app, client, steps):
    provider = use_script(app, steps)
    response, frames = post(client, message="do things")
    assert response.status_code == 200
    return response.headers["X-Odysseus-Session-Id"], frames, provider


def answer(client, session_id, card, decision="approve", **extra):
    return post(
        client, session_id=session_id, tool_approval_id=card["approval_id"], tool_approval_decision=decision, **extra
    )


def test_duplicate_provider_ids_in_one_round_each_get_their_own_card(agent_app):
    client = agent_app.test_client()
    session_id, frames, provider = start(
        agent_app,
        client,
        [
            calls(
                ("c1", "shell", {"command": "echo first"}),
                ("c1", "shell", {"command": "touch pwned1"}),
                ("c1", "shell", {"command": "touch pwned2"}),
            ),
            say("done"),
        ],
    )
    first = of(frames, "ask_user")[0]["data"]
    assert first["call"]["arguments"] == {"command": "echo first"}
    # the user approves what the card showed; the next call with the same provider id asks again
    response, frames = answer(client, session_id, first, tool_approval_call=first["call"])
    assert response.status_code == 200
    assert [f["output"].strip() for f in of(frames, "tool_output")] == ["first"]
    second = of(frames, "ask_user")[0]["data"]
    assert second["call"]["arguments"] == {"command": "touch pwned1"}
    assert second["call"]["server_id"] != first["call"]["server_id"]
    assert second["call_hash"] != first["call_hash"]
    assert not os.path.exists(os.path.join(workdir(agent_app, session_id), "pwned1"))
    # denying it runs nothing; the third call (same provider id again) still asks
    response, frames = answer(client, session_id, second, decision="deny")
    assert not of(frames, "tool_start")
    third = of(frames, "ask_user")[0]["data"]
    assert third["call"]["arguments"] == {"command": "touch pwned2"}
    response, frames = answer(client, session_id, third, decision="deny")
    assert of(frames, "agent_terminal")[0]["data"]["completion"] == "complete"
    assert sorted(os.listdir(workdir(agent_app, session_id))) == []
    # the provider got three distinct pairing ids, each with its own result
    sent = provider.requests[-1].messages
    ids = [c["id"] for c in sent[-4]["tool_calls"]]
    assert ids[0] == "c1" and len(set(ids)) == 3
    results = {m["tool_call_id"]: m["content"] for m in sent if m["role"] == "tool"}
    assert results[ids[0]].strip() == "first" and "denied" in results[ids[1]] and "denied" in results[ids[2]]


def test_a_reused_provider_id_in_the_next_round_asks_again(agent_app):
    client = agent_app.test_client()
    session_id, frames, provider = start(
        agent_app,
        client,
        [
            calls(("c1", "shell", {"command": "echo one"})),
            calls(("c1", "shell", {"command": "touch pwned"})),
            say("done"),
        ],
    )
    card = of(frames, "ask_user")[0]["data"]
    response, frames = answer(client, session_id, card)
    assert [f["output"].strip() for f in of(frames, "tool_output")] == ["one"]
    again = of(frames, "ask_user")
    assert again and again[0]["data"]["call"]["arguments"] == {"command": "touch pwned"}
    assert again[0]["data"]["round"] == 2
    assert not os.path.exists(os.path.join(workdir(agent_app, session_id), "pwned"))


def test_an_answer_echoing_another_calls_server_id_is_refused(agent_app):
    client = agent_app.test_client()
    session_id, frames, provider = start(
        agent_app,
        client,
        [calls(("c1", "shell", {"command": "echo first"}), ("c1", "shell", {"command": "touch pwned"})), say("done")],
    )
    card = of(frames, "ask_user")[0]["data"]
    forged = dict(card["call"], server_id="tc_someothercall000")
    response, _ = answer(client, session_id, card, tool_approval_call=forged)
    assert response.status_code == 400 and response.get_json()["reason"] == "invalid"
    assert len(messages(agent_app, session_id)) == 2  # nothing stored for the refused answer
    # the real answer still works afterwards (the refused one did not consume it)
    response, frames = answer(client, session_id, card, tool_approval_call=card["call"])
    assert response.status_code == 200 and [f["output"].strip() for f in of(frames, "tool_output")] == ["first"]


def test_approve_task_does_not_run_a_call_of_another_tool(agent_app):
    client = agent_app.test_client()
    session_id, frames, provider = start(
        agent_app,
        client,
        [calls(("c1", "shell", {"command": "echo a"}), ("c1", "update_plan", {"steps": []})), say("ok")],
    )
    card = of(frames, "ask_user")[0]["data"]
    response, frames = answer(client, session_id, card, decision="approve_task")
    assert [f["tool"] for f in of(frames, "tool_output")] == ["shell", "update_plan"]  # update_plan needs no approval


# ---------------------------------------------------------------- the loop itself
def _loop(state, resolution, tools):
    settings = AgentSettings(approval_tools=frozenset({"guarded"}))
    hooks = AgentHooks(
        request_approval=lambda ctx, call, st: {"approval_id": "apr_x", "expires_at": 0},
        tool_context=lambda ctx: ToolContext(owner="me", session_id="s", cancel=ctx.cancel, config={}),
    )
    ctx = RunContext(run_id="r", session_id="s", owner="me", cancel=CancelToken())
    provider = ScriptedProvider([say("fine")])
    return AgentLoop([Candidate(provider, "script-1")], ToolRegistry(tools), settings, hooks, state, ctx, resolution)


def test_a_resolution_for_a_different_server_id_is_refused_by_the_loop():
    state = initial_state([{"role": "user", "content": "go"}], AgentSettings())
    shown = {"id": "c1", "server_id": "tc_shown", "name": "guarded", "arguments": {"text": "a"}}
    other = {"id": "c1", "server_id": "tc_other", "name": "guarded", "arguments": {"text": "a"}}
    state["pending"] = [other]
    state["messages"].append({"role": "assistant", "content": None, "tool_calls": []})
    loop = _loop(state, Resolution("apr_x", "approve", shown), [echo_tool(needs_approval=True, name="guarded")])
    with pytest.raises(OdysseusError) as info:
        list(loop.run())
    assert info.value.status == 409
    assert state["pending"] == [other]  # nothing ran
