"""run_python and shell: real sandboxed subprocesses, per-session workdirs, stripped env, limits, kill on cancel."""

from __future__ import annotations

import os
import threading
import time

import pytest
from waiting import wait_for

from odysseus.agent.tool_runner import run_tool
from odysseus.cancel import CancelToken, Cancelled
from odysseus.tools.code import code_tools, run_python, shell
from odysseus.tools.registry import ToolContext, ToolError


def make_ctx(tmp_path, session="s1", **config):
    return ToolContext(
        owner="local",
        session_id=session,
        cancel=CancelToken(),
        config={"DATA_DIR": str(tmp_path), **config},
        workspace_root=str(tmp_path / "ws"),
    )


def drive(gen):
    """Run a run_tool generator to its end: (progress events, result)."""
    events = []
    while True:
        try:
            events.append(next(gen))
        except StopIteration as stop:
            return events, stop.value


def marked_processes(marker: str) -> list:
    """Host pids whose command line contains ``marker`` (the sandbox's own pids mean nothing here)."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != os.getpid():
            try:
                with open(f"/proc/{name}/cmdline", "rb") as fh:
                    cmdline = fh.read()
            except OSError:
                continue
            if marker.encode() in cmdline and pid_alive(int(name)):
                found.append(int(name))
    return found


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purpose
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_run_python_output_exit_code_and_session_workdir(tmp_path):
    ctx = make_ctx(tmp_path)
    result = run_python({"code": "import os\nopen('note.txt','w').write('kept')\nprint('cwd', os.getcwd())"}, ctx)
    assert result.exit_code == 0
    assert result.output.strip() == "cwd /workspace"
    assert ctx.workspace().endswith(os.path.join("ws", "local", "s1"))
    again = run_python({"code": "print(open('note.txt').read())"}, ctx)
    assert again.output.strip() == "kept"
    other = run_python({"code": "import os; print(os.path.exists('note.txt'))"}, make_ctx(tmp_path, session="s2"))
    assert other.output.strip() == "False"
    failing = run_python({"code": "import sys; print('bad', file=sys.stderr); sys.exit(3)"}, ctx)
    assert failing.exit_code == 3 and "bad" in failing.output


def test_environment_carries_no_secrets(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak")
    monkeypatch.setenv("MY_TOKEN", "tok")
    monkeypatch.setenv("DB_PASSWORD", "pw")
    ctx = make_ctx(tmp_path)
    result = shell({"command": "env"}, ctx)
    names = {line.split("=", 1)[0] for line in result.output.splitlines() if "=" in line}
    assert "sk-should-not-leak" not in result.output and "tok" not in result.output.split("=")
    assert not [n for n in names if any(word in n for word in ("KEY", "TOKEN", "SECRET", "PASSWORD"))]
    assert "HOME=/workspace" in result.output
    assert names <= {
        "PATH",
        "HOME",
        "LANG",
        "TMPDIR",
        "PYTHONUNBUFFERED",
        "PYTHONDONTWRITEBYTECODE",
        "PWD",
        "SHLVL",
        "_",
    }


def test_output_cap(tmp_path):
    ctx = make_ctx(tmp_path, TOOL_OUTPUT_MAX_BYTES=1000)
    result = run_python({"code": "for i in range(2000): print('x' * 49)"}, ctx)
    assert result.output.startswith("x" * 49)
    assert "[output truncated: 99000 more bytes were dropped]" in result.output and len(result.output) < 1100
    assert result.meta["truncated"] is True


def test_bad_arguments_are_tool_errors(tmp_path):
    with pytest.raises(ToolError):
        shell({"command": "  "}, make_ctx(tmp_path))
    with pytest.raises(ToolError):
        run_python({}, make_ctx(tmp_path))


@pytest.mark.slow  # measured 1.1 s: a paced process
def test_progress_streams_output_lines_while_running(tmp_path):
    tool = code_tools({"CODE_TIMEOUT": 10})[1]
    ctx = make_ctx(tmp_path)
    gen = run_tool(
        tool,
        {"command": "for i in 1 2 3 4 5; do echo line$i; sleep 0.2; done"},
        ctx,
        CancelToken(),
        timeout=10,
        progress_interval=0.3,
        round_no=4,
    )
    events, result = drive(gen)
    assert result.exit_code == 0 and result.output.split() == [f"line{i}" for i in range(1, 6)]
    assert events and all(e.type == "tool_progress" and e.data["round"] == 4 for e in events)
    assert "line1" in "\n".join(e.data["message"] for e in events)
    assert events[0].data["elapsed"] >= 0.3


@pytest.mark.slow  # measured 1.5 s: waits out the tool timeout
def test_timeout_kills_the_whole_process_group(tmp_path):
    tool = code_tools({})[1]
    ctx = make_ctx(tmp_path)
    command = "sleep 30.417 & setsid sleep 30.418 & echo started; wait"
    started = time.monotonic()
    events, result = drive(
        run_tool(tool, {"command": command}, ctx, CancelToken(), timeout=1.5, progress_interval=0.2, round_no=1)
    )
    assert time.monotonic() - started < 8
    assert result.exit_code == 124 and "timed out" in result.output
    assert any("started" in e.data["message"] for e in events)
    wait_for(lambda: not marked_processes("30.41"), 5, what="the process group to be gone")


def test_run_cancel_kills_the_process_and_raises_cancelled(tmp_path):
    tool = code_tools({})[0]
    ctx = make_ctx(tmp_path)
    run_cancel = CancelToken()
    code = "import subprocess, time\nsubprocess.Popen(['sleep', '30.419'])\nprint('ready', flush=True)\ntime.sleep(30)"
    gen = run_tool(tool, {"code": code}, ctx, run_cancel, timeout=30, progress_interval=0.1, round_no=1)
    first = next(gen)
    while "ready" not in first.data["message"]:  # the line arrives as progress
        first = next(gen)
    assert marked_processes("30.419")
    threading.Timer(0.2, run_cancel.cancel, args=("stopped",)).start()
    with pytest.raises(Cancelled):
        for _ in gen:
            pass
    wait_for(lambda: not marked_processes("30.419"), 5, what="the tool's child to be gone")


def test_code_tools_need_approval_by_default():
    assert all(tool.needs_approval for tool in code_tools({}))
