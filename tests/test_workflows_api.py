"""Workflows CRUD (/api/alloy/workflows): shapes, validation messages, nothing stored on a rejection, owners."""

from __future__ import annotations

import pytest

from odysseus import create_app


def agent(client, agent_id):
    response = client.post("/api/agents", json={"agent_id": agent_id, "name": agent_id})
    assert response.status_code == 201, response.get_json()


@pytest.fixture
def team(client):
    for agent_id in ("lead_boss", "brave_turing", "calm_curie"):
        agent(client, agent_id)
    return {
        "id": "research-team",
        "name": "Research team",
        "supervisor_agent_id": "lead_boss",
        "members": [
            {"agent_id": "lead_boss", "role": "supervisor"},
            {"agent_id": "brave_turing", "role": "specialist", "delegation_hint": "searches"},
            {"agent_id": "calm_curie", "role": "specialist"},
        ],
    }


def test_create_get_list_patch_delete(client, team):
    created = client.post("/api/alloy/workflows", json=team)
    assert created.status_code == 201
    workflow = created.get_json()["workflow"]
    assert workflow["id"] == "research-team" and workflow["members"][1]["delegation_hint"] == "searches"
    assert workflow["description"] is None and workflow["supervisor_agent_id"] == "lead_boss"
    assert client.get("/api/alloy/workflows/research-team").get_json() == {"workflow": workflow}
    assert client.get("/api/alloy/workflows").get_json() == {"workflows": [workflow]}
    changed = client.patch(
        "/api/alloy/workflows/research-team", json={"description": "finds things", "members": team["members"][:2]}
    )
    assert changed.status_code == 200
    assert changed.get_json()["workflow"]["description"] == "finds things"
    assert len(changed.get_json()["workflow"]["members"]) == 2
    # swapping the supervisor through members alone follows the members' supervisor
    swapped = client.patch(
        "/api/alloy/workflows/research-team",
        json={
            "members": [
                {"agent_id": "lead_boss", "role": "specialist"},
                {"agent_id": "brave_turing", "role": "supervisor"},
            ]
        },
    )
    assert swapped.status_code == 200 and swapped.get_json()["workflow"]["supervisor_agent_id"] == "brave_turing"
    assert client.delete("/api/alloy/workflows/research-team").get_json() == {"deleted": True}
    assert client.get("/api/alloy/workflows/research-team").status_code == 404
    assert client.delete("/api/alloy/workflows/research-team").status_code == 404


def test_generated_id_is_unguessable_and_fits_the_pattern(client, team):
    body = {k: v for k, v in team.items() if k != "id"}
    first = client.post("/api/alloy/workflows", json=body).get_json()["workflow"]["id"]
    second = client.post("/api/alloy/workflows", json=body).get_json()["workflow"]["id"]
    assert first != second and first.startswith("wf-") and len(first) >= 3 + 26
    assert first == first.lower() and all(c.isalnum() or c == "-" for c in first)


def _members(*pairs):
    return [{"agent_id": a, "role": r} for a, r in pairs]


@pytest.mark.parametrize(
    "change, message",
    [
        ({"id": "Has Caps"}, "lowercase letters, digits and dashes"),
        ({"id": "-dash-first"}, "lowercase letters"),
        ({"id": 5}, "lowercase letters"),
        ({"name": ""}, "name"),
        ({"name": None}, "name is required"),
        ({"name": "x" * 201}, "longer than 200"),
        ({"description": 3}, "description must be a string"),
        ({"members": []}, "non-empty list"),
        ({"members": "lead_boss"}, "non-empty list"),
        ({"members": [5]}, "members[0] must be an object"),
        ({"members": _members(("lead_boss", "boss"))}, "role must be"),
        ({"members": _members(("lead_boss", "specialist"), ("brave_turing", "specialist"))}, "exactly one member"),
        ({"members": _members(("lead_boss", "supervisor"), ("brave_turing", "supervisor"))}, "exactly one member"),
        ({"members": _members(("lead_boss", "supervisor"))}, "at least one specialist"),
        (
            {
                "members": _members(
                    ("lead_boss", "supervisor"), ("brave_turing", "specialist"), ("brave_turing", "specialist")
                )
            },
            "listed twice",
        ),
        ({"members": _members(("lead_boss", "supervisor"), ("ghost_agent", "specialist"))}, "'ghost_agent' not found"),
        ({"supervisor_agent_id": "brave_turing"}, "must be the member whose role is supervisor"),
        ({"supervisor_agent_id": 7}, "supervisor_agent_id must be a string"),
        (
            {
                "members": [
                    {"agent_id": "lead_boss", "role": "supervisor"},
                    {"agent_id": "calm_curie", "role": "specialist", "delegation_hint": 1},
                ]
            },
            "delegation_hint",
        ),
        ({"members": [{"agent_id": f"a_{i}", "role": "specialist"} for i in range(21)]}, "at most 20"),
    ],
)
def test_invalid_workflows_are_400_with_a_clear_message_and_store_nothing(client, team, change, message):
    response = client.post("/api/alloy/workflows", json={**team, **change})
    assert response.status_code == 400, response.get_json()
    assert message in response.get_json()["error"]
    assert client.get("/api/alloy/workflows").get_json() == {"workflows": []}


