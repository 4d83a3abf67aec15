"""MCP server processes end with the worker (issue 34): after SIGTERM to a real gunicorn server, after a
reload (SIGHUP: new workers, the old ones end) and after a worker is killed outright, nothing the worker
started — its broker, the stdio guards, bubblewrap and the servers — is left running."""

from __future__ import annotations

import os
import signal
import sys

import pytest
import requests
from liveserver import LiveServer
from mcp_helpers import HOSTILE, TIME_SERVER, alive, children, wait_until

pytestmark = pytest.mark.slow


def _server(tmp_path):
    config = tmp_path / "odysseus.toml"
    config.write_text(
        f'[mcp_servers.time]\ncommand = "{TIME_SERVER}"\nargs = ["--local-timezone", "UTC"]\n\n'
        f'[mcp_servers.hostile]\ncommand = "{sys.executable}"\nargs = ["{HOSTILE}", "normal"]\nsandbox = false\n'
    )
    return LiveServer(
        str(tmp_path / "data"),
        {"ODYSSEUS_CONFIG": str(config), "ODYSSEUS_MCP_START_TIMEOUT": "60", "ODYSSEUS_DEMO_TOKEN_DELAY": "0.001"},
    ).start()


def _start_servers(server):
    """An agent turn: its tool list starts both servers (the demo model calls none)."""
    response = requests.post(
        server.url + "/api/chat_stream", json={"mode": "agent", "message": "hello"}, timeout=120, stream=True
    )
    assert response.status_code == 200
    assert b"agent_terminal" in response.content  # the whole turn
    states = requests.get(server.url + "/api/health", timeout=10).json()["mcp_servers"]
    assert states["time"]["state"] == "ready" and states["hostile"]["state"] == "ready", states


def _started(server):
    """Every process below the workers (the broker and what it started)."""
    found = []
    for worker in server.worker_pids():
        found += children(worker)
    return found


def test_sigterm_ends_every_mcp_process(tmp_path):
    server = _server(tmp_path)
    try:
        _start_servers(server)
        started = _started(server)
        assert len(started) >= 4  # broker, two guards, the servers (and bwrap)
    finally:
        server.stop()
    wait_until(lambda: not any(alive(pid) for pid in started), timeout=15)


def test_a_reload_and_a_killed_worker_leave_no_mcp_process(tmp_path):
    server = _server(tmp_path)
    try:
        _start_servers(server)
        old_workers = server.worker_pids()
        started = _started(server)
        os.kill(server.proc.pid, signal.SIGHUP)  # gunicorn's reload: new workers, the old ones end
        wait_until(lambda: set(server.worker_pids()).isdisjoint(old_workers) and server.worker_pids(), timeout=30)
        wait_until(lambda: not any(alive(pid) for pid in started), timeout=15)
        _start_servers(server)
        started = _started(server)
        for worker in server.worker_pids():
            os.kill(worker, signal.SIGKILL)  # a crash: no shutdown code runs in the worker
        wait_until(lambda: not any(alive(pid) for pid in started), timeout=15)
    finally:
        server.stop()
