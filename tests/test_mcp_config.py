"""MCP servers in the configuration (issue 34): ``[mcp_servers.NAME]`` tables validated at start-up,
the same validation the admin API uses, and the public view that never shows a secret."""

from __future__ import annotations

import logging

import pytest

from odysseus import create_app
from odysseus.config import load_config
from odysseus.errors import BadRequest, OdysseusError
from odysseus.mcp.servers import check_name, from_config, public_view, spec_from, validate

TOML = """
[mcp_servers.time]
command = "/opt/mcp/bin/mcp-server-time"
args = ["--local-timezone", "UTC"]
env = { TZ = "UTC" }
timeout = 30
tools = ["get_current_time"]

[mcp_servers.tickets]
url = "https://tickets.example.org/mcp"
headers = { Authorization = "Bearer secret-token-1234" }
approval = { "*" = "ask", search = "auto" }
users = ["alice"]
"""


def test_toml_tables_become_server_specs_without_unknown_key_warnings(tmp_path, caplog):
    path = tmp_path / "odysseus.toml"
    path.write_text(TOML)
    with caplog.at_level(logging.WARNING):
        config = load_config(env={"ODYSSEUS_CONFIG": str(path)})
    assert "mcp_servers" not in str(caplog.text)
    time, tickets = from_config(config["MCP_SERVERS"])
    assert (time.name, time.transport, time.command, time.args) == (
        "time",
        "stdio",
        "/opt/mcp/bin/mcp-server-time",
        ("--local-timezone", "UTC"),
    )
    assert time.sandbox is True and time.network is False and time.enabled is True
    assert time.timeout == 30.0 and time.tools == ("get_current_time",) and time.for_everyone()
    assert time.needs_approval("get_current_time")  # approval "ask" is the default
    assert tickets.transport == "http" and tickets.sandbox is False  # a URL is never sandboxed
    assert tickets.needs_approval("create") and not tickets.needs_approval("search")
    assert not tickets.for_everyone() and tickets.users == ("alice",)


@pytest.mark.parametrize(
    "name, table, message",
    [
        ("Time", {"command": "x"}, "name must be"),
        ("a" * 25, {"command": "x"}, "name must be"),
        ("bad.name", {"command": "x"}, "name must be"),
        ("ok", {}, "either command"),
        ("ok", {"command": "x", "url": "http://h/mcp"}, "either command"),
        ("ok", {"command": "x", "bogus": 1}, "unknown field"),
        ("ok", {"url": "ftp://h/mcp"}, "http:// or https://"),
        ("ok", {"url": "http://user:pw@h/mcp"}, "credentials"),
        ("ok", {"command": "x", "args": "not a list"}, "list of strings"),
        ("ok", {"command": "x", "env": {"1BAD": "v"}}, "variable name"),
        ("ok", {"command": "x\n"}, "control characters"),
        ("ok", {"url": "http://h/mcp", "headers": {"Bad Header": "v"}}, "header name"),
        ("ok", {"url": "http://h/mcp", "headers": {"X-A": "line\r\nInjected: 1"}}, "control characters"),
        ("ok", {"command": "x", "timeout": 0}, "between 1 and"),
        ("ok", {"command": "x", "timeout": float("nan")}, "number"),
        ("ok", {"command": "x", "approval": "maybe"}, "approval"),
        ("ok", {"command": "x", "approval": {"t": "never"}}, "approval.t"),
        ("ok", {"command": "x", "sandbox": "yes"}, "true or false"),
        ("ok", {"url": "http://h/mcp", "args": ["a"]}, "stdio server"),
        ("ok", {"command": "x", "headers": {"A": "b"}}, "Streamable HTTP"),
        ("ok", "not a table", "must be a table"),
    ],
)
def test_a_bad_table_names_itself_and_stops_the_start(tmp_path, name, table, message):
    with pytest.raises(OdysseusError) as info:
        from_config({name: table})
    assert f"[mcp_servers.{name[:40]}]" in info.value.message and message in info.value.message
    with pytest.raises(OdysseusError):
        create_app({"DATA_DIR": str(tmp_path), "PROVIDERS": [], "AUTH": "none", "MCP_SERVERS": {name: table}})


def test_names_and_partial_validation():
    assert check_name("time") == "time" and check_name("git-2_x") == "git-2_x"
    for bad in ("", "-x", "x y", "é", None, 3):
        with pytest.raises(BadRequest):
            check_name(bad)
    assert validate({"enabled": False}, partial=True) == {"enabled": False}
    kept = validate({"headers": {"Authorization": None}}, partial=True, keep_secrets=True)
    assert kept == {"headers": {"Authorization": None}}
    with pytest.raises(BadRequest):
        validate({"headers": {"Authorization": None}}, partial=True)  # None only where a stored value can stay


def test_public_view_shows_only_the_last_four_characters_of_secrets():
    spec = spec_from(
        "tickets",
        validate({"url": "https://h/mcp", "headers": {"Authorization": "Bearer secret-token-1234", "X-Short": "abc"}}),
        "database",
    )
    view = public_view(spec)
    assert view["headers"] == {
        "Authorization": {"set": True, "last4": "1234"},
        "X-Short": {"set": True, "last4": None},
    }
    assert "secret-token" not in repr(view) and view["read_only"] is False and view["transport"] == "http"
