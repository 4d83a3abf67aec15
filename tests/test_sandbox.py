"""The sandbox's own parts: fail closed at start-up, the layout checks, the bounded reader, workspaces.

The attacks through the agent loop are in test_sandbox_attacks.py.
"""

from __future__ import annotations

import os
import shutil
import stat
import time

import pytest
from agent_fakes import calls, of, post, say, use_script

from odysseus import create_app
from odysseus.cancel import Cancelled, CancelToken
from odysseus.errors import OdysseusError
from odysseus.tools import sandbox
from odysseus.tools.code import run_python, shell
from odysseus.tools.process import run_bounded
from odysseus.tools.registry import ToolContext, ToolError


def make_ctx(tmp_path, session="s1", **config):
    return ToolContext(
        owner="u1",
        session_id=session,
        cancel=CancelToken(),
        config={"DATA_DIR": str(tmp_path), **config},
        workspace_root=str(tmp_path / "workspaces"),
    )


def close(app):
    app.extensions["odysseus.runs"].close()


# ------------------------------------------------------------------------------------------ fail closed
def test_a_missing_bwrap_means_no_code_tools_and_the_reason_is_reported(tmp_path):
    app = create_app(
        {
            "DATA_DIR": str(tmp_path),
            "PROVIDERS": [],
            "AUTH": "none",
            "AGENT_TOOLS": "shell,run_python,update_plan",
            "SANDBOX_BWRAP": str(tmp_path / "no-bwrap"),
        }
    )
    try:
        client = app.test_client()
        health = client.get("/api/code-tools").get_json()  # the caller's view; /api/health has the same status
        assert health["available"] is False and health["allowed"] is False and health["sandbox"] == "off"
        assert client.get("/api/health").get_json()["code_tools"]["sandbox"] == "off"
        assert "bubblewrap not found" in health["reason"] and "no-bwrap" in health["reason"]
        provider = use_script(app, [calls(("c1", "shell", {"command": "id"})), say("ok")])
        response, frames = post(client, message="run id")
        names = [t["function"]["name"] for t in provider.requests[0].tools]
        assert "update_plan" in names and "shell" not in names and "run_python" not in names
        assert of(frames, "agent_prep")[0]["data"]["tools"] == names
        # a call of the unoffered tool is answered with an error, never run
        assert "no tool named 'shell'" in of(frames, "tool_output")[0]["output"]
    finally:
        close(app)


def test_a_bwrap_that_cannot_create_namespaces_is_reported(tmp_path):
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to creating new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    status = sandbox.probe(sandbox.SandboxSettings(bwrap=str(fake), data_dir=str(tmp_path)))
    assert status.available is False and "cannot create its namespaces" in status.reason
    assert "No permissions" in status.reason


def test_the_real_probe_works_here(tmp_path):
    status = sandbox.probe(sandbox.SandboxSettings(data_dir=str(tmp_path)))
    assert status.available is True and status.mode == "bubblewrap", status.reason


def test_unsandboxed_is_refused_in_password_mode(tmp_path):
    with pytest.raises(OdysseusError, match="only allowed in single-user mode"):
        create_app({"DATA_DIR": str(tmp_path), "PROVIDERS": [], "AUTH": "password", "CODE_TOOLS_UNSANDBOXED": True})


def test_unsandboxed_in_single_user_mode_runs_directly_and_says_so(tmp_path):
    app = create_app(
        {
            "DATA_DIR": str(tmp_path),
            "PROVIDERS": [],
            "AUTH": "none",
            "AGENT_TOOLS": "shell",
            "CODE_TOOLS_UNSANDBOXED": True,
            "SANDBOX_BWRAP": str(tmp_path / "no-bwrap"),
        }
    )
    try:
        health = app.test_client().get("/api/health").get_json()["code_tools"]
        assert health["available"] is True and health["sandbox"] == "unsandboxed"
        assert "without a sandbox" in health["reason"]
    finally:
        close(app)
    ctx = make_ctx(tmp_path, CODE_TOOLS_UNSANDBOXED=True)
    assert shell({"command": "pwd"}, ctx).output.strip() == ctx.workspace()


