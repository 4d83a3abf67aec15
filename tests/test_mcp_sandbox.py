"""stdio MCP servers in bubblewrap (issue 34, step 7): the server's installation read-only, a private
writable directory, the network only when allowed, nothing else of the host; fail closed; and a real
server that touches data (``mcp-server-git`` over a repository the test makes in that directory)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading

import pytest
from agent_fakes import calls, of, post, say, use_script
from apphelpers import close_app
from mcp_helpers import HOSTILE, ROOT, TIME_SERVER

from odysseus import create_app
from odysseus.cancel import CancelToken
from odysseus.mcp.sandbox import McpSandbox, install_root
from odysseus.mcp.servers import spec_from, validate
from odysseus.mcp.service import McpService
from odysseus.tools.sandbox import SandboxError, as_root

GIT_SERVER = os.path.join(os.path.dirname(sys.executable), "mcp-server-git")
VENV = os.path.dirname(os.path.dirname(os.path.realpath(sys.executable)))


def spec(**fields):
    return spec_from("s", validate(fields), "config")


def test_the_sandbox_binds_the_installation_and_a_private_directory_only(tmp_path):
    sandbox = McpSandbox({"DATA_DIR": str(tmp_path)})
    if not sandbox.status().available:
        pytest.skip(sandbox.status().reason)
    command, args, env, _ = sandbox(spec(command=TIME_SERVER, args=["--local-timezone", "UTC"]))
    argv = [command, *args]
    assert os.path.basename(command) == "bwrap" and env == {"PATH": "/usr/local/bin:/usr/bin:/bin"}
    assert install_root(TIME_SERVER) == os.path.dirname(os.path.dirname(TIME_SERVER))  # the virtualenv
    root = install_root(TIME_SERVER)
    assert any(argv[i : i + 3] == ["--ro-bind", root, root] for i in range(len(argv)))
    assert "--unshare-net" in argv and "--die-with-parent" in argv and "--clearenv" in argv
    workspace = os.path.join(os.path.realpath(tmp_path), "mcp", "s")
    assert os.path.isdir(workspace) and oct(os.stat(workspace).st_mode & 0o777) == "0o700"
    assert [a for a in argv if str(tmp_path) in a and not a.startswith(workspace)] == []
    assert argv[-3:] == [TIME_SERVER, "--local-timezone", "UTC"]
    assert not any(a.startswith("--cpu") or a.startswith("--as=") for a in argv)  # a server lives long
    with_net = sandbox(spec(command=TIME_SERVER, network=True))
    assert "--unshare-net" not in with_net[1]
    assert sandbox(spec(command=TIME_SERVER, sandbox=False)) == (TIME_SERVER, [], {}, None)
    everything = install_root(os.path.join(ROOT, "node_modules", ".bin", "mcp-server-everything"))
    assert everything == os.path.join(ROOT, "node_modules")


def test_what_cannot_be_sandboxed_is_refused(tmp_path):
    sandbox = McpSandbox({"DATA_DIR": str(tmp_path)})
    if not sandbox.status().available:
        pytest.skip(sandbox.status().reason)
    inside = tmp_path / "bin" / "server"
    inside.parent.mkdir()
    inside.write_text("#!/bin/sh\n")
    inside.chmod(0o755)
    with pytest.raises(SandboxError, match="too broad"):
        sandbox(spec(command=str(inside)))
    with pytest.raises(SandboxError, match="not found"):
        sandbox(spec(command="no-such-mcp-server-anywhere"))
    broken = McpSandbox({"DATA_DIR": str(tmp_path), "SANDBOX_BWRAP": "/nonexistent/bwrap"})
    with pytest.raises(SandboxError, match="sandbox cannot run here"):
        broken(spec(command=TIME_SERVER))


def test_a_sandbox_that_cannot_run_leaves_the_server_unavailable_never_unsandboxed(tmp_path):
    config = {
        "DATA_DIR": str(tmp_path),
        "SANDBOX_BWRAP": "/nonexistent/bwrap",
        "MCP_SERVERS": {"time": {"command": TIME_SERVER}, "open": {"command": TIME_SERVER, "sandbox": False}},
    }
    service = McpService(config, None, launcher=McpSandbox(config))
    try:
        assert [s["name"] for s in service.broker_specs()] == ["open"]
        state = service.status()["time"]
        assert state["state"] == "unavailable" and "bubblewrap not found" in state["error"]
    finally:
        service.close()


@pytest.fixture(scope="module")
def listener():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)

    def accept():
        while True:
            try:
                conn, _ = sock.accept()
                conn.close()
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    yield sock.getsockname()[1]
    sock.close()


@pytest.fixture(scope="module")
def sandboxed(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("sandboxed")
    (data_dir / "secret.txt").write_text("the data directory")
    config = {
        "DATA_DIR": str(data_dir),
        "MCP_START_TIMEOUT": 60.0,
        "MCP_SERVERS": {
            "closed": {"command": sys.executable, "args": [HOSTILE, "normal"]},
            "open": {"command": sys.executable, "args": [HOSTILE, "normal"], "network": True},
        },
    }
    if not McpSandbox(config).status().available:
        pytest.skip(McpSandbox(config).status().reason)
    service = McpService(config, None, launcher=McpSandbox(config))
    yield service, data_dir
    service.close()


def _call(service, server, tool, **args):
    result = service.call(service.servers()[server], tool, args, CancelToken(), lambda data: None)
    return result["content"][0]["text"], result["is_error"]


def test_a_sandboxed_server_sees_nothing_of_the_host_and_the_network_only_when_allowed(sandboxed, listener):
    service, data_dir = sandboxed
    for path in (str(data_dir / "secret.txt"), str(data_dir / "odysseus.db"), "/etc/hostname", "/root/.bashrc"):
        text, failed = _call(service, "closed", "read", path=path)
        assert failed and text.startswith("cannot read"), (path, text)
    text, failed = _call(service, "closed", "read", path=HOSTILE)  # its own installation is there
    assert not failed and text.startswith('read: """A hostile MCP server')
    text, failed = _call(service, "closed", "connect", host="127.0.0.1", port=listener)
    assert failed and text.startswith("cannot connect")
    assert _call(service, "open", "connect", host="127.0.0.1", port=listener) == ("connected", False)


