"""The ownership matrix over a real gunicorn server in password mode.

Two users each have a session with a running run. Every route is called against the
victim's ids by the other user (cookie and token), by an anonymous client, with the
victim's own revoked token and with a forged cookie: each answers 401 or 404, shows
none of the victim's text, and the victim's run keeps running with its data unchanged.

Routes added later are covered by appending to ``ROUTES``; an entry whose ``rule`` is
not registered on this branch is skipped until it is.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Dict, Optional

import pytest
import requests
from flask import Flask
from liveserver import ROOT, LiveServer
from searxng import searxng

from odysseus import create_app

PASSWORD = "correct horse battery"
CSRF = "X-Odysseus-CSRF"


@dataclass
class Route:
    """One route to attack; ``{session}``, ``{run}``, ``{message}``, ``{job}`` are the victim's ids."""

    name: str
    method: str
    path: str
    json: Optional[dict] = None
    headers: Dict[str, str] = field(default_factory=dict)
    rule: Optional[str] = None  # skip while this Flask rule is not registered
    needs: tuple = ()  # victim ids this route needs beyond session/run/message (e.g. "job")
    #: signed-in strangers get the answer an unknown id gets (200 run_missing + close, issue 12 rule 5), not 404
    like_unknown: bool = False


ROUTES = [
    Route("get session", "GET", "/api/sessions/{session}"),
    Route("list messages", "GET", "/api/sessions/{session}/messages"),
    Route("rename session", "PATCH", "/api/sessions/{session}", json={"title": "pwned"}),
    Route("delete session", "DELETE", "/api/sessions/{session}"),
    Route("edit message", "PATCH", "/api/messages/{message}", json={"content": "pwned"}),
    Route("delete message", "DELETE", "/api/messages/{message}"),
    Route("chat into session", "POST", "/api/chat_stream", json={"message": "pwned", "session_id": "{session}"}),
    Route("chat into session (session)", "POST", "/api/chat_stream", json={"message": "pwned", "session": "{session}"}),
    Route("stream_status", "GET", "/api/chat/stream_status/{session}"),
    Route("resume", "GET", "/api/chat/resume/{session}"),
    Route("resume after cursor", "GET", "/api/chat/resume/{session}?after=1"),
    Route("stop (header run id)", "POST", "/api/chat/stop/{session}", headers={"X-Odysseus-Run-Id": "{run}"}),
    Route("stop (body run id)", "POST", "/api/chat/stop/{session}", json={"run_id": "{run}"}),
    # The agent API (spec: agent-stream-and-detached-runs.md), active once merged.
    Route(
        "agent attach",
        "GET",
        "/api/agent/chat/stream/attach?run_id={run}",
        rule="/api/agent/chat/stream/attach",
        like_unknown=True,
    ),
    Route("agent cancel", "POST", "/api/agent/chat/runs/{run}/cancel", rule="/api/agent/chat/runs/<run_id>/cancel"),
    Route(
        "agent chat into session",
        "POST",
        "/api/agent/chat/stream",
        json={"message": "pwned", "session_id": "{session}"},
        rule="/api/agent/chat/stream",
    ),
    Route("background job", "GET", "/api/chat/background/{job}", rule="/api/chat/background/<job_id>", needs=("job",)),
    Route("background job cancel", "POST", "/api/chat/background/{job}/cancel", needs=("job",)),
    Route("get profile", "GET", "/api/agent/profiles/{profile}", needs=("profile",)),
    Route("edit profile", "PATCH", "/api/agent/profiles/{profile}", json={"name": "pwned"}, needs=("profile",)),
    Route("delete profile", "DELETE", "/api/agent/profiles/{profile}", needs=("profile",)),
    Route("get agent", "GET", "/api/agents/{agent}", needs=("agent",)),
    Route("edit agent", "PATCH", "/api/agents/{agent}", json={"name": "pwned"}, needs=("agent",)),
    Route("delete agent", "DELETE", "/api/agents/{agent}", needs=("agent",)),
    Route(
        "agent turn as victim's agent",
        "POST",
        "/api/agent/chat/stream",
        json={"message": "pwned", "target_agent_id": "{agent}"},
        needs=("agent",),
    ),
    Route(
        "agent turn with victim's profile",
        "POST",
        "/api/agent/chat/stream",
        json={"message": "pwned", "profile_id": "{profile}"},
        needs=("profile",),
    ),
    Route("get upload", "GET", "/api/upload/{upload}", needs=("upload",)),
    Route("upload content", "GET", "/api/upload/{upload}/content", needs=("upload",)),
    Route("delete upload", "DELETE", "/api/upload/{upload}", needs=("upload",)),
    Route(
        "chat with upload",
        "POST",
        "/api/chat_stream",
        json={"message": "pwned", "attachments": ["{upload}"]},
        needs=("upload",),
    ),
    Route(
        "agent with upload",
        "POST",
        "/api/agent/chat/stream",
        rule="/api/agent/chat/stream",
        json={"message": "pwned", "attachments": ["{upload}"]},
        needs=("upload",),
    ),
    Route(
        "background job into session",
        "POST",
        "/api/chat/background",
        json={"message": "pwned", "session_id": "{session}"},
    ),
    # editor documents
    Route("get document", "GET", "/api/document/{document}", needs=("document",)),
    Route("save document", "PUT", "/api/document/{document}", json={"content": "pwned"}, needs=("document",)),
    Route("rename document", "PATCH", "/api/document/{document}", json={"title": "pwned"}, needs=("document",)),
    Route("delete document", "DELETE", "/api/document/{document}", needs=("document",)),
    Route("document versions", "GET", "/api/document/{document}/versions", needs=("document",)),
    Route("document version", "GET", "/api/document/{document}/version/1", needs=("document",)),
    Route("restore document version", "POST", "/api/document/{document}/restore/1", needs=("document",)),
    Route("list session documents", "GET", "/api/documents/{session}", rule="/api/documents/<session_id>"),
    Route(
        "create document in session",
        "POST",
        "/api/document",
        json={"title": "pwned", "session_id": "{session}"},
        rule="/api/document",
    ),
    Route(
        "chat with victim's document",
        "POST",
        "/api/chat_stream",
        json={"message": "pwned", "active_doc_id": "{document}"},
        needs=("document",),
    ),
    Route(
        "agent with victim's document",
        "POST",
        "/api/agent/chat/stream",
        json={"message": "pwned", "active_doc_id": "{document}"},
        needs=("document",),
    ),
    Route("get memory", "GET", "/api/memory/{memory}", needs=("memory",)),
    Route("edit memory", "PATCH", "/api/memory/{memory}", json={"text": "pwned"}, needs=("memory",)),
    Route("pin memory", "POST", "/api/memory/{memory}/pin", json={"pinned": False}, needs=("memory",)),
    Route("delete memory", "DELETE", "/api/memory/{memory}", needs=("memory",)),
    # the prompt library and ratings (issue 36)
    Route("get prompt", "GET", "/api/prompts/{prompt}", needs=("prompt",)),
    Route("edit prompt", "PATCH", "/api/prompts/{prompt}", json={"content": "pwned"}, needs=("prompt",)),
    Route("delete prompt", "DELETE", "/api/prompts/{prompt}", needs=("prompt",)),
    Route("rate message", "PUT", "/api/messages/{message}/rating", json={"value": -1, "comment": "pwned"}),
    Route("unrate message", "DELETE", "/api/messages/{message}/rating"),
    # research jobs (a job id is a run id)
    Route(
        "research status",
        "GET",
        "/api/research/status/{research}",
        rule="/api/research/status/<job_id>",
        needs=("research",),
    ),
    Route("research result", "GET", "/api/research/{research}", needs=("research",)),
    Route("research stream", "GET", "/api/research/stream/{research}", needs=("research",)),
    Route("research stream after cursor", "GET", "/api/research/stream/{research}?after=1", needs=("research",)),
    Route("research cancel", "POST", "/api/research/cancel/{research}", needs=("research",)),
    Route("research delete", "DELETE", "/api/research/{research}", needs=("research",)),
    Route("research status of a chat run", "GET", "/api/research/status/{run}", rule="/api/research/status/<job_id>"),
    Route(
        "research into session",
        "POST",
        "/api/research/start",
        json={"query": "pwned", "session_id": "{session}"},
        rule="/api/research/start",
    ),
    # organised chats and share links (issue 36)
    Route("move session to no folder", "PATCH", "/api/sessions/{session}", json={"folder_id": None}),
    Route("pin session", "PATCH", "/api/sessions/{session}", json={"pinned": True}),
    Route("archive session", "PATCH", "/api/sessions/{session}", json={"archived": True}),
    Route("rename folder", "PATCH", "/api/folders/{folder}", json={"name": "pwned"}, needs=("folder",)),
    Route("delete folder", "DELETE", "/api/folders/{folder}", needs=("folder",)),
    Route("list victim's folder", "GET", "/api/sessions?folder_id={folder}", needs=("folder",)),
    Route("share session", "POST", "/api/sessions/{session}/share", rule="/api/sessions/<session_id>/share"),
    Route("revoke share", "DELETE", "/api/shares/{share}", needs=("share",)),
    Route("get workflow", "GET", "/api/alloy/workflows/{workflow}", needs=("workflow",)),
    Route("edit workflow", "PATCH", "/api/alloy/workflows/{workflow}", json={"name": "pwned"}, needs=("workflow",)),
    Route("delete workflow", "DELETE", "/api/alloy/workflows/{workflow}", needs=("workflow",)),
    Route(
        "agent turn with victim's workflow",
        "POST",
        "/api/agent/chat/stream",
        json={"message": "pwned", "workflow_id": "{workflow}"},
        needs=("workflow",),
    ),
    Route(
        "chat_stream with victim's workflow",
        "POST",
        "/api/chat_stream",
        json={"message": "pwned", "mode": "agent", "workflow_id": "{workflow}"},
        needs=("workflow",),
    ),
]