def test_a_data_dir_under_a_read_only_bind_is_refused(tmp_path):
    with pytest.raises(sandbox.SandboxError, match="DATA_DIR is inside /usr"):
        sandbox.check_layout(sandbox.SandboxSettings(data_dir="/usr/local/var/odysseus"))
    prefix = sandbox.python_prefix()
    if prefix != "/usr" and not prefix.startswith("/usr/"):
        with pytest.raises(sandbox.SandboxError):
            sandbox.check_layout(sandbox.SandboxSettings(data_dir=os.path.join(prefix, "data")))
    sandbox.check_layout(sandbox.SandboxSettings(data_dir=str(tmp_path)))


def test_the_command_line_has_the_isolation_flags(tmp_path):
    argv = sandbox.sandbox_argv(sandbox.SandboxSettings(data_dir=str(tmp_path)), str(tmp_path), ["true"])
    inner = argv[len(argv) - argv[::-1].index(argv[0]) - 1 :]  # the last bwrap is the sandbox itself
    for flag in (
        "--unshare-user",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-net",
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--clearenv",
    ):
        assert flag in inner, flag
    assert inner[inner.index("--uid") + 1] != "0" and inner[inner.index("--chdir") + 1] == "/workspace"
    assert str(tmp_path) not in inner or os.geteuid() != 0  # as root only the outer bwrap names host paths
    limits = inner[inner.index("--") + 1 :]
    assert limits[0].endswith("prlimit") and "--nproc=64" in limits and limits[-1] == "true"
    networked = sandbox.sandbox_argv(
        sandbox.SandboxSettings(data_dir=str(tmp_path)), str(tmp_path), ["true"], network=True
    )
    assert "--unshare-net" not in networked


def test_with_a_quota_the_host_workspace_is_not_mounted_at_all(tmp_path):
    """/workspace is a tmpfs of the call's size; the host directory only reaches the workspace child as a descriptor."""
    host = str(tmp_path / "workspaces" / "u1" / "s1")
    tmpfs = sandbox.TmpfsWorkspace(7, 8, 2 * 1024 * 1024 + 4096, 2 * 1024 * 1024, 100, 5.0)
    argv = sandbox.sandbox_argv(sandbox.SandboxSettings(data_dir=str(tmp_path)), host, ["true"], tmpfs=tmpfs)
    assert not [arg for arg in argv if host in arg]
    inner = argv[len(argv) - argv[::-1].index(argv[0]) - 1 :]
    at = inner.index("--tmpfs", inner.index("/tmp") + 1)
    assert inner[at - 2 : at + 2] == ["--size", str(2 * 1024 * 1024 + 4096), "--tmpfs", "/workspace"]
    setup = inner[: inner.index("--")]
    assert not [i for i in range(len(setup) - 2) if setup[i] == "--bind" and setup[i + 2] == "/workspace"]
    child = inner[inner.index("--") + 1 :]
    assert child[1:4] == ["-I", "-S", "-c"] and "workspace_child" not in child[0]
    assert child[5:11] == ["7", "8", str(2 * 1024 * 1024), "100", "5.0", "/workspace"] and child[11] == "--"
    assert child[12].endswith("prlimit") and child[-1] == "true"


# ------------------------------------------------------------------------------------------ output and time
def test_output_without_newlines_is_capped_in_bytes_and_the_rest_counted(tmp_path):
    ctx = make_ctx(tmp_path, TOOL_OUTPUT_MAX_BYTES=4096)
    result = run_python({"code": "import sys\nfor _ in range(50): sys.stdout.write('y' * 1000000)"}, ctx)
    head, marker = result.output.split("\n[output truncated: ")
    assert head == "y" * 4096 and marker == f"{50_000_000 - 4096} more bytes were dropped]"
    assert result.exit_code == 0 and result.meta["truncated"] is True


def test_invalid_utf8_is_replaced_not_fatal(tmp_path):
    result = shell({"command": "printf 'ok \\377\\376 end'"}, make_ctx(tmp_path))
    assert result.output == "ok \ufffd\ufffd end"


