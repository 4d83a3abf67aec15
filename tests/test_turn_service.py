"""The service layer (``odysseus/turns/``): a typed ``TurnRequest`` from any entry point to the engine,
``start_turn`` without Flask, background jobs without an app context, and job rows old and new."""

from __future__ import annotations

import threading

import flask
import pytest
from waiting import wait_for

from odysseus.context.options import ContextOptions
from odysseus.errors import BadRequest
from odysseus.turns.parse import AGENT_API, BACKGROUND, CHAT_STREAM, RESEARCH_API
from odysseus.turns.registry import PreparedTurn, register_mode
from odysseus.turns.request import AgentChoice, ApprovalAnswer, BranchAsk, TurnRequest

FULL_BODY = {
    "message": "hello",
    "mode": "agent",
    "session_id": "s_abc",
    "model": "demo",
    "temperature": "0.5",
    "client_message_id": "c-1",
    "max_tokens": 300,
    "attachments": "up_1, up_2, up_1",
    "use_rag": "off",
    "use_web": True,
    "use_memory": "false",
    "workspace": "/srv/project",
    "tool_approval_id": "apr_1",
    "tool_approval_decision": "approve",
    "tool_approval_call": {"tool": "shell", "arguments": {"command": "ls"}},
    "continue": "yes",
    "workflow_id": "team",
    "active_doc_id": "doc_1",
    "max_rounds": "3",
    "edit_of": 7,
    "agent_profile_id": "planner",
    "probe": {"for": "a source outside the package"},
}


def test_every_field_is_typed_and_the_rest_is_extra(app):
    turns = app.extensions["odysseus.turns"]
    request = turns.parse(FULL_BODY, CHAT_STREAM)
    assert request.mode == "agent" and request.session_id == "s_abc" and request.temperature == 0.5
    assert request.context == ContextOptions(
        attachments=("up_1", "up_2"), use_rag=False, use_web=True, use_memory=False, workspace="/srv/project"
    )
    assert request.approval == ApprovalAnswer("apr_1", "approve", {"tool": "shell", "arguments": {"command": "ls"}})
    assert request.resume is True and request.workflow_id == "team" and request.active_doc_id == "doc_1"
    assert request.research == {"max_rounds": 3} and request.max_tokens == 300
    assert request.branch == BranchAsk("edit", 7) and request.owner_defaults is True
    assert request.route == AgentChoice(profile_id="planner")  # an agent turn is routed on every entry point
    assert request.extra == {"probe": {"for": "a source outside the package"}}
    chat = turns.parse({**FULL_BODY, "mode": "chat"}, CHAT_STREAM)
    assert chat.route is None and chat.extra["agent_profile_id"] == "planner"  # a chat turn is not routed
    routed = turns.parse(FULL_BODY, AGENT_API)
    assert routed.route == AgentChoice(profile_id="planner") and routed.branch is None
    assert "edit_of" in routed.extra and "agent_profile_id" not in routed.extra


def test_a_request_survives_the_job_table(app):
    turns = app.extensions["odysseus.turns"]
    for rules in (CHAT_STREAM, AGENT_API, BACKGROUND, RESEARCH_API):
        request = turns.parse(FULL_BODY, rules)
        stored = request.to_json()
        assert TurnRequest.is_json(stored) and not TurnRequest.is_json(FULL_BODY)
        assert TurnRequest.from_json(stored) == request


@pytest.mark.parametrize(
    "body, error",
    [
        ({}, "message is required"),
        ({"message": "x", "mode": "nope"}, "unknown mode"),
        ({"message": "x", "use_rag": "maybe"}, "use_rag must be true or false"),
        ({"message": "x", "attachments": [1]}, "attachments must be a list"),
        ({"message": "x", "max_tokens": 0}, "max_tokens must be"),
        ({"message": "x", "workflow_id": 5}, "workflow_id must be"),
        ({"message": "x", "max_rounds": "lots"}, "max_rounds must be a number"),
        ({"message": "x", "regenerate_of": 1, "edit_of": 2}, "send either regenerate_of or edit_of"),
        ({"message": "x", "mode": "compare", "use_research": True}, "use_research cannot be combined"),
    ],
)
def test_malformed_fields_are_refused_by_name(app, body, error):
    with pytest.raises(BadRequest, match=error):
        app.extensions["odysseus.turns"].parse(body, CHAT_STREAM)


def test_start_turn_needs_no_app_context(app):
    """A caller outside Flask (a job worker, another entry point) starts a turn with the service alone."""
    turns = app.extensions["odysseus.turns"]
    seen = {}

    def start():
        seen["context"] = flask.has_app_context()
        seen["started"] = turns.start_turn("local", TurnRequest(message="hello from a thread"))

    thread = threading.Thread(target=start)
    thread.start()
    thread.join(30)
    started = seen["started"]
    assert seen["context"] is False
    assert started.run.settled.wait(30) and started.run.status == "done" and started.run.content
    assert app.extensions["odysseus.store"].sessions.get("local", started.session_id)["title"] == "hello from a thread"


def test_background_jobs_run_without_an_app_context_and_read_old_rows(app, client):
    """Jobs start through ``start_turn`` on a pool worker with no app context pushed; a row written
    before ``TurnRequest.to_json`` (the raw body) still runs."""
    contexts = []

    def probe_builder(turns, request, candidates, owner):
        contexts.append(flask.has_app_context())
        return turns.modes.builder("chat")(turns, request, candidates, owner)

    register_mode(app, "probe", probe_builder)
    queued = client.post("/api/chat/background", json={"message": "new row", "mode": "probe"}).get_json()
    store = app.extensions["odysseus.store"]
    assert TurnRequest.is_json(store.jobs.by_id(queued["job_id"])["request"])
    session = store.sessions.create("local", "old rows")["id"]
    store.jobs.create("job_oldrow0000000000000", "local", {"message": "old row", "mode": "probe", "session": session})
    app.extensions["odysseus.jobs"].pool.submit("job_oldrow0000000000000", "local")
    for job_id in (queued["job_id"], "job_oldrow0000000000000"):
        job = wait_for(lambda j=job_id: store.jobs.by_id(j)["status"] in ("done", "error") and store.jobs.by_id(j), 30)
        assert job["status"] == "done" and job["result"], job
    assert contexts[0] is True  # the submit's validation, inside the HTTP request
    assert contexts[1:] and not any(contexts[1:])  # both job runs: no app context
    assert store.jobs.by_id("job_oldrow0000000000000")["session_id"] == session


def test_entry_points_differ_only_by_their_rules(app, client):
    """The agent API routes (an unknown profile is a 404 before anything is stored); chat_stream does not."""
    refused = client.post("/api/agent/chat/stream", json={"message": "x", "agent_profile_id": "nobody"})
    assert refused.status_code == 404
    assert client.get("/api/sessions").get_json()["sessions"] == []
    turns = app.extensions["odysseus.turns"]
    prepared = turns.modes.builder("chat")(turns, TurnRequest(message="x"), turns.router.resolve(None), "local")
    assert isinstance(prepared, PreparedTurn) and prepared.message == "x"