def _git(repo, *args):
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def test_a_real_server_touches_a_repository_in_its_private_directory(tmp_path):
    application = create_app(
        {
            "DATA_DIR": str(tmp_path),
            "PROVIDERS": [],
            "AUTH": "none",
            "AGENT_TOOLS": "update_plan",
            "MCP_START_TIMEOUT": 60.0,
            "MCP_SERVERS": {"git": {"command": GIT_SERVER, "approval": "auto"}},
        }
    )
    try:
        service = application.extensions["odysseus.mcp"]
        if not service.launcher.status().available:
            pytest.skip(service.launcher.status().reason)
        service.broker_specs()  # makes DATA_DIR/mcp/git
        repo = tmp_path / "mcp" / "git" / "repo"
        repo.mkdir()
        _git(repo, "init", "-q")
        (repo / "notes.txt").write_text("periwinkle\n")
        _git(repo, "add", "notes.txt")
        _git(repo, "-c", "user.name=Tester", "-c", "user.email=t@example.org", "commit", "-qm", "First note")
        if as_root():  # the sandbox runs as SANDBOX_UID: git refuses a repository another uid owns
            for folder, dirs, files in os.walk(tmp_path / "mcp" / "git"):
                for name in dirs + files:
                    os.lchown(os.path.join(folder, name), 65534, 65534)
        use_script(
            application,
            [
                calls(("c1", "mcp__git__git_log", {"repo_path": "/workspace/repo"})),
                calls(("c2", "mcp__git__git_status", {"repo_path": str(tmp_path)})),
                say("One commit."),
            ],
        )
        response, frames = post(application.test_client(), message="what is in the repository?")
        log, outside = of(frames, "tool_output")
        assert log["exit_code"] == 0 and "Message: First note" in log["output"] and "Author: Tester" in log["output"]
        assert outside["exit_code"] == 1  # the data directory is not there for it
    finally:
        close_app(application)