def test_reading_stops_when_a_grandchild_holds_the_pipe(tmp_path):
    """Unsandboxed (no PID namespace): the process exits, a setsid child keeps stdout open."""
    started = time.monotonic()
    done = run_bounded(
        ["/bin/sh", "-c", "setsid sleep 30 & echo parent-done"], cancel=CancelToken(), max_bytes=1000, timeout=20
    )
    assert time.monotonic() - started < 5
    assert done.exit_code == 0 and done.output == b"parent-done\n" and done.reason == ""


def test_the_deadline_ends_a_silent_process(tmp_path):
    started = time.monotonic()
    done = run_bounded(["/bin/sh", "-c", "sleep 30"], cancel=CancelToken(), max_bytes=1000, timeout=0.5)
    assert done.reason == "timeout" and done.exit_code is None and time.monotonic() - started < 5


def test_a_cancelled_token_refuses_to_start(tmp_path):
    token = CancelToken()
    token.cancel("stopped")
    with pytest.raises(Cancelled):
        run_bounded(["true"], cancel=token, max_bytes=10, timeout=5)


@pytest.mark.slow  # measured 3.3 s: burns its CPU limit
def test_the_cpu_limit_ends_a_busy_loop(tmp_path):
    ctx = make_ctx(tmp_path, SANDBOX_CPU_SECONDS=1)
    started = time.monotonic()
    result = run_python({"code": "while True: pass"}, ctx)
    assert result.exit_code != 0 and time.monotonic() - started < 20


def test_the_file_size_limit_applies(tmp_path):
    ctx = make_ctx(tmp_path, SANDBOX_MAX_FILE_BYTES=100_000)
    result = shell({"command": "head -c 1000000 /dev/zero > big; echo rc=$?; wc -c < big"}, ctx)
    assert "rc=0" not in result.output and result.output.split()[-1] == "100000"


# ------------------------------------------------------------------------------------------ workspaces
def test_workspaces_are_0700_at_every_level_and_the_server_writes_nothing_into_them(tmp_path):
    ctx = make_ctx(tmp_path)
    result = run_python({"code": "import os; print(sorted(os.listdir('.')))"}, ctx)
    assert result.output.strip() == "[]"  # no snippet file: the program came in on stdin
    path = ctx.workspace()
    for level in (path, os.path.dirname(path), os.path.dirname(os.path.dirname(path))):
        assert stat.S_IMODE(os.stat(level).st_mode) == 0o700, level
    if os.geteuid() == 0:
        assert os.stat(path).st_uid == 65534


def test_a_symlink_planted_in_the_workspace_does_not_redirect_the_server(tmp_path):
    ctx = make_ctx(tmp_path)
    target = tmp_path / "outside.txt"
    target.write_text("untouched")
    shell({"command": f"ln -s {target} _odysseus_snippet.py; ln -s / root-link"}, ctx)
    result = run_python({"code": "print(open('/workspace/root-link/etc/passwd').read())"}, ctx)
    assert result.exit_code == 1 and "FileNotFoundError" in result.output
    assert target.read_text() == "untouched"


def test_bad_arguments_are_tool_errors_before_anything_runs(tmp_path):
    for args in ({"command": 5}, {"command": ""}, {}):
        with pytest.raises(ToolError):
            shell(args, make_ctx(tmp_path))