# attacker -> the status every route must answer
ATTACKERS = {
    "other user (cookie)": 404,
    "other user (token)": 404,
    "anonymous": 401,
    "victim's revoked token": 401,
    "forged cookie": 401,
}


def registered_rules() -> set:
    """The Flask rules this branch serves (decides which ROUTES entries run)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        app = create_app({"DATA_DIR": tmp, "PROVIDERS": [], "AUTH": "none"})
        try:
            return {rule.rule for rule in app.url_map.iter_rules()}
        finally:
            app.extensions["odysseus.runs"].close()


RULES = registered_rules()


class User:
    """A signed-in browser (cookie + CSRF header) and a program (Bearer token) for one account."""

    def __init__(self, base: str, name: str):
        self.base, self.name = base, name
        self.http = requests.Session()
        response = self.http.post(base + "/api/auth/login", json={"username": name, "password": PASSWORD}, timeout=10)
        assert response.status_code == 200, response.text
        self.id = response.json()["user"]["id"]
        self.http.headers[CSRF] = response.json()["csrf_token"]
        self.token = self.new_token("matrix")
        self.ids: Dict[str, str] = {}
        self.secret = f"{name}-secret-{self.id[-6:]}"  # appears in the prompt, so in the reply too

    def new_token(self, name: str) -> dict:
        response = self.http.post(self.base + "/api/auth/tokens", json={"name": name}, timeout=10)
        assert response.status_code == 201, response.text
        return response.json()

    def start_run(self) -> None:
        """Start a slow demo turn, read its ids from the headers, and drop the connection (it keeps running)."""
        response = self.http.post(
            self.base + "/api/chat_stream", json={"message": f"hello {self.secret}"}, stream=True, timeout=10
        )
        assert response.status_code == 200
        self.ids.update(session=response.headers["X-Odysseus-Session-Id"], run=response.headers["X-Odysseus-Run-Id"])
        response.close()
        messages = self.get(f"/api/sessions/{self.ids['session']}/messages").json()["messages"]
        self.ids["message"] = str(messages[0]["id"])
        # in its own session: a job sent into the running session would replace that run
        background = self.http.post(
            self.base + "/api/chat/background", timeout=10, json={"message": f"job {self.secret}"}
        )
        if background.ok and isinstance(background.json(), dict) and background.json().get("job_id"):
            self.ids["job"] = background.json()["job_id"]
            self.ids["job_session"] = background.json()["session_id"]
        profile = self.http.post(
            self.base + "/api/agent/profiles",
            timeout=10,
            json={"name": f"{self.name} profile", "system_prompt": self.secret},
        )
        if profile.status_code == 201:
            self.ids["profile"] = profile.json()["id"]
        # explicit per-user ids: generated names could collide between the two users by chance
        agent = self.http.post(
            self.base + "/api/agents",
            timeout=10,
            json={"name": f"{self.name} agent", "agent_id": f"{self.name}_helper"},
        )
        if agent.status_code == 201:
            self.ids["agent"] = agent.json()["agent_id"]
        document = self.http.post(
            self.base + "/api/document",
            timeout=10,
            json={"title": f"{self.name} doc", "content": self.secret, "session_id": self.ids["session"]},
        )
        if document.status_code == 201:
            self.ids["document"] = document.json()["id"]
        upload = self.http.post(
            self.base + "/api/upload",
            timeout=10,
            files={"files": ("notes.txt", f"private notes {self.secret}".encode())},
        )
        if upload.status_code == 200:
            self.ids["upload"] = upload.json()["files"][0]["id"]
        folder = self.http.post(self.base + "/api/folders", json={"name": f"folder {self.secret}"}, timeout=10)
        if folder.status_code == 201:
            self.ids["folder"] = folder.json()["id"]
            moved = self.http.patch(
                f"{self.base}/api/sessions/{self.ids['session']}", json={"folder_id": self.ids["folder"]}, timeout=10
            )
            assert moved.status_code == 200, moved.text
        share = self.http.post(f"{self.base}/api/sessions/{self.ids['session']}/share", timeout=10)
        if share.status_code == 201:
            self.ids["share"] = share.json()["id"]
            self.share_path = share.json()["path"]
        memory = self.http.post(
            self.base + "/api/memory", json={"text": f"memory {self.secret}", "pinned": True}, timeout=10
        )
        if memory.status_code == 201:
            self.ids["memory"] = memory.json()["id"]
        prompt = self.http.post(
            self.base + "/api/prompts",
            json={"title": f"{self.name} prompt", "command": "mine", "content": self.secret},
            timeout=10,
        )
        if prompt.status_code == 201:
            self.ids["prompt"] = prompt.json()["id"]
        research = self.http.post(
            self.base + "/api/research/start", timeout=10, json={"query": f"research {self.secret}"}
        )
        if research.status_code == 202:
            self.ids["research"] = research.json()["job_id"]
            self.ids["research_session"] = research.json()["session_id"]
            second = self.http.post(
                self.base + "/api/agents", timeout=10, json={"name": "helper two", "agent_id": f"{self.name}_second"}
            )
            workflow = self.http.post(
                self.base + "/api/alloy/workflows",
                timeout=10,
                json={
                    "id": f"{self.name}-team",
                    "name": self.secret,
                    "members": [
                        {"agent_id": self.ids["agent"], "role": "supervisor"},
                        {"agent_id": second.json().get("agent_id"), "role": "specialist"},
                    ],
                },
            )
            if workflow.status_code == 201:
                self.ids["workflow"] = workflow.json()["workflow"]["id"]

    def get(self, path: str) -> requests.Response:
        return self.http.get(self.base + path, timeout=10)

    def snapshot(self) -> dict:
        """What must not change: the session, its messages, and the run (still running, same id)."""
        session = self.get(f"/api/sessions/{self.ids['session']}").json()
        messages = self.get(f"/api/sessions/{self.ids['session']}/messages").json()["messages"]
        status = self.get(f"/api/chat/stream_status/{self.ids['session']}").json()
        profile = self.get(f"/api/agent/profiles/{self.ids['profile']}").json() if "profile" in self.ids else None
        agent = self.get(f"/api/agents/{self.ids['agent']}").json() if "agent" in self.ids else None
        document = self.get(f"/api/document/{self.ids['document']}").json() if "document" in self.ids else None
        versions = self.get(f"/api/document/{self.ids['document']}/versions").json() if document else None
        upload = self.get(f"/api/upload/{self.ids['upload']}").json() if "upload" in self.ids else None
        if upload:
            upload.pop("index_status", None), upload.pop("chunk_count", None)  # the indexer moves on meanwhile
        memory = self.get(f"/api/memory/{self.ids['memory']}").json() if "memory" in self.ids else None
        prompt = self.get(f"/api/prompts/{self.ids['prompt']}").json() if "prompt" in self.ids else None
        workflow = self.get(f"/api/alloy/workflows/{self.ids['workflow']}").json() if "workflow" in self.ids else None
        folders = self.get("/api/folders").json() if "folder" in self.ids else None
        shares = self.get("/api/shares").json() if "share" in self.ids else None
        return {
            "title": session["title"],
            "organised": [session.get("folder_id"), session.get("pinned"), session.get("archived")],
            "folders": folders,
            "shares": shares,
            "messages": [(m["id"], m["role"], m["content"], m.get("rating")) for m in messages],
            "run_id": status["run_id"],
            "status": status["status"],
            "profile": profile,
            "agent": agent,
            "document": document,
            "versions": versions,
            "upload": upload,
            "memory": memory,
            "prompt": prompt,
            "workflow": workflow,
        }


def forge_cookie(victim: User) -> str:
    """A session cookie naming the victim, signed with a key that is not the server's."""
    forger = Flask("forger")
    forger.config["SECRET_KEY"] = "guessed secret"
    return forger.session_interface.get_signing_serializer(forger).dumps({"uid": victim.id, "sv": 1, "csrf": "x"})


