"""Attacks on the code sandbox, as a non-admin user in password mode, through the real agent loop.

A real gunicorn+gevent server, a scripted OpenAI-compatible model that calls ``shell`` and
``run_python`` with hostile programs, and a user whom the admin allowed the code tools.
Each attack must fail or be contained: the cookie-signing key, the database, the server's
environment (the provider API key), another session's workspace and /etc/shadow stay
unreadable; a loopback server the test runs is unreachable; nothing survives the call;
400 MB without a newline leaves the server's memory bounded; a fork loop hits the process
limit. Approvals are off here (``AGENT_APPROVAL_TOOLS=""``); they are tested elsewhere.
"""

from __future__ import annotations

import os
import socket
import threading
import time

import pytest
import requests
from scripted_model import ScriptedModel, reply, tool
from sseclient import Stream
from waiting import wait_for

PASSWORD = "correct horse battery"
PROVIDER_KEY = "sk-provider-key-must-not-leak-7f3a"


@pytest.fixture(scope="module")
def model():
    with ScriptedModel() as scripted:
        yield scripted


@pytest.fixture(scope="module")
def server(model, tmp_path_factory):
    from liveserver import LiveServer

    srv = LiveServer(
        str(tmp_path_factory.mktemp("sandbox")),
        {
            "ODYSSEUS_AUTH": "password",
            "OPENAI_BASE_URL": model.url + "/v1",
            "OPENAI_API_KEY": PROVIDER_KEY,
            "ODYSSEUS_AGENT_TOOLS": "shell,run_python",
            "ODYSSEUS_AGENT_APPROVAL_TOOLS": "",
            "ODYSSEUS_CODE_TIMEOUT": "40",
            "ODYSSEUS_TOOL_TIMEOUT": "60",
            "ODYSSEUS_SANDBOX_MAX_PROCESSES": "32",
            "ODYSSEUS_AGENT_MAX_TOOL_CALLS": "50",
            "ODYSSEUS_HEARTBEAT_INTERVAL": "0.5",
        },
    ).start()
    yield srv
    srv.stop()


class User:
    """A signed-in browser session (cookie + CSRF header)."""

    def __init__(self, base: str):
        self.base = base
        self.http = requests.Session()
        self.headers = {"Origin": base}

    def call(self, method: str, path: str, **kwargs) -> requests.Response:
        return self.http.request(method, self.base + path, headers=self.headers, timeout=30, **kwargs)

    def signed_in(self, response: requests.Response) -> "User":
        assert response.ok, response.text
        self.headers["X-Odysseus-CSRF"] = response.json()["csrf_token"]
        return self


def sign_up(server, admin: User, username: str) -> User:
    created = admin.call("POST", "/api/auth/users", json={"username": username, "password": PASSWORD})
    assert created.status_code == 201
    user = User(server.url)
    user.signed_in(user.call("POST", "/api/auth/login", json={"username": username, "password": PASSWORD}))
    user.id = created.json()["id"]
    return user


@pytest.fixture(scope="module")
def admin(server):
    user = User(server.url)
    user.signed_in(user.call("POST", "/api/auth/setup", json={"username": "admin", "password": PASSWORD}))
    yield user
    user.http.close()


@pytest.fixture(scope="module")
def people(server, admin):
    """The admin, and bob: a non-admin user whom the admin allowed the code tools."""
    bob = sign_up(server, admin, "bob")
    assert admin.call("PATCH", f"/api/admin/users/{bob.id}/code-tools", json={"code_tools": True}).ok
    yield admin, bob
    bob.http.close()


def turn(server, user: User, model, calls, session_id=None):
    """One agent turn whose model makes ``calls`` in one round and then answers; returns (frames, session)."""
    with model.lock:
        model.replies = [reply(tool_calls=calls), reply("done")]
        model.requests.clear()
    body = {"mode": "agent"}
    if session_id:
        body["session_id"] = session_id
    response = user.http.post(
        server.url + "/api/chat_stream", json={"message": "go", **body}, headers=user.headers, stream=True, timeout=180
    )
    assert response.status_code == 200, response.text
    stream = Stream(response)
    try:
        frames = [f["data"] for f in stream.events() if isinstance(f.get("data"), dict)]
    finally:
        stream.close()
    return frames, response.headers["X-Odysseus-Session-Id"]