NON_ROOT_CHECK = """
import json, sys
from odysseus.cancel import CancelToken
from odysseus.tools import sandbox
from odysseus.tools.code import shell
from odysseus.tools.registry import ToolContext
data = sys.argv[1]
status = sandbox.probe(sandbox.SandboxSettings(data_dir=data + '/data'))
ctx = ToolContext(owner='u', session_id='s', cancel=CancelToken(), workspace_root=data + '/ws',
                  config={'DATA_DIR': data + '/data', 'SANDBOX_MAX_PROCESSES': 10})
# the count uses shell builtins only: with every process slot taken, `ls | grep` could not fork
out = shell({'command': 'id -u; pwd; i=0; while [ $i -lt 50 ]; do sleep 5 >/dev/null 2>&1 & i=$((i+1)); done 2>&1 '
                        '| tail -1; n=0; for p in /proc/[0-9]*; do n=$((n+1)); done; echo $n'}, ctx).output
# the disk quota works the same without root: past it nothing is saved, within it everything is
quota = ToolContext(owner='u', session_id='q', cancel=CancelToken(), workspace_root=data + '/ws',
                    config={'DATA_DIR': data + '/data', 'WORKSPACE_MAX_BYTES': 1024 * 1024})
full = shell({'command': 'echo small > kept; head -c 2000000 /dev/zero > big'}, quota).output
shell({'command': 'echo small > kept; ln -s kept link'}, quota)
import os
kept = sorted(os.listdir(quota.workspace())), os.readlink(quota.workspace() + '/link')
print(json.dumps({'available': status.available, 'reason': status.reason, 'out': out, 'full': full, 'kept': kept}))
"""


@pytest.mark.slow  # measured 1.9 s
@pytest.mark.skipif(os.geteuid() != 0 or not os.path.exists("/usr/bin/setpriv"), reason="needs root to become nobody")
def test_a_server_running_as_an_ordinary_user_gets_the_same_sandbox(tmp_path):
    """The non-root path (no outer wrapper): here as uid 65534 with Debian's python3 and our venv's packages."""
    import json
    import subprocess
    import sys

    system_python = "/usr/bin/python3"
    if not os.path.exists(system_python):
        pytest.skip("no /usr/bin/python3")
    version = subprocess.run(
        [system_python, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True
    ).stdout.strip()
    if version != str(tuple(sys.version_info[:2])):
        pytest.skip("the system python is another version than the venv's")
    site = next(p for p in sys.path if p.endswith("site-packages") and sys.prefix in p)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    scratch = tempfile_dir(tmp_path)
    try:
        done = subprocess.run(
            [
                "/usr/bin/setpriv",
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "--",
                "/usr/bin/env",
                f"PYTHONPATH={site}:{root}",
                system_python,
                "-c",
                NON_ROOT_CHECK,
                scratch,
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if done.returncode != 0 and "Permission denied" in done.stderr:
        pytest.skip("the checkout is not readable by uid 65534")
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["available"] is True, result["reason"]
    lines = result["out"].split()
    assert lines[0] == "65534" and lines[1] == "/workspace" and "fork" in result["out"].lower(), result["out"]
    assert int(lines[-1]) <= 12, result["out"]
    assert "workspace full: no space left in /workspace (limit 1 MiB per workspace)" in result["full"]
    assert result["kept"] == [["kept", "link"], "kept"]


def tempfile_dir(tmp_path) -> str:
    """A directory uid 65534 can use, outside the 0700 pytest tree."""
    import tempfile

    path = tempfile.mkdtemp(prefix="odysseus-nonroot-")
    os.chmod(path, 0o777)
    return path


def test_an_admins_chosen_directory_is_bound_as_it_is(tmp_path):
    """odysseus.context.workspace: a host directory instead of the session's; never chmod/chown'ed."""
    chosen = tmp_path / "project"
    chosen.mkdir()
    chosen.chmod(0o755)
    before = os.stat(chosen)
    ctx = make_ctx(tmp_path)
    ctx.workspace_dir = str(chosen)
    result = shell({"command": "touch made && pwd && id -u && ls /"}, ctx)
    assert result.exit_code == 0 and result.output.split()[0] == "/workspace"
    assert (chosen / "made").exists() and "project" not in result.output
    after = os.stat(chosen)
    assert (after.st_mode, after.st_uid, after.st_gid) == (before.st_mode, before.st_uid, before.st_gid)
    if os.geteuid() == 0:  # as root: the sandbox runs as the directory's owner
        os.chown(chosen, 4321, 4321)
        result = shell({"command": "id -u; touch mine"}, ctx)
        assert result.output.split()[0] == "4321" and os.stat(chosen / "mine").st_uid == 4321