@pytest.fixture(scope="module")
def search_url():
    """A SearXNG stand-in for the users' research jobs (its result is refused by the SSRF guard: fine here)."""
    with searxng([{"title": "t", "url": "http://127.0.0.1:9/x", "content": "c"}]) as url:
        yield url


@pytest.fixture(scope="module")
def world(tmp_path_factory, search_url):
    """A password-mode server with alice (admin) and bob, each with a run lasting over a minute, stopped at teardown."""
    server = LiveServer(
        str(tmp_path_factory.mktemp("accounts")),
        {
            "ODYSSEUS_AUTH": "password",
            "ODYSSEUS_DEMO_TOKEN_DELAY": "1.0",
            "ODYSSEUS_HEARTBEAT_INTERVAL": "0.5",
            # research jobs search a SearXNG stand-in on loopback (tests/searxng.py), never the internet
            "ODYSSEUS_WEB_SEARCH_BACKEND": "searxng",
            "ODYSSEUS_SEARXNG_URL": search_url,
        },
    ).start()
    try:
        setup = requests.post(
            server.url + "/api/auth/setup", json={"username": "alice", "password": PASSWORD}, timeout=10
        )
        assert setup.status_code == 201, setup.text
        admin = requests.Session()
        admin.cookies.update(setup.cookies)
        created = admin.post(
            server.url + "/api/auth/users",
            json={"username": "bob", "password": PASSWORD},
            headers={CSRF: setup.json()["csrf_token"]},
            timeout=10,
        )
        assert created.status_code == 201, created.text
        users = {name: User(server.url, name) for name in ("alice", "bob")}
        for user in users.values():
            revoked = user.new_token("revoked")
            assert user.http.delete(f"{server.url}/api/auth/tokens/{revoked['id']}", timeout=10).ok
            user.revoked = revoked["token"]
            user.start_run()
            user.before = user.snapshot()
            assert user.before["status"] == "running"
        yield server, users
        for user in users.values():
            user.http.post(
                f"{server.url}/api/chat/stop/{user.ids['session']}",
                headers={"X-Odysseus-Run-Id": user.ids["run"]},
                timeout=10,
            )
    finally:
        server.stop()