def outputs(frames):
    return {f["call_id"]: f for f in frames if f.get("type") == "tool_output"}


def offered(model):
    return [t["function"]["name"] for t in (model.requests[0].get("tools") or [])]


def host_processes(marker: str) -> list:
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as fh:
                if marker.encode() not in fh.read():
                    continue
            with open(f"/proc/{name}/stat") as fh:
                if fh.read().split(")")[-1].split()[0] == "Z":
                    continue
        except OSError:
            continue
        found.append(int(name))
    return found


def worker_pids(master: int) -> list:
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as fh:
                    if int(fh.read().split(")")[-1].split()[1]) == master:
                        pids.append(int(name))
            except (OSError, ValueError, IndexError):
                continue
    return pids


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


# ------------------------------------------------------------------------------------------ access
def test_a_new_non_admin_user_is_not_offered_the_code_tools_until_the_admin_allows(server, model, admin):
    bob = sign_up(server, admin, "carol")
    health = bob.call("GET", "/api/code-tools").json()
    assert health["available"] is True and health["sandbox"] == "bubblewrap"
    assert health["allowed"] is False and "admin" in health["reason"]
    frames, _ = turn(server, bob, model, [tool("x1", "shell", command="id")])
    assert "shell" not in offered(model) and "run_python" not in offered(model)
    # the call is never run: ignored (no tools at all) or answered "there is no tool named 'shell'"
    assert all("no tool named 'shell'" in f["output"] for f in frames if f.get("type") == "tool_output")
    # only an admin may change it
    assert bob.call("PATCH", f"/api/admin/users/{bob.id}/code-tools", json={"code_tools": True}).status_code == 403
    assert bob.call("GET", "/api/admin/code-tools").status_code == 403
    assert admin.call("PATCH", "/api/admin/users/u_nobody/code-tools", json={"code_tools": True}).status_code == 404
    bad = admin.call("PATCH", f"/api/admin/users/{bob.id}/code-tools", json={"code_tools": "yes"})
    assert bad.status_code == 400 and "error" in bad.json()
    ok = admin.call("PATCH", f"/api/admin/users/{bob.id}/code-tools", json={"code_tools": True})
    assert ok.json() == {"user_id": bob.id, "code_tools": True}
    listing = admin.call("GET", "/api/admin/code-tools").json()
    assert {u["username"]: u["code_tools"] for u in listing["users"]}["carol"] is True
    assert bob.call("GET", "/api/code-tools").json()["allowed"] is True
    frames, _ = turn(server, bob, model, [tool("x2", "shell", command="id -u; pwd")])
    assert {"shell", "run_python"} <= set(offered(model))
    uid, cwd = outputs(frames)["x2"]["output"].split()
    assert uid != "0" and cwd == "/workspace"


