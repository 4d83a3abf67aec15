"""The MCP broker and its worker-side client (issue 34, step 2), against real servers over stdio:
``mcp-server-time`` (PyPI), and a hostile server of ours for the faults (a server that will not
start, never answers ``initialize``, crashes mid-call, sends malformed JSON-RPC, 50 MB, a flood of
progress, a changed tool list), a cancelled call (``notifications/cancelled``), a killed broker and
a close that leaves no process behind."""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import pytest
from mcp_helpers import TIME_SERVER, alive, children, hostile, stdio, wait_until

from odysseus.cancel import CancelToken
from odysseus.mcp.client import BrokerClient, McpError


class Harness:
    """A BrokerClient over a fixed list of specs, recording every event it gets."""

    def __init__(self, specs):
        self.specs = specs
        self.events = []
        self.client = BrokerClient(lambda: self.specs, on_event=self.events.append, max_delay=2)

    def states(self, name):
        return [e.get("state") for e in self.events if e.get("event") == "server" and e.get("name") == name]

    def last(self, name):
        return [e for e in self.events if e.get("event") == "server" and e.get("name") == name][-1]


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    log = str(tmp_path_factory.mktemp("mcp") / "hostile.log")
    h = Harness(
        [
            stdio("time", TIME_SERVER, "--local-timezone", "UTC"),
            hostile("hostile", log=log),
            hostile("dies", "dies"),
            hostile("noinit", "noinit", start_timeout=1.5),
        ]
    )
    h.log = log
    yield h
    h.client.close()


def test_a_real_server_lists_its_tools_and_answers_a_call(harness):
    tools = harness.client.request("list_tools", 90, server="time", timeout=60)["tools"]
    assert [t["name"] for t in tools] == ["get_current_time", "convert_time"]
    assert tools[0]["input_schema"]["type"] == "object" and "timezone" in tools[0]["input_schema"]["properties"]
    result = harness.client.request(
        "call", 30, server="time", tool="get_current_time", arguments={"timezone": "Asia/Tokyo"}, timeout=20
    )
    assert result["is_error"] is False
    answer = json.loads(result["content"][0]["text"])
    assert answer["timezone"] == "Asia/Tokyo" and answer["datetime"].endswith("+09:00")
    assert harness.states("time")[:2] == ["starting", "ready"]
    assert [t["name"] for t in harness.last("time")["tools"]] == ["get_current_time", "convert_time"]


def test_an_unknown_server_and_a_server_that_will_not_start_say_why(harness):
    with pytest.raises(McpError) as unknown:
        harness.client.request("list_tools", 10, server="nope", timeout=5)
    assert unknown.value.kind == "unavailable" and "no MCP server named" in unknown.value.message
    with pytest.raises(McpError) as dies:
        harness.client.request("list_tools", 30, server="dies", timeout=20)
    assert dies.value.kind == "unavailable" and "cannot open the database /nowhere" in dies.value.message
    last = harness.last("dies")
    assert last["state"] == "unavailable" and "cannot open the database" in last["error"] and last["retry_at"]
    with pytest.raises(McpError) as again:  # during the backoff: at once, with the same reason
        started = time.monotonic()
        harness.client.request("list_tools", 30, server="dies", timeout=20)
    assert time.monotonic() - started < 1 and "cannot open the database" in again.value.message
    wait_until(lambda: harness.states("dies").count("starting") >= 2, timeout=10)  # restarted after the backoff


def test_a_server_that_never_answers_initialize_is_unavailable_after_the_start_timeout(harness):
    started = time.monotonic()
    with pytest.raises(McpError) as info:
        harness.client.request("list_tools", 30, server="noinit", timeout=20)
    assert info.value.kind == "unavailable" and "did not answer initialize within 1.5 s" in info.value.message
    assert time.monotonic() - started < 8


def test_stop_cancels_the_call_at_once_and_the_server_gets_notifications_cancelled(harness):
    cancel = CancelToken()
    progress = []
    stopped = []

    def on_progress(data):
        progress.append(data)
        if len(progress) == 2:  # the call is running: stop it in a moment
            threading.Timer(0.2, lambda: stopped.append(time.monotonic()) or cancel.cancel()).start()

    with pytest.raises(McpError) as info:
        harness.client.request(
            "call",
            30,
            cancel=cancel,
            on_progress=on_progress,
            server="hostile",
            tool="sleep",
            arguments={"seconds": 20},
            timeout=30,
        )
    assert info.value.kind == "cancelled" and time.monotonic() - stopped[0] < 1
    assert progress and progress[0]["message"].startswith("step")

    def cancelled():
        with open(harness.log) as fh:
            return [json.loads(line) for line in fh if "notifications/cancelled" in line]

    sent = wait_until(cancelled, timeout=5)
    assert sent[0]["params"]["requestId"] is not None
    # the server is still there for the next call
    echo = harness.client.request("call", 10, server="hostile", tool="echo", arguments={"text": "hi"}, timeout=5)
    assert echo["content"] == [{"type": "text", "text": "echo: hi"}]