def attacker_request(server, users, attacker: str, victim: User) -> requests.Session:
    """A requests session acting as ``attacker`` against ``victim``."""
    other = users["bob" if victim.name == "alice" else "alice"]
    if attacker == "other user (cookie)":
        return other.http
    http = requests.Session()
    if attacker == "other user (token)":
        http.headers["Authorization"] = f"Bearer {other.token['token']}"
    elif attacker == "victim's revoked token":
        http.headers["Authorization"] = f"Bearer {victim.revoked}"
    elif attacker == "forged cookie":
        http.cookies.set("odysseus_session", forge_cookie(victim))
        http.headers[CSRF] = "x"
    return http


def fill(value, ids: Dict[str, str]):
    if isinstance(value, str):
        return value.format(**ids)
    if isinstance(value, dict):
        return {k: fill(v, ids) for k, v in value.items()}
    if isinstance(value, list):
        return [fill(v, ids) for v in value]
    return value


@pytest.mark.parametrize("attacker", list(ATTACKERS))
@pytest.mark.parametrize("victim_name", ["alice", "bob"])
@pytest.mark.parametrize("route", ROUTES, ids=[r.name for r in ROUTES])
def test_foreign_callers_get_401_or_404_and_change_nothing(world, route, victim_name, attacker):
    server, users = world
    if route.rule and route.rule not in RULES:
        pytest.skip(f"{route.rule} is not served on this branch yet")
    victim = users[victim_name]
    missing = [need for need in route.needs if need not in victim.ids]
    if missing:
        pytest.skip(f"could not create the victim's {', '.join(missing)}")
    http = attacker_request(server, users, attacker, victim)
    response = http.request(
        route.method,
        server.url + fill(route.path, victim.ids),
        json=fill(route.json, victim.ids),
        headers=fill(route.headers, victim.ids),
        stream=True,
        timeout=10,
    )
    try:
        body = response.raw.read(4096, decode_content=True).decode("utf-8", "replace")
    finally:
        response.close()
    if route.like_unknown and ATTACKERS[attacker] == 404:
        unknown_id = "run_" + "u" * 22
        unknown = http.request(
            route.method,
            server.url + fill(route.path, dict(victim.ids, run=unknown_id)),
            json=fill(route.json, victim.ids),
            headers=fill(route.headers, victim.ids),
            timeout=10,
        )
        # nothing tells the victim's id from an unknown one: the same status, headers and bytes (the id echoed)
        assert response.status_code == unknown.status_code == 200
        assert body.replace(victim.ids["run"], unknown_id) == unknown.text
        assert victim.secret not in body and "run_missing" in body
        assert victim.snapshot() == victim.before
        return
    assert response.status_code == ATTACKERS[attacker], body
    assert victim.secret not in body and victim.ids["run"] not in body
    assert json.loads(body).get("error")
    assert victim.snapshot() == victim.before