def test_duplicate_id_conflicts_and_patch_validates_the_whole_result(client, team):
    assert client.post("/api/alloy/workflows", json=team).status_code == 201
    assert client.post("/api/alloy/workflows", json=team).status_code == 409
    before = client.get("/api/alloy/workflows/research-team").get_json()
    for change in (
        {"supervisor_agent_id": "calm_curie"},
        {"id": "renamed"},
        {"members": []},
        {"members": _members(("lead_boss", "supervisor"), ("ghost_agent", "specialist"))},
    ):
        assert client.patch("/api/alloy/workflows/research-team", json=change).status_code == 400
    assert client.patch("/api/alloy/workflows/research-team", json={}).status_code == 400
    assert (
        client.patch("/api/alloy/workflows/research-team", data="nope", content_type="application/json").status_code
        == 400
    )
    assert client.get("/api/alloy/workflows/research-team").get_json() == before
    assert client.patch("/api/alloy/workflows/unknown", json={"name": "x"}).status_code == 404


def test_another_owner_sees_404_and_cannot_use_a_foreign_agent(tmp_path):
    app = create_app({"DATA_DIR": str(tmp_path), "PROVIDERS": [], "AUTH": "none"})
    store = app.extensions["odysseus.store"]
    try:
        for agent_id in ("lead_boss", "brave_turing"):
            store.agents.create("alice", {"name": agent_id}, agent_id)
        store.agents.create("bob", {"name": "bob"}, "bob_own")
        members = _members(("lead_boss", "supervisor"), ("brave_turing", "specialist"))
        store.workflows.create("alice", {"id": "shared-name", "name": "A", "members": members})
        from odysseus.errors import BadRequest, NotFound

        with pytest.raises(NotFound):
            store.workflows.get("bob", "shared-name")
        with pytest.raises(NotFound):
            store.workflows.update("bob", "shared-name", {"name": "pwned"})
        with pytest.raises(NotFound):
            store.workflows.delete("bob", "shared-name")
        with pytest.raises(BadRequest) as refused:  # alice's agents do not exist for bob
            store.workflows.create(
                "bob", {"name": "B", "members": _members(("bob_own", "supervisor"), ("brave_turing", "specialist"))}
            )
        assert "not found" in str(refused.value)
        # the same id in another owner's namespace is fine
        store.agents.create("bob", {"name": "x"}, "bob_two")
        store.workflows.create(
            "bob",
            {
                "id": "shared-name",
                "name": "B",
                "members": _members(("bob_own", "supervisor"), ("bob_two", "specialist")),
            },
        )
        assert store.workflows.get("alice", "shared-name")["name"] == "A"
        assert [w["id"] for w in store.workflows.list("bob")] == ["shared-name"]
    finally:
        app.extensions["odysseus.runs"].close()


def test_a_deleted_supervisor_is_404_before_the_stream_and_a_deleted_specialist_is_left_out(client, team):
    assert client.post("/api/alloy/workflows", json=team).status_code == 201
    assert client.delete("/api/agents/calm_curie").status_code == 200
    from odysseus.turns.workflow import make_plan

    store = client.application.extensions["odysseus.store"]
    plan = make_plan(store, "local", store.workflows.get("local", "research-team"))
    assert set(plan["agents"]) == {"lead_boss", "brave_turing"}
    assert client.delete("/api/agents/lead_boss").status_code == 200
    for path in ("/api/chat_stream", "/api/agent/chat/stream"):
        response = client.post(path, json={"message": "hi", "mode": "agent", "workflow_id": "research-team"})
        assert response.status_code == 404 and "no longer exists" in response.get_json()["error"]
    assert client.get("/api/sessions").get_json()["sessions"] == []  # nothing stored
