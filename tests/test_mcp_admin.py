"""The admin's MCP servers (issue 34, step 6): CRUD, hostile input, secrets never returned, admin only,
config servers read-only, Test against real servers, and the set another app on the same database sees."""

from __future__ import annotations

import sys

import pytest
from agent_fakes import say, use_script
from apphelpers import Recorder, close_app
from mcp_helpers import HOSTILE, TIME_SERVER

from odysseus import create_app

H = {"Origin": "http://localhost"}
TOKEN = "Bearer very-secret-token-0123456789-WXYZ"
ENV_SECRET = "env-secret-value-9876543210-ABCD"


CONFIG = {
    "time": {"command": TIME_SERVER, "sandbox": False},
    "remote": {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": TOKEN}},
}


def make_app(tmp_path, auth="password"):
    return create_app(
        {
            "DATA_DIR": str(tmp_path),
            "AUTH": auth,
            "PROVIDERS": [],
            "AGENT_TOOLS": "update_plan",
            "LOGIN_FREE_FAILURES": 1000,
            "LOGIN_FREE_FAILURES_ADDRESS": 1000,
            "MCP_START_TIMEOUT": 60.0,
            "MCP_SERVERS": CONFIG,
        }
    )


@pytest.fixture
def accounts(tmp_path):
    app = make_app(tmp_path)
    anon = app.test_client()
    anon.post("/api/auth/setup", json={"username": "root", "password": "root-pass-1"}, headers=H)
    admin = app.test_client()
    admin.post("/api/auth/login", json={"username": "root", "password": "root-pass-1"}, headers=H)
    admin.post("/api/auth/users", json={"username": "bob", "password": "bob-pass-1"}, headers=H)
    bob = app.test_client()
    bob.post("/api/auth/login", json={"username": "bob", "password": "bob-pass-1"}, headers=H)
    yield app, Recorder(admin), Recorder(bob)
    close_app(app)


HOSTILE_BODY = {"name": "hostile", "command": sys.executable, "args": [HOSTILE, "normal"], "sandbox": False}


def test_crud_keeps_secrets_and_config_servers_read_only(accounts):
    app, admin, _ = accounts
    listed = admin.get("/api/admin/mcp-servers").get_json()["servers"]
    assert [(s["name"], s["source"], s["read_only"]) for s in listed] == [
        ("time", "config", True),
        ("remote", "config", True),
    ]
    assert listed[1]["headers"] == {"Authorization": {"set": True, "last4": "WXYZ"}}
    assert listed[0]["status"]["state"] == "idle"  # started on first use
    for method in ("patch", "delete"):
        refused = getattr(admin, method)("/api/admin/mcp-servers/time", json={"enabled": False})
        assert refused.status_code == 409
    taken = admin.post("/api/admin/mcp-servers", json={"name": "time", "command": "x"})
    assert taken.status_code == 409

    body = {**HOSTILE_BODY, "env": {"SECRET": ENV_SECRET}, "approval": "auto", "users": ["bob"]}
    created = admin.post("/api/admin/mcp-servers", json=body)
    assert created.status_code == 201, created.get_json()
    view = created.get_json()
    assert view["source"] == "database" and view["read_only"] is False and view["transport"] == "stdio"
    assert view["env"] == {"SECRET": {"set": True, "last4": "ABCD"}} and view["users"] == ["bob"]
    assert admin.post("/api/admin/mcp-servers", json=body).status_code == 409  # the name is taken

    kept = admin.patch("/api/admin/mcp-servers/hostile", json={"env": {"SECRET": None}, "timeout": 30})
    assert kept.status_code == 200 and kept.get_json()["timeout"] == 30.0
    assert app.extensions["odysseus.store"].mcp_servers.get("hostile").env == {"SECRET": ENV_SECRET}
    renamed = admin.patch("/api/admin/mcp-servers/hostile", json={"name": "other"})
    assert renamed.status_code == 400
    missing = admin.patch("/api/admin/mcp-servers/nope", json={"enabled": False})
    assert missing.status_code == 404

    web = admin.post(
        "/api/admin/mcp-servers", json={"name": "web", "url": "http://127.0.0.1:9/mcp", "headers": {"X-Key": TOKEN}}
    )
    assert web.status_code == 201 and web.get_json()["sandbox"] is False
    moved = admin.patch("/api/admin/mcp-servers/web", json={"url": "http://evil.example/mcp"})
    assert moved.status_code == 400 and "enter the headers again" in moved.get_json()["error"]
    moved = admin.patch(
        "/api/admin/mcp-servers/web", json={"url": "http://evil.example/mcp", "headers": {"X-Key": None}}
    )
    assert moved.status_code == 400
    assert admin.patch("/api/admin/mcp-servers/web", json={"headers": {"X-Key": None, "X-New": "v"}}).status_code == 200
    assert app.extensions["odysseus.store"].mcp_servers.get("web").headers == {"X-Key": TOKEN, "X-New": "v"}

    assert admin.delete("/api/admin/mcp-servers/web").get_json() == {"deleted": "web"}
    assert admin.delete("/api/admin/mcp-servers/web").status_code == 404
    names = [s["name"] for s in admin.get("/api/admin/mcp-servers").get_json()["servers"]]
    assert names == ["time", "remote", "hostile"]
    admin.assert_never(TOKEN)
    admin.assert_never(ENV_SECRET)


@pytest.mark.parametrize(
    "body",
    [
        {"name": "Bad Name", "command": "x"},
        {"name": "ok"},
        {"name": "ok", "command": "x", "url": "http://h/mcp"},
        {"name": "ok", "command": "x", "rogue": True},
        {"name": "ok", "url": "file:///etc/passwd"},
        {"name": "ok", "command": "x", "args": [1, 2]},
        {"name": "ok", "command": "x", "env": {"A": 3}},
        {"name": "ok", "url": "http://h/mcp", "headers": {"A": "b\r\nX: y"}},
        {"name": "ok", "command": "x", "timeout": -1},
        {"name": "ok", "command": "x", "approval": "sometimes"},
        {"name": "ok", "command": "x", "users": "bob"},
        {"name": "ok", "command": "x" * 2000},
        {"name": "ok", "command": "x", "enabled": "yes"},
    ],
)
def test_bad_input_is_a_400_and_stores_nothing(accounts, body):
    app, admin, _ = accounts
    response = admin.post("/api/admin/mcp-servers", json=body)
    assert response.status_code == 400 and response.get_json()["error"]
    assert app.extensions["odysseus.store"].mcp_servers.specs() == []


def test_only_an_admin_may_see_or_change_the_servers(accounts):
    _, _, bob = accounts
    assert bob.get("/api/admin/mcp-servers").status_code == 403
    assert bob.post("/api/admin/mcp-servers", json=HOSTILE_BODY).status_code == 403
    assert bob.patch("/api/admin/mcp-servers/time", json={"enabled": False}).status_code == 403
    assert bob.delete("/api/admin/mcp-servers/time").status_code == 403
    assert bob.post("/api/admin/mcp-servers/time/test", json={}).status_code == 403


def test_test_connects_initializes_and_lists_or_says_why_not(accounts):
    _, admin, _ = accounts
    ok = admin.post("/api/admin/mcp-servers/time/test", json={}).get_json()
    assert ok["ok"] is True and ok["latency_ms"] > 0
    assert [t["name"] for t in ok["tools"]] == ["get_current_time", "convert_time"]
    assert ok["tools"][0]["description"].startswith("Get current time")
    refused = admin.post("/api/admin/mcp-servers/remote/test", json={}).get_json()
    assert refused["ok"] is False and refused["error"] and TOKEN not in refused["error"]
    admin.post("/api/admin/mcp-servers", json={**HOSTILE_BODY, "name": "dies", "args": [HOSTILE, "dies"]})
    dies = admin.post("/api/admin/mcp-servers/dies/test", json={}).get_json()
    assert dies == {"ok": False, "error": dies["error"]} and "cannot open the database /nowhere" in dies["error"]
    assert admin.post("/api/admin/mcp-servers/nope/test", json={}).status_code == 404


def test_the_single_user_owner_manages_servers_and_turns_use_them_at_once(tmp_path):
    app = make_app(tmp_path, auth="none")
    other = create_app(dict(app.config))  # another worker on the same database
    try:
        owner = Recorder(app.test_client())
        assert owner.post("/api/admin/mcp-servers", json={**HOSTILE_BODY, "approval": "auto"}).status_code == 201

        def offered(application):
            provider = use_script(application, [say("ok")])
            application.test_client().post("/api/chat_stream", json={"mode": "agent", "message": "hi"}).get_data()
            return [t["function"]["name"] for t in provider.requests[0].tools or []]

        assert "mcp__hostile__echo" in offered(app)
        assert "mcp__hostile__echo" in offered(other)  # its version check reads the new set
        assert owner.delete("/api/admin/mcp-servers/hostile").status_code == 200
        assert not any(name.startswith("mcp__hostile__") for name in offered(app))
        other.extensions["odysseus.mcp"]._checked = 0  # past its SYNC_INTERVAL
        assert not any(name.startswith("mcp__hostile__") for name in offered(other))
    finally:
        close_app(other)
        close_app(app)