# ------------------------------------------------------------------------------------------ secrets
def test_the_secret_key_database_environment_and_shadow_stay_out_of_reach(server, model, people):
    admin, bob = people
    with open(os.path.join(server.data_dir, "secret_key")) as fh:
        secret = fh.read().strip()
    db_path = os.path.join(server.data_dir, "odysseus.db")
    assert os.path.exists(db_path) and secret
    master = server.proc.pid
    pids = [master] + worker_pids(master)
    probe = (
        "import os\n"
        f"for path in {[db_path, os.path.join(server.data_dir, 'secret_key')]!r} + "
        "['../../../secret_key', '../../odysseus.db', '/etc/shadow']:\n"
        "    try:\n"
        "        print('READ', path, open(path, 'rb').read()[:64])\n"
        "    except OSError as exc:\n"
        "        print('denied', path, type(exc).__name__)\n"
        "print('ROOT', sorted(os.listdir('/')))\n"
        "found = []\n"
        "for top in os.listdir('/'):\n"
        "    if top not in ('proc', 'dev'):\n"
        "        for root, dirs, files in os.walk('/' + top):\n"
        "            found += [f for f in files if f in ('secret_key', 'odysseus.db')]\n"
        "print('FOUND', found)\n"
    )
    environ = "; ".join(f"tr '\\0' '\\n' < /proc/{pid}/environ" for pid in pids)
    frames, _ = turn(
        server,
        bob,
        model,
        [
            tool(
                "s1",
                "shell",
                command="cat ../../../secret_key ../../secret_key /workspace/../secret_key; "
                "cat /etc/shadow; ls /etc; echo END",
            ),
            tool("s2", "run_python", code=probe),
            tool(
                "s3",
                "shell",
                command=f"{environ}; tr '\\0' '\\n' < /proc/$PPID/environ; "
                "for p in /proc/[0-9]*; do tr '\\0' '\\n' < $p/environ; done; echo END",
            ),
        ],
    )
    out = outputs(frames)
    everything = "\n".join(o["output"] for o in out.values())
    assert secret not in everything and PROVIDER_KEY not in everything
    assert "sk-provider" not in everything and "root:" not in everything
    assert out["s1"]["output"].rstrip().endswith("END") and "No such file" in out["s1"]["output"]
    assert "READ" not in out["s2"]["output"] and out["s2"]["output"].count("denied") == 5
    assert "FOUND []" in out["s2"]["output"]
    root = out["s2"]["output"].split("ROOT ")[1].splitlines()[0]
    assert "etc" not in root and "home" not in root and os.path.basename(server.data_dir) not in root
    assert out["s3"]["output"].rstrip().endswith("END")


def test_one_sessions_sandbox_cannot_read_anothers_workspace(server, model, people):
    admin, bob = people
    frames, admin_session = turn(
        server, admin, model, [tool("w1", "shell", command="echo admin-private-text > notes.txt && echo saved")]
    )
    assert outputs(frames)["w1"]["output"].strip() == "saved"
    frames, bob_a = turn(server, bob, model, [tool("w2", "shell", command="echo bob-a-text > mine.txt")])
    host_ws = os.path.join(server.data_dir, "workspaces")
    admin_dir = next(os.path.join(root, d) for root, dirs, _ in os.walk(host_ws) for d in dirs if d == admin_session)
    assert os.stat(admin_dir).st_mode & 0o777 == 0o700
    for dirpath, dirs, _files in os.walk(host_ws):
        for d in dirs:
            assert os.stat(os.path.join(dirpath, d)).st_mode & 0o077 == 0, os.path.join(dirpath, d)
    frames, bob_b = turn(
        server,
        bob,
        model,
        [
            tool(
                "w3",
                "shell",
                command="cat ../*/notes.txt ../*/mine.txt ../../*/*/notes.txt; ls -a ..; "
                f"cat {admin_dir}/notes.txt; find / -name notes.txt -o -name mine.txt "
                "2>/dev/null; echo END",
            ),
            tool("w4", "run_python", code=f"print(open({os.path.join(admin_dir, 'notes.txt')!r}).read())"),
        ],
    )
    assert bob_b != bob_a
    out = outputs(frames)
    assert "admin-private-text" not in out["w3"]["output"] and "bob-a-text" not in out["w3"]["output"]
    assert out["w3"]["output"].rstrip().endswith("END")
    assert "FileNotFoundError" in out["w4"]["output"] and out["w4"]["exit_code"] == 1


# ------------------------------------------------------------------------------------------ network
def test_no_connection_reaches_a_loopback_server_of_the_host(server, model, people):
    admin, bob = people
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.2)
    port = listener.getsockname()[1]
    accepted = []
    stop = threading.Event()

    def accept():
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
                accepted.append(conn)
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        code = (
            "import socket\n"
            "for host in ('127.0.0.1', 'localhost', '10.0.2.2'):\n"
            "    try:\n"
            f"        socket.create_connection((host, {port}), timeout=3)\n"
            "        print('CONNECTED', host)\n"
            "    except OSError as exc:\n"
            "        print('refused', host, type(exc).__name__)\n"
        )
        frames, _ = turn(server, bob, model, [tool("n1", "run_python", code=code)])
        out = outputs(frames)["n1"]["output"]
        assert "CONNECTED" not in out and out.count("refused") == 3
        # the listener works from here, so the refusal was the sandbox's doing
        socket.create_connection(("127.0.0.1", port), timeout=3).close()
        wait_for(lambda: accepted, what="the control connection")
        assert len(accepted) == 1
    finally:
        stop.set()
        thread.join(5)
        listener.close()
        for conn in accepted:
            conn.close()