def test_a_call_past_its_timeout_is_a_timeout_error(harness):
    started = time.monotonic()
    with pytest.raises(McpError) as info:
        harness.client.request("call", 30, server="hostile", tool="sleep", arguments={"seconds": 10}, timeout=0.6)
    assert info.value.kind == "timeout" and "0.6 s" in info.value.message and time.monotonic() - started < 3


def test_malformed_json_rpc_leaves_the_call_to_its_timeout_and_the_server_usable(harness):
    with pytest.raises(McpError) as info:
        harness.client.request("call", 30, server="hostile", tool="malformed", arguments={}, timeout=1)
    assert info.value.kind == "timeout"
    echo = harness.client.request("call", 10, server="hostile", tool="echo", arguments={"text": "still"}, timeout=5)
    assert echo["content"][0]["text"] == "echo: still"


@pytest.mark.slow  # 50 MB through a pipe and pydantic: a few seconds
def test_a_50_mb_result_reaches_the_worker_capped(harness):
    result = harness.client.request(
        "call", 60, server="hostile", tool="huge", arguments={}, timeout=50, max_bytes=100_000
    )
    assert result["truncated"] is True and len(result["content"][0]["text"]) == 100_000


def test_a_flood_of_progress_is_thinned_and_the_answer_still_comes(harness):
    progress = []
    started = time.monotonic()
    result = harness.client.request(
        "call", 60, on_progress=progress.append, server="hostile", tool="flood", arguments={}, timeout=50
    )
    assert result["content"][0]["text"] == "flooded"
    # 2000 sent; at most 20 a second reach the worker (and the last one before the answer)
    assert 1 <= len(progress) <= 20 * (time.monotonic() - started) + 2 and len(progress) < 2000


def test_tools_list_changed_refreshes_the_tool_list(harness):
    harness.client.request("call", 10, server="hostile", tool="change", arguments={}, timeout=5)
    wait_until(lambda: any(t["name"] == "added_later" for t in harness.last("hostile").get("tools") or []))


def test_a_crash_mid_call_is_an_error_and_the_server_comes_back(harness):
    with pytest.raises(McpError) as info:
        harness.client.request("call", 30, server="hostile", tool="crash", arguments={}, timeout=20)
    assert info.value.kind == "closed" and "stopped during the call" in info.value.message

    def echo():
        try:
            return harness.client.request("call", 10, server="hostile", tool="echo", arguments={"text": "x"}, timeout=5)
        except McpError:
            return None

    assert wait_until(echo, timeout=15, step=0.3)["content"][0]["text"] == "echo: x"
    assert "unavailable" in harness.states("hostile")


@pytest.mark.slow  # two broker starts (the SDK's import takes seconds on a busy machine)
def test_a_killed_broker_fails_the_call_and_the_next_request_starts_another():
    h = Harness([hostile("h")])
    try:
        h.client.request("list_tools", 30, server="h", timeout=20)
        first = h.client.pid
        threading.Timer(0.5, lambda: os.kill(first, signal.SIGKILL)).start()
        with pytest.raises(McpError) as info:
            h.client.request("call", 30, server="h", tool="sleep", arguments={"seconds": 10}, timeout=20)
        assert info.value.kind == "closed"

        def again():
            try:
                return h.client.request("call", 10, server="h", tool="echo", arguments={"text": "back"}, timeout=10)
            except McpError:
                return None

        assert wait_until(again, timeout=15, step=0.2)["content"][0]["text"] == "echo: back"
        assert h.client.pid != first
    finally:
        h.client.close()


def test_close_ends_the_broker_and_every_server_it_started():
    h = Harness([hostile("a"), stdio("time", TIME_SERVER)])
    h.client.request("list_tools", 30, server="a", timeout=20)
    h.client.request("list_tools", 90, server="time", timeout=60)
    broker = h.client.pid
    started = children(broker)
    assert len(started) >= 2
    h.client.close()
    assert not alive(broker)
    wait_until(lambda: not any(alive(pid) for pid in started), timeout=10)