@pytest.mark.parametrize("victim_name", ["alice", "bob"])
def test_owner_still_reaches_their_own_run(world, victim_name):
    server, users = world
    owner = users[victim_name]
    assert owner.get(f"/api/chat/stream_status/{owner.ids['session']}").json()["status"] == "running"
    stream = owner.http.get(f"{server.url}/api/chat/resume/{owner.ids['session']}", stream=True, timeout=10)
    assert stream.status_code == 200 and stream.headers["X-Odysseus-Run-Id"] == owner.ids["run"]
    stream.close()
    with_token = requests.get(
        f"{server.url}/api/sessions/{owner.ids['session']}",
        timeout=10,
        headers={"Authorization": f"Bearer {owner.token['token']}"},
    )
    assert with_token.status_code == 200 and with_token.json()["owner"] == owner.id


def test_session_list_shows_only_your_own(world):
    server, users = world
    for user in users.values():
        listed = user.get("/api/sessions").json()["sessions"]
        own = {
            user.ids["session"],
            user.ids.get("job_session", user.ids["session"]),
            user.ids.get("research_session", user.ids["session"]),
        }
        assert {s["id"] for s in listed} == own
        assert all(s["owner"] == user.id for s in listed)
    if "/api/agent/chat/runs" in RULES:
        for user in users.values():
            runs = user.get("/api/agent/chat/runs").json()
            assert user.ids["run"] in json.dumps(runs)
            other = users["bob" if user.name == "alice" else "alice"]
            assert other.ids["run"] not in json.dumps(runs)