# ------------------------------------------------------------------------------------------ containment
def test_nothing_started_in_the_sandbox_outlives_the_call(server, model, people):
    admin, bob = people
    started = time.monotonic()
    frames, _ = turn(
        server,
        bob,
        model,
        [
            tool(
                "p1",
                "shell",
                command="setsid sleep 1000.25 >/dev/null 2>&1 </dev/null & "
                "(setsid sleep 1000.26 &) ; nohup sleep 1000.27 & echo spawned",
            )
        ],
    )
    assert outputs(frames)["p1"]["output"].strip().endswith("spawned")
    assert time.monotonic() - started < 60
    wait_for(lambda: not host_processes("1000.2"), timeout=10, what="the sandbox's processes to be gone")


def test_400_mb_without_a_newline_leaves_the_server_memory_bounded(server, model, people):
    admin, bob = people
    workers = worker_pids(server.proc.pid)
    assert workers
    before = sum(rss_kib(pid) for pid in workers)
    code = (
        "import sys\nchunk = 'x' * (1 << 20)\n"
        "for _ in range(400):\n    sys.stdout.write(chunk)\nsys.stdout.flush()\nprint('', end='')\n"
    )
    peak = [before]
    slowest = [0.0]
    done = threading.Event()

    def sample():
        while not done.is_set():
            try:
                peak[0] = max(peak[0], sum(rss_kib(pid) for pid in workers))
            except OSError:
                pass
            asked = time.monotonic()  # the server keeps answering while it drains the output
            requests.get(server.url + "/api/health", timeout=30)
            slowest[0] = max(slowest[0], time.monotonic() - asked)
            time.sleep(0.05)  # measurement: sample memory and latency every 50 ms

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        frames, _ = turn(server, bob, model, [tool("m1", "run_python", code=code)])
    finally:
        done.set()
        sampler.join(5)
    out = outputs(frames)["m1"]
    assert out["exit_code"] == 0 and out["output"].startswith("x" * 100)
    tool_message = next(m for m in model.requests[-1]["messages"] if m["role"] == "tool")
    assert len(tool_message["content"]) < 50_000  # what the model got is capped too
    assert (peak[0] - before) < 200 * 1024, f"server RSS grew by {(peak[0] - before) // 1024} MiB"
    assert slowest[0] < 5, f"/api/health took {slowest[0]:.1f} s while the tool ran"


def test_a_fork_loop_is_bounded_by_the_process_limit(server, model, people):
    admin, bob = people
    code = (
        "import os, time\nn = 0\n"
        "try:\n"
        "    while n < 2000:\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(1000.31)\n"
        "            os._exit(0)\n"
        "        n += 1\n"
        "except OSError as exc:\n"
        "    print('limited after', n, exc.errno)\n"
    )
    frames, _ = turn(
        server,
        bob,
        model,
        [
            tool("f1", "run_python", code=code),
            tool(
                "f2",
                "shell",
                command="i=0; while [ $i -lt 300 ]; do sleep 1000.32 >/dev/null 2>&1 & "
                "i=$((i+1)); done 2>&1 | tail -1; "
                # builtins only: with every process slot taken, `ls | grep` could not fork to count
                "n=0; for p in /proc/[0-9]*; do n=$((n+1)); done; echo $n",
            ),
        ],
    )
    out = outputs(frames)
    assert "limited after" in out["f1"]["output"]
    assert int(out["f1"]["output"].split("limited after ")[1].split()[0]) < 32
    assert "fork" in out["f2"]["output"].lower()
    assert int(out["f2"]["output"].split()[-1]) <= 34
    wait_for(lambda: not host_processes("1000.3"), timeout=10, what="the forked processes to be gone")


