"""Workspace selection: the validation table, and agent turns over the real wire in both auth modes.

The scripted model calls ``shell`` (``pwd``) so the tests see which directory the tools really use.
"""

from __future__ import annotations

import os

import pytest
import requests
from scripted_model import ScriptedModel, reply, tool
from sseclient import open_stream, post_chat, types_of

from odysseus.context import workspace
from odysseus.context.workspace import browse, judge


@pytest.fixture
def tree(tmp_path):
    data = tmp_path / "data"
    (data / "inside").mkdir(parents=True)
    work = tmp_path / "projects" / "odyssey"
    work.mkdir(parents=True)
    (tmp_path / "projects" / ".secret").mkdir()
    (tmp_path / "file.txt").write_text("x")
    os.symlink("/etc", tmp_path / "etc-link")
    os.symlink(work, tmp_path / "work-link")
    os.symlink(data / "inside", tmp_path / "data-link")
    return tmp_path


@pytest.mark.parametrize(
    "path, why",
    [
        ("{tmp}/projects/odyssey", None),
        ("{tmp}/work-link", None),  # a symlink to a fine directory: accepted, resolved
        ("{tmp}/projects/odyssey/", None),
        ("{tmp}/missing", "does not exist"),
        ("{tmp}/file.txt", "not a directory"),
        ("/", "filesystem root"),
        ("{tmp}/data", "data directory"),
        ("{tmp}/data/inside", "data directory"),
        ("{tmp}/data-link", "data directory"),
        ("{tmp}", "data directory"),  # contains the data directory
        ("/etc", "inside /etc"),
        ("/etc/ssl", "inside /etc"),
        ("{tmp}/etc-link", "inside /etc"),  # symlinks are resolved before judging
        ("/proc", "inside /proc"),
        ("/proc/self", "inside /proc"),
        ("/sys/kernel", "inside /sys"),
        ("{tmp}/projects/.secret", "dot-directory"),
        ("{tmp}/projects/odyssey/../.secret", "dot-directory"),
        ("relative/path", "absolute"),
        ("", "non-empty"),
        (42, "non-empty"),
        ("/tmp/\x00evil", "not valid"),
    ],
)
def test_workspace_validation_table(tree, path, why):
    requested = path.format(tmp=tree) if isinstance(path, str) else path
    resolved, reason = judge(requested, str(tree / "data"))
    if why is None:
        assert reason is None and resolved == str(tree / "projects" / "odyssey")
    else:
        assert resolved is None and why in reason


def test_the_server_s_own_files_and_homes_are_refused(tree, monkeypatch):
    """The checkout, the virtualenv, the database file wherever DATABASE points, homes (issue 38 item 6)."""
    code, venv, homes = tree / "srv" / "odysseus-checkout", tree / "srv" / "venv", tree / "homes"
    for folder in (code / "odysseus", venv / "bin", homes / "alice" / ".ssh", homes / "alice" / "notes", tree / "db"):
        folder.mkdir(parents=True)
    monkeypatch.setattr(workspace, "CODE_DIR", str(code))
    monkeypatch.setattr(workspace.sys, "prefix", str(venv))
    monkeypatch.setattr(workspace, "_homes", lambda: [str(homes / "alice")])
    database = str(tree / "db" / "odysseus.db")
    cases = {
        code: "server's own code",
        code / "odysseus": "server's own code",
        tree / "srv": "server's own code",  # contains the checkout (and the virtualenv)
        venv / "bin": "Python environment",
        tree / "db": "database file",  # DATABASE outside DATA_DIR: its folder would expose it
        homes / "alice": "home directory",
        homes: "home directory",
    }
    for path, why in cases.items():
        resolved, reason = judge(str(path), str(tree / "data"), database)
        assert resolved is None and why in reason, (path, reason)
    # inside a home, away from its dot-folders: a project folder is fine
    assert judge(str(homes / "alice" / "notes"), str(tree / "data"), database) == (str(homes / "alice" / "notes"), None)