def test_memories_list_and_search_show_only_your_own(world):
    _, users = world
    for user in users.values():
        other = users["bob" if user.name == "alice" else "alice"]
        listed = user.get("/api/memory").json()["memories"]
        assert [m["id"] for m in listed] == [user.ids["memory"]]
        found = user.get(f"/api/memory/search?q=memory+{other.secret}").json()["memories"]
        assert other.secret not in json.dumps(found) and [m["id"] for m in found] == [user.ids["memory"]]


def test_a_share_link_shows_that_chat_and_nothing_else_to_anyone(world):
    server, users = world
    for user in users.values():
        other = users["bob" if user.name == "alice" else "alice"]
        anonymous = requests.get(server.url + user.share_path + "?format=json", timeout=10)
        assert anonymous.status_code == 200
        assert anonymous.json()["messages"] == [{"role": "user", "content": f"hello {user.secret}"}]
        page = requests.get(server.url + user.share_path, timeout=10).text
        for leak in (other.secret, f"memory {user.secret}", f"job {user.secret}", f"private notes {user.secret}"):
            assert leak not in page and leak not in anonymous.text
        assert user.id not in page and user.id not in anonymous.text  # nothing names the owner


def test_workspace_browse_is_for_admins_only(world):
    server, users = world
    assert users["alice"].get("/api/workspace/browse?path=/tmp").status_code == 200  # alice set up: admin
    refused = users["bob"].get("/api/workspace/browse?path=/tmp")
    assert refused.status_code == 403 and refused.json()["error"]