def test_network_only_where_an_admin_enabled_it_on_the_profile(server, model, people):
    admin, bob = people
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    profile = bob.call("POST", "/api/agent/profiles", json={"name": "online"}).json()
    code = (
        "import socket\ntry:\n"
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=3).close()\n    print('CONNECTED')\n"
        "except OSError as exc:\n    print('refused', type(exc).__name__)\n"
    )

    def run_with_profile():
        with model.lock:
            model.replies = [reply(tool_calls=[tool("n2", "run_python", code=code)]), reply("done")]
            model.requests.clear()
        response = bob.http.post(
            server.url + "/api/agent/chat/stream",
            json={"message": "go", "profile_id": profile["id"]},
            headers=bob.headers,
            stream=True,
            timeout=120,
        )
        assert response.status_code == 200, response.text
        stream = Stream(response)
        try:
            return [f["data"]["content"] for f in stream.events() if f.get("event") == "tool_result"]
        finally:
            stream.close()

    try:
        assert "refused" in run_with_profile()[0]
        path = f"/api/admin/profiles/{profile['id']}/code-tools"
        assert bob.call("PATCH", path, json={"network": True}).status_code == 403
        missing = admin.call("PATCH", "/api/admin/profiles/prof_nope/code-tools", json={"network": True})
        assert missing.status_code == 404
        assert admin.call("PATCH", path, json={"network": "on"}).status_code == 400
        changed = admin.call("PATCH", path, json={"network": True})
        assert changed.json()["network"] is True and changed.json()["owner"] == bob.id
        assert "CONNECTED" in run_with_profile()[0]
        # the admin can also take the code tools away for this profile
        assert admin.call("PATCH", path, json={"code_tools": False}).json()["code_tools"] is False
        run_with_profile()
        assert "run_python" not in offered(model)
    finally:
        listener.close()


# ------------------------------------------------------------------------------------------ workflows
def test_a_workflow_does_not_hand_the_code_tools_to_a_user_without_them(server, model, admin):
    """A non-admin without code tools cannot get them through a supervisor and its specialist either."""
    dave = sign_up(server, admin, "dave")
    for agent_id in ("crew_boss", "crew_runner"):
        made = dave.call(
            "POST", "/api/agents", json={"agent_id": agent_id, "name": agent_id, "tools": ["shell", "run_python"]}
        )
        assert made.status_code == 201, made.text
    made = dave.call(
        "POST",
        "/api/alloy/workflows",
        json={
            "id": "crew",
            "name": "Crew",
            "supervisor_agent_id": "crew_boss",
            "members": [
                {"agent_id": "crew_boss", "role": "supervisor"},
                {"agent_id": "crew_runner", "role": "specialist"},
            ],
        },
    )
    assert made.status_code == 201, made.text
    with model.lock:
        model.replies = [
            reply(tool_calls=[tool("d1", "delegate_to", agent_id="crew_runner", task="run id")]),
            reply(tool_calls=[tool("s1", "shell", command="id -u")]),
            reply("could not"),
            reply("done"),
        ]
        model.requests.clear()
    response = dave.http.post(
        server.url + "/api/chat_stream",
        headers=dave.headers,
        stream=True,
        timeout=120,
        json={"message": "go", "mode": "agent", "workflow_id": "crew"},
    )
    assert response.status_code == 200, response.text
    stream = Stream(response)
    try:
        frames = [f["data"] for f in stream.events() if isinstance(f.get("data"), dict)]
    finally:
        stream.close()
    offered_anywhere = {t["function"]["name"] for r in model.requests for t in (r.get("tools") or [])}
    assert "delegate_to" in offered_anywhere and not offered_anywhere & {"shell", "run_python"}
    assert [f["target_agent_id"] for f in frames if f.get("type") == "delegation_start"] == ["crew_runner"]
    # the specialist's shell call never runs: ignored (no tools offered) or answered "no tool named 'shell'"
    results = [f for f in frames if f.get("type") in ("delegation_tool_result", "tool_output")]
    assert all("no tool named 'shell'" in (f.get("content") or f.get("output") or "") for f in results)