def test_browse_lists_directories_only_and_marks_what_may_be_chosen(tree):
    listing = browse(str(tree), str(tree / "data"), limit=50)
    names = {e["name"]: e["selectable"] for e in listing["entries"]}
    assert names == {"data": False, "data-link": False, "etc-link": False, "projects": True, "work-link": True}
    assert listing["selectable"] is False and listing["parent"] == os.path.dirname(str(tree))
    assert browse(str(tree), str(tree / "data"), limit=2)["truncated"] is True
    assert browse("/", str(tree / "data"), limit=500)["parent"] is None


# ------------------------------------------------------------------ over the wire
@pytest.fixture(scope="module")
def model():
    with ScriptedModel() as scripted:
        yield scripted


# Inside the sandbox every workspace is /workspace: the tool leaves a uniquely named file there, and the
# test finds the host directory that holds it.
WHERE = 'm=where-$(od -An -N8 -tx8 /dev/urandom | tr -d " "); touch "$m"; echo "$m"'


def script_pwd(model):
    with model.lock:
        model.replies[:] = [reply("", [tool("c1", "shell", command=WHERE)]), reply("Done.")]
        model.requests.clear()


def agent_frames(base, headers=None, **body):
    stream = post_chat(base, body.pop("message", "where am I"), mode="agent", headers=headers, **body)
    try:
        return stream, stream.events()
    finally:
        stream.close()


def pwd_of(frames, *roots):
    """The host directory (under one of ``roots``) where the tool's marker file was made."""
    outputs = [f["data"] for f in frames if isinstance(f["data"], dict) and f["data"].get("type") == "tool_output"]
    marker = outputs[0]["output"].strip().splitlines()[-1]
    assert marker.startswith("where-"), outputs[0]["output"]
    for root in roots:
        for dirpath, _dirs, files in os.walk(str(root)):
            if marker in files:
                return dirpath
    return None


def env_for(model, **extra):
    return {
        "OPENAI_BASE_URL": model.url + "/v1",
        "OPENAI_API_KEY": "sk-test-key-not-secret",
        "ODYSSEUS_AGENT_TOOLS": "shell,run_python",
        "ODYSSEUS_AGENT_APPROVAL_TOOLS": "run_python",
        "ODYSSEUS_HEARTBEAT_INTERVAL": "0.5",
        **extra,
    }


def test_single_user_mode_accepts_rejects_and_keeps_the_workspace_across_an_approval(server_factory, model, tmp_path):
    server = server_factory(env=env_for(model))
    chosen = tmp_path / "project"
    chosen.mkdir()
    script_pwd(model)
    stream, frames = agent_frames(server.url, workspace=str(chosen))
    assert pwd_of(frames, tmp_path, server.data_dir) == str(chosen) and "workspace_rejected" not in types_of(frames)
    session = stream.headers["X-Odysseus-Session-Id"]
    saved = requests.get(f"{server.url}/api/sessions/{session}/messages", timeout=10).json()["messages"]
    assert saved[-1]["metadata"]["workspace"] == str(chosen)

    script_pwd(model)
    stream, frames = agent_frames(server.url, workspace="/etc/../etc")
    kinds = types_of(frames)
    assert kinds[0] == "workspace_rejected" and frames[0]["data"]["data"] == {"path": "/etc/../etc"}
    assert kinds[1] == "notice" and "inside /etc" in frames[1]["data"]["message"]
    session = stream.headers["X-Odysseus-Session-Id"]
    assert pwd_of(frames, tmp_path, server.data_dir) == os.path.join(server.data_dir, "workspaces", "local", session)

    # the agent projection: workspace_rejected right after run_started/start
    script_pwd(model)
    named = open_stream("POST", server.url + "/api/agent/chat/stream", json={"message": "x", "workspace": "/proc"})
    try:
        names = [f["event"] for f in named.events()]
    finally:
        named.close()
    assert names[:3] == ["run_started", "start", "workspace_rejected"] and names.index("notice") < names.index("chunk")

    # an approval answer continues the task in the workspace it was given
    with model.lock:
        code = "import secrets\nm = 'where-' + secrets.token_hex(8)\nopen(m, 'w').close()\nprint(m)"
        model.replies[:] = [reply("", [tool("c9", "run_python", code=code)]), reply("Done.")]
    stream, frames = agent_frames(server.url, workspace=str(chosen))
    card = next(f["data"]["data"] for f in frames if types_of([f]) == ["ask_user"])
    session = stream.headers["X-Odysseus-Session-Id"]
    _, answered = agent_frames(
        server.url,
        message="",
        session_id=session,
        tool_approval_id=card["approval_id"],
        tool_approval_decision="approve",
    )
    assert pwd_of(answered, tmp_path, server.data_dir) == str(chosen)

    browsed = requests.get(server.url + "/api/workspace/browse", params={"path": str(tmp_path)}, timeout=10)
    assert (
        browsed.status_code == 200
        and {"name": "project", "path": str(chosen), "selectable": True} in browsed.json()["entries"]
    )
    for bad, status in [("relative", 400), ("/definitely/not/here", 404), ("x" * 3000, 400), ("/tmp/\x00", 400)]:
        assert (
            requests.get(server.url + "/api/workspace/browse", params={"path": bad}, timeout=10).status_code == status
        )


