"""``@modelcontextprotocol/server-everything`` (npm), a real server we did not write, over stdio (in the
sandbox) and over Streamable HTTP (issue 34): its long-running operation's progress as ``tool_progress``,
a stop mid-call that ends the run within a second, its error result, its image content shown and stored,
and its many tools capped and picked by an allow-list."""

from __future__ import annotations

import time

import pytest
from agent_fakes import calls, of, say, sse_frames, use_script
from apphelpers import close_app
from mcp_helpers import EVERYTHING, EverythingHttp, wait_until

from odysseus import create_app


@pytest.fixture(scope="module")
def http_server():
    server = EverythingHttp().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def app(tmp_path_factory, http_server):
    application = create_app(
        {
            "DATA_DIR": str(tmp_path_factory.mktemp("everything")),
            "PROVIDERS": [],
            "AUTH": "none",
            "AGENT_TOOLS": "update_plan",
            "TOOL_PROGRESS_INTERVAL": 30.0,  # only the server's notifications make progress events here
            "MCP_START_TIMEOUT": 60.0,
            "MCP_MAX_TOOLS": 5,
            "MCP_SERVERS": {
                "ev": {"command": EVERYTHING, "args": ["stdio"], "approval": "auto", "tools": None},
                "evhttp": {"url": http_server.url, "approval": "auto"},
                "evlong": {"url": http_server.url, "approval": "auto", "tools": ["trigger-long-running-operation"]},
                "picked": {
                    "command": EVERYTHING,
                    "args": ["stdio"],
                    "approval": "auto",
                    "tools": ["trigger-long-running-operation", "get-sum", "echo", "get-tiny-image", "nope"],
                },
            },
        }
    )
    yield application
    close_app(application)


def turn(app, *steps, **body):
    provider = use_script(app, list(steps))
    response = app.test_client().post("/api/chat_stream", json={"mode": "agent", "message": "go", **body})
    return provider, response, sse_frames(response.get_data())


def test_many_tools_are_capped_and_the_allow_list_picks(app):
    provider, _, _ = turn(app, say("ok"))
    names = [t["function"]["name"] for t in provider.requests[0].tools if t["function"]["name"].startswith("mcp__")]
    ev = [n for n in names if n.startswith("mcp__ev__")]
    assert ev == [
        "mcp__ev__echo",
        "mcp__ev__get-annotated-message",
        "mcp__ev__get-env",
        "mcp__ev__get-resource-links",
        "mcp__ev__get-resource-reference",
    ]  # 13 listed, MCP_MAX_TOOLS 5
    assert len([n for n in names if n.startswith("mcp__evhttp__")]) == 5
    assert [n for n in names if n.startswith("mcp__evlong__")] == ["mcp__evlong__trigger-long-running-operation"]
    assert [n for n in names if n.startswith("mcp__picked__")] == [
        "mcp__picked__echo",
        "mcp__picked__get-sum",
        "mcp__picked__get-tiny-image",
        "mcp__picked__trigger-long-running-operation",
    ]  # the allow-list, in the server's order; the name it does not list is ignored


@pytest.mark.parametrize("server", ["picked", "evlong"])  # stdio (sandboxed), Streamable HTTP
def test_the_long_running_operation_reports_progress(app, server):
    tool = f"mcp__{server}__trigger-long-running-operation"
    _, _, frames = turn(app, calls(("c1", tool, {"duration": 1, "steps": 4})), say("done"))
    progress = of(frames, "tool_progress")
    assert [(p["progress"], p["total"]) for p in progress] == [(1, 4), (2, 4), (3, 4), (4, 4)]
    assert progress[0]["call_id"] == "c1" and progress[0]["message"] == "1 of 4"
    output = of(frames, "tool_output")[0]
    assert output["exit_code"] == 0 and "Long running operation completed" in output["output"]


def test_the_error_result_is_a_nonzero_exit_code(app):
    _, _, frames = turn(app, calls(("c1", "mcp__picked__get-sum", {"a": "one"})), say("It failed."))
    output = of(frames, "tool_output")[0]
    assert output["exit_code"] == 1 and "Input validation error" in output["output"]
    assert of(frames, "agent_terminal")[0]["data"]["completion"] == "complete"


def test_image_content_is_stored_and_shown_in_its_row(app):
    _, response, frames = turn(app, calls(("c1", "mcp__picked__get-tiny-image", {})), say("A tiny image."))
    image = of(frames, "generated_image")[0]
    assert image["tool"] == "mcp__picked__get-tiny-image" and image["url"].startswith("/api/images/img_")
    served = app.test_client().get(image["url"])
    assert served.status_code == 200 and served.data.startswith(b"\x89PNG")
    output = of(frames, "tool_output")[0]
    assert output["exit_code"] == 0 and image["url"] in output["output"]
    saved = app.extensions["odysseus.store"].messages.list("local", response.headers["X-Odysseus-Session-Id"])
    assert saved[-1]["metadata"]["agent"]["tools"][0]["images"] == [image["url"]]


def test_a_call_over_streamable_http(app):
    _, _, frames = turn(app, calls(("c1", "mcp__evhttp__echo", {"message": "over http"})), say("ok"))
    output = of(frames, "tool_output")[0]
    assert output["exit_code"] == 0 and "over http" in output["output"] and output["mcp"]["server"] == "evhttp"


@pytest.mark.parametrize("server", ["picked", "evlong"])  # stdio (sandboxed), Streamable HTTP
def test_a_stop_mid_call_ends_the_run_within_a_second(app, server):
    tool = f"mcp__{server}__trigger-long-running-operation"
    use_script(app, [calls(("c1", tool, {"duration": 30, "steps": 60}))])
    client = app.test_client()
    running = client.post("/api/chat_stream", json={"mode": "agent", "message": "long"})
    session_id, run_id = running.headers["X-Odysseus-Session-Id"], running.headers["X-Odysseus-Run-Id"]
    body = iter(running.response)
    seen = b""
    while b'"tool_progress"' not in seen:  # the call is running and reporting
        seen += next(body)
    stopped_at = time.monotonic()
    assert client.post(f"/api/chat/stop/{session_id}", headers={"X-Odysseus-Run-Id": run_id}).status_code == 200
    frames = sse_frames(seen + b"".join(body))
    assert time.monotonic() - stopped_at < 1.0
    assert of(frames, "agent_terminal")[0]["data"]["status"] == "stopped"
    # the server is still there for the next call
    wait_until(lambda: app.extensions["odysseus.mcp"].status()[server]["state"] == "ready", timeout=10)