def test_anonymous_callers_get_401_everywhere(world):
    server, _ = world
    for method, path in [
        ("GET", "/api/sessions"),
        ("POST", "/api/sessions"),
        ("GET", "/api/models"),
        ("POST", "/api/chat_stream"),
        ("GET", "/api/auth/tokens"),
        ("GET", "/api/auth/users"),
    ]:
        assert requests.request(method, server.url + path, json={}, timeout=10).status_code == 401, path


def test_cross_site_cookie_post_is_refused(world):
    server, users = world
    alice = users["alice"]
    count = len(alice.get("/api/sessions").json()["sessions"])
    foreign = requests.post(
        server.url + "/api/sessions",
        json={"title": "csrf"},
        cookies=alice.http.cookies,
        headers={"Origin": "http://evil.example"},
        timeout=10,
    )
    assert foreign.status_code == 403
    bare = requests.post(server.url + "/api/sessions", json={"title": "csrf"}, cookies=alice.http.cookies, timeout=10)
    assert bare.status_code == 403
    stop = requests.post(
        f"{server.url}/api/chat/stop/{alice.ids['session']}",
        cookies=alice.http.cookies,
        headers={"Origin": "http://evil.example", "X-Odysseus-Run-Id": alice.ids["run"]},
        timeout=10,
    )
    assert stop.status_code == 403
    assert len(alice.get("/api/sessions").json()["sessions"]) == count
    assert alice.snapshot() == alice.before


def test_run_ids_are_unguessable(world):
    _, users = world
    for user in users.values():
        run_id = user.ids["run"]
        assert run_id.startswith("run_") and len(run_id) - 4 >= 22  # 128 bits of base64url


def test_single_user_mode_refuses_a_public_bind(server_factory):
    # 192.0.2.1 (TEST-NET-1) is never a local address, so nothing could listen on it even if the check failed.
    with pytest.raises(RuntimeError) as failed:
        server_factory(env={"ODYSSEUS_AUTH": "none", "HOST": "192.0.2.1"})
    assert "not a loopback address" in str(failed.value)


def test_cli_serve_refuses_a_public_bind():
    env = {"ODYSSEUS_AUTH": "none", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-m", "odysseus.cli", "serve", "--host", "192.0.2.1"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "not a loopback address" in done.stderr
