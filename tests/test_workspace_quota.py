"""The code tools' disk quota, with the real sandbox and real files (odysseus/tools/quota.py, workspace_child.py).

/workspace is a size-limited tmpfs; what a call leaves there is saved to the host directory only
within ``WORKSPACE_MAX_BYTES``, ``WORKSPACE_MAX_FILES`` and ``WORKSPACE_USER_MAX_BYTES``. Each test
compares the host directory (every entry's kind, bytes and link target) before and after.
"""

from __future__ import annotations

import json
import os
import stat
import threading
import uuid

import pytest
from agent_fakes import ScriptedProvider, calls, of, say, sse_frames

from odysseus import create_app
from odysseus.agent.tool_runner import run_tool
from odysseus.cancel import CancelToken, Cancelled
from odysseus.llm.llm_core import ModelRouter
from odysseus.tools.code import code_tools, run_python, shell
from odysseus.tools.registry import ToolContext

MiB = 1024 * 1024
PASSWORD = "correct horse battery"


def make_ctx(tmp_path, owner="u1", session="s1", **config):
    return ToolContext(
        owner=owner,
        session_id=session,
        cancel=CancelToken(),
        config={"DATA_DIR": str(tmp_path), **config},
        workspace_root=str(tmp_path / "workspaces"),
    )