def test_password_mode_ignores_the_field_for_other_users_silently(server_factory, model, tmp_path):
    server = server_factory(env=env_for(model, ODYSSEUS_AUTH="password"))
    password = "correct horse battery"
    setup = requests.post(server.url + "/api/auth/setup", json={"username": "alice", "password": password}, timeout=10)
    admin = {
        "Authorization": "Bearer "
        + requests.post(
            server.url + "/api/auth/tokens",
            json={"name": "t"},
            cookies=setup.cookies,
            timeout=10,
            headers={"X-Odysseus-CSRF": setup.json()["csrf_token"]},
        ).json()["token"]
    }
    assert (
        requests.post(
            server.url + "/api/auth/users", json={"username": "bob", "password": password}, headers=admin, timeout=10
        ).status_code
        == 201
    )
    login = requests.post(server.url + "/api/auth/login", json={"username": "bob", "password": password}, timeout=10)
    bob = {
        "Authorization": "Bearer "
        + requests.post(
            server.url + "/api/auth/tokens",
            json={"name": "t"},
            cookies=login.cookies,
            timeout=10,
            headers={"X-Odysseus-CSRF": login.json()["csrf_token"]},
        ).json()["token"]
    }
    allowed = requests.patch(
        f"{server.url}/api/admin/users/{login.json()['user']['id']}/code-tools",
        json={"code_tools": True},
        headers=admin,
        timeout=10,
    )  # bob may run code tools
    assert allowed.status_code == 200
    chosen = tmp_path / "shared"
    chosen.mkdir()
    for path in (str(chosen), "/etc", "/no/such/dir"):
        script_pwd(model)
        stream, frames = agent_frames(server.url, headers=bob, workspace=path)
        kinds = types_of(frames)
        assert "workspace_rejected" not in kinds and "notice" not in kinds  # no probing host paths
        session = stream.headers["X-Odysseus-Session-Id"]
        assert pwd_of(frames, tmp_path, server.data_dir).endswith(
            os.path.join("workspaces", login.json()["user"]["id"], session)
        )
    assert requests.get(server.url + "/api/workspace/browse", headers=bob, timeout=10).status_code == 403
    script_pwd(model)
    _, frames = agent_frames(server.url, headers=admin, workspace=str(chosen))
    assert pwd_of(frames, tmp_path, server.data_dir) == str(chosen)
    script_pwd(model)
    _, frames = agent_frames(server.url, headers=admin, workspace="/no/such/dir")
    assert types_of(frames)[0] == "workspace_rejected"