def snapshot(root) -> dict:
    """Every entry under ``root``: a file's bytes, a symlink's target, a directory; nothing followed."""
    found = {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                found[rel] = ("link", os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                found[rel] = ("dir",)
            elif stat.S_ISREG(st.st_mode):
                with open(path, "rb") as fh:
                    found[rel] = ("file", fh.read())
            else:
                found[rel] = ("other",)
    return found


def disk_usage(root) -> int:
    """Bytes of disk the tree under ``root`` takes (st_blocks)."""
    total = os.lstat(root).st_blocks * 512
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
    return total


def free_bytes(path) -> int:
    info = os.statvfs(path)
    return info.f_bavail * info.f_frsize


# ------------------------------------------------------------------------------------------ past the quota
def test_writing_past_the_byte_quota_saves_nothing_and_the_disk_does_not_grow(tmp_path):
    ctx = make_ctx(tmp_path, WORKSPACE_MAX_BYTES=2 * MiB)
    assert shell({"command": "echo kept > keep.txt && mkdir d && echo x > d/y"}, ctx).exit_code == 0
    host = ctx.workspace()
    before, used, free = snapshot(host), disk_usage(tmp_path), free_bytes(tmp_path)
    # 128 MiB attempted (each file under SANDBOX_MAX_FILE_BYTES): before the quota all of it landed on the disk
    result = shell(
        {
            "command": "echo changed > keep.txt; rm -r d; "
            "for i in 1 2 3 4 5 6 7 8; do head -c 16M /dev/zero > big$i || echo write-failed-$i; done; echo end"
        },
        ctx,
    )
    assert "No space left on device" in result.output and "write-failed-1" in result.output
    assert result.output.splitlines()[-1] == (
        "Error: workspace full: no space left in /workspace (limit 2 MiB per workspace); "
        "nothing this call wrote was saved"
    )
    assert result.exit_code != 0 and result.meta["workspace_full"] is True
    assert "workspace full" in result.meta["error"]
    assert snapshot(host) == before and disk_usage(tmp_path) == used
    assert free - free_bytes(tmp_path) < 32 * MiB, "the data disk lost more than the quota (plus others' noise)"
    # a sparse file counts its full size: its copy on the host would not be sparse
    sparse = shell({"command": "truncate -s 60M sparse && ls -s sparse"}, ctx)
    assert sparse.output.startswith("0 sparse") and sparse.exit_code != 0
    assert "workspace full: /workspace would hold more than 2 MiB (limit 2 MiB per workspace)" in sparse.output
    assert snapshot(host) == before
    # the workspace itself is fine: the next call within quota is saved
    assert shell({"command": "cat keep.txt; head -c 1000000 /dev/zero > mid"}, ctx).output.strip() == "kept"
    assert os.path.getsize(os.path.join(host, "mid")) == 1_000_000


def test_more_files_than_the_limit_saves_nothing(tmp_path):
    ctx = make_ctx(tmp_path, WORKSPACE_MAX_FILES=50)
    assert shell({"command": "echo a > a"}, ctx).exit_code == 0
    host = ctx.workspace()
    before = snapshot(host)
    many = "mkdir many && cd many && i=0; while [ $i -lt 200 ]; do : > f$i; i=$((i+1)); done; ls | wc -l"
    result = shell({"command": many}, ctx)
    assert result.output.splitlines()[0] == "200" and result.exit_code != 0
    assert result.output.splitlines()[-1] == (
        "Error: workspace full: /workspace would hold more than 50 files and folders (limit 50); "
        "nothing this call wrote was saved"
    )
    assert snapshot(host) == before
    # exactly at the limit is within it: a, few/ and 48 files
    exact = "mkdir few && cd few && i=0; while [ $i -lt 48 ]; do : > f$i; i=$((i+1)); done"
    assert shell({"command": exact}, ctx).exit_code == 0 and len(snapshot(host)) == 50


# ------------------------------------------------------------------------------------------ within the quota
def test_a_call_within_quota_is_saved_exactly_and_the_next_call_sees_it(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("outside")
    ctx = make_ctx(tmp_path)
    first = shell(
        {
            "command": "echo one > a.txt; echo two > b.txt; mkdir -p sub/deep; echo three > sub/deep/c.txt; "
            "echo same > same.txt; ln -s a.txt rel-link; printf '#!/bin/sh\\necho ran\\n' > run.sh"
        },
        ctx,
    )
    assert first.exit_code == 0, first.output
    host = ctx.workspace()
    untouched = os.lstat(os.path.join(host, "same.txt")).st_ino
    second = shell(
        {
            "command": "echo ONE > a.txt; rm b.txt; rm -r sub; mkdir sub; echo new > sub/new.txt; "
            f"ln -s /etc/passwd abs-link; ln -s {outside} host-link; ln -s missing dangling; "
            "chmod 755 run.sh; mkfifo pipe; echo done"
        },
        ctx,
    )
    assert second.exit_code == 0 and second.output.strip() == "done", second.output
    assert snapshot(host) == {
        "a.txt": ("file", b"ONE\n"),
        "same.txt": ("file", b"same\n"),
        "run.sh": ("file", b"#!/bin/sh\necho ran\n"),
        "rel-link": ("link", "a.txt"),
        "abs-link": ("link", "/etc/passwd"),
        "host-link": ("link", str(outside)),
        "dangling": ("link", "missing"),
        "sub": ("dir",),
        "sub/new.txt": ("file", b"new\n"),
    }  # b.txt and sub/deep gone; the fifo not kept
    assert os.stat(os.path.join(host, "run.sh")).st_mode & 0o111 == 0o111
    assert os.lstat(os.path.join(host, "same.txt")).st_ino == untouched  # an unchanged file is not copied again
    assert outside.read_text() == "outside"  # no link was followed
    third = shell({"command": "cat a.txt sub/new.txt; readlink abs-link rel-link; ./run.sh; cat host-link"}, ctx)
    lines = third.output.splitlines()
    assert lines[:5] == ["ONE", "new", "/etc/passwd", "a.txt", "ran"] and "No such file" in lines[5]
    assert "outside" not in third.output  # the host path means nothing inside the sandbox


def test_unreadable_files_and_closed_folders_are_saved_and_removable(tmp_path):
    """Modes are kept, except that the owner can always read and write (so the next call can load them)."""
    ctx = make_ctx(tmp_path)
    made = shell({"command": "echo s > secret; chmod 000 secret; mkdir ro; echo x > ro/f; chmod 500 ro; echo ok"}, ctx)
    assert made.output.strip() == "ok" and made.exit_code == 0
    host = ctx.workspace()
    assert snapshot(host) == {"secret": ("file", b"s\n"), "ro": ("dir",), "ro/f": ("file", b"x\n")}
    assert stat.S_IMODE(os.stat(os.path.join(host, "secret")).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.join(host, "ro")).st_mode) == 0o700
    gone = shell({"command": "cat secret ro/f && rm -rf secret ro && ls -A | wc -l"}, ctx)
    assert gone.output.split() == ["s", "x", "0"] and snapshot(host) == {}


def test_the_report_line_is_json_whatever_the_error_says():
    from odysseus.tools.workspace_child import to_json

    report = {"error": 'a "quoted" \\ back\nline \x00 \udcff é \U0001f600 \U000e0001', "exit": None, "saved": False}
    decoded = json.loads(to_json(report).encode().decode("utf-8"))
    assert decoded == {**report, "error": report["error"][:-1] + "?"}
    assert "\n" not in to_json(report)


def test_the_per_user_total_holds_across_workspaces_and_not_across_users(tmp_path):
    limits = {"WORKSPACE_MAX_BYTES": 3 * MiB, "WORKSPACE_USER_MAX_BYTES": 4 * MiB}
    alice_one = make_ctx(tmp_path, owner="alice", session="one", **limits)
    alice_two = make_ctx(tmp_path, owner="alice", session="two", **limits)
    bob = make_ctx(tmp_path, owner="bob", session="one", **limits)
    assert shell({"command": "head -c 2000000 /dev/zero > f"}, alice_one).exit_code == 0
    over = shell({"command": "head -c 2500000 /dev/zero > f"}, alice_two)
    assert over.exit_code != 0 and over.output.splitlines()[-1] == (
        "Error: workspace full: no space left in /workspace (limit 4 MiB for all your workspaces together, "
        "1.9 MiB of it in your other chats); nothing this call wrote was saved"
    )
    assert snapshot(alice_two.workspace()) == {}
    assert shell({"command": "head -c 1000000 /dev/zero > f"}, alice_two).exit_code == 0
    # another user has their own total
    assert shell({"command": "head -c 2500000 /dev/zero > f"}, bob).exit_code == 0
    assert os.path.getsize(os.path.join(bob.workspace(), "f")) == 2_500_000
    # room freed in one workspace is room in another at once (a saved call updates its measured size)
    assert shell({"command": "rm f"}, alice_one).exit_code == 0
    assert shell({"command": "head -c 2000000 /dev/zero > g"}, alice_two).exit_code == 0
    assert sorted(snapshot(alice_two.workspace())) == ["f", "g"]


@pytest.mark.slow  # measured 3 s: waits out two time limits
def test_a_timed_out_call_still_saves_what_it_wrote_within_quota(tmp_path):
    config = {"CODE_TIMEOUT": 1, "WORKSPACE_MAX_BYTES": 2 * MiB}
    ctx = make_ctx(tmp_path, **config)
    tool = code_tools(config)[0]  # run_python, through the tool runner with the tool's own time limit
    code = "open('partial.txt', 'w').write('written before the limit')\nimport time\ntime.sleep(30)"
    gen = run_tool(tool, {"code": code}, ctx, CancelToken(), timeout=tool.timeout, progress_interval=5, round_no=1)
    try:
        while True:
            next(gen)
    except StopIteration as stop:
        result = stop.value
    assert result.exit_code == 124 and result.meta["timeout"] == 1
    assert result.output == "Error: timed out after 1 s: the process was stopped; what it wrote to /workspace was kept"
    assert snapshot(ctx.workspace()) == {"partial.txt": ("file", b"written before the limit")}
    past = shell({"command": "head -c 3M /dev/zero > big; sleep 30"}, ctx)
    assert "timed out after 1 s" in past.output and "workspace full" in past.output and past.exit_code == 124
    assert snapshot(ctx.workspace()) == {"partial.txt": ("file", b"written before the limit")}


def test_a_stopped_call_saves_nothing(tmp_path):
    """A stop kills the whole sandbox at once: what the interrupted call wrote is not kept (the docs say so)."""
    ctx = make_ctx(tmp_path)
    tool = code_tools({})[1]
    run_cancel = CancelToken()
    command = "echo written > f; echo ready; sleep 30"
    gen = run_tool(tool, {"command": command}, ctx, run_cancel, timeout=60, progress_interval=0.1, round_no=1)
    event = next(gen)
    while "ready" not in event.data["message"]:
        event = next(gen)
    run_cancel.cancel("stopped")
    with pytest.raises(Cancelled):
        for _ in gen:
            pass
    assert snapshot(ctx.workspace()) == {}


# ------------------------------------------------------------------------------------------ the command's reach
def test_the_command_cannot_reach_the_host_directory(tmp_path):
    """The host workspace is a descriptor of the non-dumpable workspace child, never a mount."""
    ctx = make_ctx(tmp_path, WORKSPACE_MAX_BYTES=MiB)
    host = ctx.workspace()
    probe = (
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "print('ptrace', libc.ptrace(16, 2, 0, 0))\n"  # PTRACE_ATTACH to the workspace child
        "pidfd = os.pidfd_open(2)\n"
        "print('getfd', [libc.syscall(438, pidfd, fd, 0) for fd in range(3, 12)])\n"  # pidfd_getfd
        "for fd in range(3, 12):\n"
        "    try:\n"
        "        os.open(f'/proc/2/fd/{fd}', os.O_RDONLY)\n"
        "        print('OPENED', fd)\n"
        "    except OSError:\n"
        "        pass\n"
        "dirs = [n for n in range(100) if os.path.isdir(f'/proc/self/fd/{n}')]\n"
        "print('dirs', len(dirs))\n"
        "print('mounts', [l.split()[4] for l in open('/proc/self/mountinfo') if 'workspace' in l])\n"
    )
    result = run_python({"code": probe}, ctx)
    lines = dict(line.split(" ", 1) for line in result.output.splitlines())
    assert lines["ptrace"] == "-1" and lines["getfd"] == str([-1] * 9) and "OPENED" not in result.output
    assert lines["dirs"] == "0", result.output  # it holds no directory at all
    assert lines["mounts"] == "['/workspace']"
    # killing the child (it can: same uid) saves nothing, and the call says so
    killed = shell({"command": "echo x > f; kill -9 $PPID; sleep 1"}, ctx)
    assert killed.exit_code != 0 and "nothing was kept" in killed.output
    assert snapshot(host) == {}


# ------------------------------------------------------------------------------------------ through the app
def test_a_full_workspace_never_fails_another_users_turn(tmp_path):
    """While alice's call fills her workspace, bob's turn (and his files) are saved; so is hers."""
    app = create_app(
        {
            "DATA_DIR": str(tmp_path),
            "PROVIDERS": [],
            "AUTH": "password",
            "AGENT_TOOLS": "shell",
            "AGENT_APPROVAL_TOOLS": "",
            "WORKSPACE_MAX_BYTES": 2 * MiB,
        }
    )
    commands = {
        "fill": "head -c 2000000 /dev/zero > base; for i in 1 2 3 4; do head -c 16M /dev/zero > more$i; done",
        "note": "echo bob-note > note.txt && echo saved",
    }

    def respond(request):
        last = request.messages[-1]
        if last["role"] == "tool":
            return say("done")
        return calls((f"c-{uuid.uuid4().hex[:8]}", "shell", {"command": commands[last["content"]]}))

    app.extensions["odysseus.router"] = ModelRouter([ScriptedProvider([], default=respond)])
    try:
        alice = app.test_client()
        made = alice.post("/api/auth/setup", json={"username": "alice", "password": PASSWORD})
        alice_csrf = {"X-Odysseus-CSRF": made.json["csrf_token"]}
        created = alice.post("/api/auth/users", json={"username": "bob", "password": PASSWORD}, headers=alice_csrf)
        bob_id = created.json["id"]
        allowed = alice.patch(f"/api/admin/users/{bob_id}/code-tools", json={"code_tools": True}, headers=alice_csrf)
        assert allowed.status_code == 200
        bob = app.test_client()
        signed_in = bob.post("/api/auth/login", json={"username": "bob", "password": PASSWORD})
        bob_csrf = {"X-Odysseus-CSRF": signed_in.json["csrf_token"]}

        def turn(client, headers, message):
            response = client.post("/api/chat_stream", json={"mode": "agent", "message": message}, headers=headers)
            assert response.status_code == 200, response.get_data(as_text=True)
            return response.headers["X-Odysseus-Session-Id"], sse_frames(response.get_data())

        answers = {}
        filling = threading.Thread(target=lambda: answers.update(alice=turn(alice, alice_csrf, "fill")))
        filling.start()
        answers["bob"] = turn(bob, bob_csrf, "note")
        filling.join(60)
        for name, client in (("alice", alice), ("bob", bob)):
            session, frames = answers[name]
            assert of(frames, "[DONE]") and not of(frames, "error"), frames
            stored = client.get(f"/api/sessions/{session}/messages").json["messages"]
            assert stored[-1]["role"] == "assistant" and stored[-1]["content"] == "done", stored
        alice_output = of(answers["alice"][1], "tool_output")[0]
        assert "workspace full: no space left in /workspace (limit 2 MiB per workspace)" in alice_output["output"]
        assert alice_output["exit_code"] != 0
        assert of(answers["bob"][1], "tool_output")[0]["output"].strip() == "saved"
        workspaces = tmp_path / "workspaces"
        bob_dir = next(p for p in workspaces.glob("*/*") if p.name == answers["bob"][0])
        assert (bob_dir / "note.txt").read_text() == "bob-note\n"
        alice_dir = next(p for p in workspaces.glob("*/*") if p.name == answers["alice"][0])
        assert snapshot(alice_dir) == {}
    finally:
        app.extensions["odysseus.runs"].close()
