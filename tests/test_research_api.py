"""Research jobs over a real gunicorn+gevent server: the job API, its stream, and both chat projections.

The model is the task-aware scripted server (tests/research_fakes.py), search is the SearXNG
stand-in and pages come from a local site; fetches reach it through FETCH_ALLOWED_NETWORKS
(the SSRF guard's test switch, set to loopback only here).
"""

from __future__ import annotations


import pytest
import requests
from research_fakes import ResearchModel, Site
from scripted_model import reply
from searxng import searxng
from sseclient import open_stream, post_chat, types_of
from waiting import wait_for
from liveserver import serving_model

PAGES = {f"/p{i}": (f"Page {i}", f"Text of page {i} about ithaca. " * 10) for i in range(1, 9)}


@pytest.fixture(scope="module")
def model():
    with ResearchModel() as server:
        yield server


@pytest.fixture(scope="module")
def site():
    server = Site(PAGES)
    yield server
    server.close()


@pytest.fixture(scope="module")
def search(site):
    holder = type("Search", (), {"rows": ["/p1", "/p2"]})()
    with searxng(lambda query: site.rows(*holder.rows)) as url:
        holder.url = url
        yield holder


@pytest.fixture(scope="module")
def server(model, search, tmp_path_factory):
    with serving_model(
        model.url,
        str(tmp_path_factory.mktemp("research")),
        OPENAI_MODEL="scripted",
        ODYSSEUS_WEB_SEARCH_BACKEND="searxng",
        ODYSSEUS_SEARXNG_URL=search.url,
        ODYSSEUS_FETCH_ALLOWED_NETWORKS="127.0.0.1/32",
        ODYSSEUS_EVICT_GRACE="30",
        ODYSSEUS_RESEARCH_PROGRESS_INTERVAL="1",
    ) as srv:
        yield srv


@pytest.fixture(autouse=True)
def fresh(model, site, search):
    model.set()
    site.delays.clear()
    search.rows = ["/p1", "/p2"]


def start(server, **body):
    response = requests.post(server.url + "/api/research/start", json={"query": "Where is Ithaca?", **body}, timeout=10)
    assert response.status_code == 202, response.text
    return response.json()


def job_frames(server, job_id, after=None, limit=None):
    headers = {"Last-Event-ID": str(after)} if after is not None else {}
    stream = open_stream("GET", f"{server.url}/api/research/stream/{job_id}", headers=headers)
    assert stream.status_code == 200 and stream.headers["Content-Type"].startswith("text/event-stream")
    out = []
    try:
        for frame in stream.frames():
            if "comment" in frame:
                continue
            out.append(frame)
            if limit and len(out) >= limit:
                break
    finally:
        stream.close()
    return out


def test_a_job_from_start_to_result(server, site):
    job = start(server, max_rounds=2)
    assert job["status"] == "running" and job["query"] == "Where is Ithaca?" and job["job_id"].startswith("run_")
    frames = job_frames(server, job["job_id"])
    ids = [f["id"] for f in frames]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    data = [f["data"] for f in frames]
    phases = [d.get("phase") for d in data[:-1]]
    assert phases[:3] == ["probing", "planning", "searching"] and phases.count("reading") == 2
    assert phases.index("analyzing") < phases.index("writing") < phases.index("sources") < phases.index("findings")
    assert all(d["status"] == "running" for d in data[:-1])
    assert "".join(d["delta"] for d in data if d.get("phase") == "report").startswith("## Answer")
    assert data[-1] == {
        "status": "done",
        "final": True,
        "job_id": job["job_id"],
        "session_id": job["session_id"],
        "message_id": data[-1]["message_id"],
        "partial": False,
    }
    result = requests.get(f"{server.url}/api/research/{job['job_id']}", timeout=10).json()
    assert result["status"] == "done" and result["partial"] is False
    assert result["report"].startswith("## Answer") and "## Sources" in result["report"]
    assert sorted(s["url"] for s in result["sources"]) == [site.url + "/p1", site.url + "/p2"]
    assert {f["summary"] for f in result["findings"]} == {"Finding from p1", "Finding from p2"}
    assert result["stats"]["rounds"] == 1 and result["stats"]["pages_read"] == 2
    status = requests.get(f"{server.url}/api/research/status/{job['job_id']}", timeout=10).json()
    assert status["status"] == "done" and status["total_sources"] == 2 and status["total_findings"] == 2
    # the report is the saved reply of the job's session, with the research in its metadata
    messages = requests.get(f"{server.url}/api/sessions/{job['session_id']}/messages", timeout=10).json()["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant"] and messages[0]["content"] == "Where is Ithaca?"
    assert messages[1]["content"] == result["report"]
    meta = messages[1]["metadata"]["research"]
    assert meta["job_id"] == job["job_id"] and meta["sources"] == result["sources"]
    assert meta["findings"] == result["findings"]


def test_the_job_stream_resumes_after_a_cursor(server, site):
    site.delays["/p2"] = 1.0
    job = start(server)
    first = job_frames(server, job["job_id"], limit=3)
    assert [f["data"]["phase"] for f in first] == ["probing", "planning", "searching"]
    rest = job_frames(server, job["job_id"], after=first[-1]["id"])
    assert rest[0]["id"] == first[-1]["id"] + 1
    whole = job_frames(server, job["job_id"])  # after the end: the log replays whole
    assert first + rest == whole and whole[-1]["data"]["final"] is True
    bad = requests.get(f"{server.url}/api/research/stream/{job['job_id']}", headers={"Last-Event-ID": "x"}, timeout=10)
    assert bad.status_code == 400 and bad.json()["error"]


def test_cancel_keeps_the_findings_and_is_idempotent(server, site):
    site.delays["/p2"] = 30
    job = start(server)
    wait_for(
        lambda: (
            requests.get(f"{server.url}/api/research/status/{job['job_id']}", timeout=10).json()["total_sources"] == 1
        ),
        timeout=20,
        what="the first page",
    )
    first = requests.post(f"{server.url}/api/research/cancel/{job['job_id']}", timeout=20).json()
    assert first == {"cancelled": True, "job_id": job["job_id"], "status": "cancelled"}
    assert requests.post(f"{server.url}/api/research/cancel/{job['job_id']}", timeout=20).json() == first
    result = requests.get(f"{server.url}/api/research/{job['job_id']}", timeout=10).json()
    assert result["status"] == "cancelled" and result["partial"] is True
    assert "Partial report: the job was cancelled" in result["report"] and "Finding from p1" in result["report"]
    assert [s["url"] for s in result["sources"]] == [site.url + "/p1"]
    final = job_frames(server, job["job_id"])[-1]["data"]
    assert final["status"] == "cancelled" and final["final"] is True and final["partial"] is True
    done = start(server)
    job_frames(server, done["job_id"])
    late = requests.post(f"{server.url}/api/research/cancel/{done['job_id']}", timeout=10).json()
    assert late == {"cancelled": False, "job_id": done["job_id"], "status": "done"}


def test_a_failing_synthesis_still_saves_a_partial_report(server, model):
    model.set(write=reply(status=500, error_body='{"error": {"message": "boom"}}'))
    job = start(server)
    frames = job_frames(server, job["job_id"])
    assert any(f["data"].get("phase") == "warning" and "could not be written" in f["data"]["message"] for f in frames)
    assert frames[-1]["data"]["status"] == "done" and frames[-1]["data"]["partial"] is True
    result = requests.get(f"{server.url}/api/research/{job['job_id']}", timeout=10).json()
    assert result["partial"] is True and "Partial report" in result["report"]
    assert "Finding from p1" in result["report"] and "Finding from p2" in result["report"]


def test_list_search_and_delete(server, model):
    a = start(server, query="Ithaca harbour history")
    job_frames(server, a["job_id"])
    b = start(server, query="Troy walls")
    job_frames(server, b["job_id"])
    listed = requests.get(server.url + "/api/research", timeout=10).json()["jobs"]
    order = [j["job_id"] for j in listed]
    assert order.index(b["job_id"]) < order.index(a["job_id"])  # newest first
    found = requests.get(server.url + "/api/research", params={"q": "harbour"}, timeout=10).json()["jobs"]
    assert [j["job_id"] for j in found] == [a["job_id"]]
    assert requests.get(server.url + "/api/research", params={"q": "%"}, timeout=10).json()["jobs"] == []
    gone = requests.delete(f"{server.url}/api/research/{a['job_id']}", timeout=10)
    assert gone.status_code == 200 and gone.json() == {"deleted": True, "job_id": a["job_id"]}
    for path in ("", "status/", "stream/"):
        assert requests.get(f"{server.url}/api/research/{path}{a['job_id']}", timeout=10).status_code == 404
    assert requests.delete(f"{server.url}/api/research/{a['job_id']}", timeout=10).status_code == 404
    # deleting the session the job was saved to forgets the job too
    assert requests.delete(f"{server.url}/api/sessions/{b['session_id']}", timeout=10).ok
    assert requests.get(f"{server.url}/api/research/{b['job_id']}", timeout=10).status_code == 404


@pytest.mark.parametrize(
    "body,message",
    [
        ({"query": ""}, "query"),
        ({"query": 5}, "query"),
        ({"max_rounds": 21}, "max_rounds"),
        ({"max_time": 10}, "max_time"),
        ({"pages_per_round": "many"}, "pages_per_round"),
        ({"session_id": "sess_nope"}, "not found"),
        ({"query": "x" * 5000}, "longer"),
    ],
)
def test_bad_requests_store_nothing(server, body, message):
    before = requests.get(server.url + "/api/sessions", timeout=10).json()["sessions"]
    response = requests.post(server.url + "/api/research/start", json={"query": "Where?", **body}, timeout=10)
    assert 400 <= response.status_code < 500 and message in response.json()["error"]
    assert requests.get(server.url + "/api/sessions", timeout=10).json()["sessions"] == before


def test_unknown_ids_answer_404(server):
    for method, path in [
        ("GET", "/api/research/run_nope"),
        ("GET", "/api/research/status/run_nope"),
        ("GET", "/api/research/stream/run_nope"),
        ("POST", "/api/research/cancel/run_nope"),
        ("DELETE", "/api/research/run_nope"),
    ]:
        response = requests.request(method, server.url + path, timeout=10)
        assert response.status_code == 404 and response.json()["error"], path


# ---------------------------------------------------------------- the chat projections
def test_chat_projection_order_and_saved_reply(server, site):
    stream = post_chat(server.url, "Where is Ithaca?", use_research=True)
    try:
        frames = stream.events()
    finally:
        stream.close()
    types = types_of(frames)
    first_source = types.index("research_sources")
    assert set(types[:first_source]) == {"research_progress"}
    assert types[first_source : first_source + 2] == ["research_sources", "research_findings"]
    done = types.index("research_done")
    assert set(types[first_source + 2 : done]) == {"delta"}
    assert types[done:] == ["research_done", "message_saved", "chat_terminal", "[DONE]"]
    progress = [f["data"]["data"] for f in frames if types_of([f]) == ["research_progress"]]
    assert progress[0] == {"phase": "probing"} and any(p["phase"] == "reading" for p in progress)
    sources = frames[first_source]["data"]["data"]
    assert sorted(s["url"] for s in sources) == [site.url + "/p1", site.url + "/p2"]
    job = frames[done]["data"]["data"]
    assert job == {"job_id": stream.headers["X-Odysseus-Run-Id"], "session_id": stream.headers["X-Odysseus-Session-Id"]}
    report = "".join(f["data"]["delta"] for f in frames if types_of([f]) == ["delta"])
    saved = requests.get(f"{server.url}/api/sessions/{job['session_id']}/messages", timeout=10).json()["messages"][-1]
    assert saved["content"] == report and saved["metadata"]["research"]["job_id"] == job["job_id"]
    assert saved["metadata"]["research"]["sources"] == sources
    assert saved["metadata"]["research"]["findings"] == frames[first_source + 1]["data"]["data"]
    listed = requests.get(server.url + "/api/research", timeout=10).json()["jobs"]
    assert listed[0]["job_id"] == job["job_id"] and listed[0]["status"] == "done"


def test_agent_projection_names_the_same_events(server):
    stream = open_stream(
        "POST", server.url + "/api/agent/chat/stream", json={"message": "Where is Ithaca?", "use_research": True}
    )
    try:
        frames = stream.events()
    finally:
        stream.close()
    names = [f["event"] for f in frames]
    assert names[:2] == ["run_started", "start"]
    first_source = names.index("research_sources")
    assert set(names[2:first_source]) == {"research_progress"}
    done = names.index("research_done")
    assert names[first_source : first_source + 2] == ["research_sources", "research_findings"]
    assert set(names[first_source + 2 : done]) == {"chunk"}
    assert names[done:] == ["research_done", "done", "close"]
    assert frames[2]["data"] == {"data": {"phase": "probing"}}
    # attach by run id replays the same named events
    attached = open_stream(
        "GET", f"{server.url}/api/agent/chat/stream/attach?run_id={stream.headers['X-Odysseus-Run-Id']}"
    )
    try:
        assert [f["event"] for f in attached.events()] == names
    finally:
        attached.close()


def test_stop_on_the_chat_run_cancels_the_job(server, site):
    site.delays["/p2"] = 30
    stream = post_chat(server.url, "Where is Ithaca?", use_research=True)
    run_id, session_id = stream.headers["X-Odysseus-Run-Id"], stream.headers["X-Odysseus-Session-Id"]
    seen = []
    try:
        for frame in stream.frames():
            seen.append(frame)
            data = frame.get("data")
            if (
                isinstance(data, dict)
                and data.get("type") == "research_progress"
                and data["data"].get("phase") == "reading"
            ):
                stopped = requests.post(
                    f"{server.url}/api/chat/stop/{session_id}", headers={"X-Odysseus-Run-Id": run_id}, timeout=20
                )
                assert stopped.json() == {"stopped": True}
                break
        rest = [f for f in stream.frames() if "comment" not in f]
    finally:
        stream.close()
    types = types_of(rest)
    assert types[-2:] == ["message_saved", "chat_terminal"] and rest[-1]["data"]["data"]["status"] == "stopped"
    assert "Partial report: the job was cancelled" in "".join(
        f["data"]["delta"] for f in rest if types_of([f]) == ["delta"]
    )
    status = requests.get(f"{server.url}/api/research/status/{run_id}", timeout=10).json()
    assert status["status"] == "cancelled" and status["partial"] is True


def test_use_research_is_validated(server):
    response = requests.post(
        server.url + "/api/chat_stream", json={"message": "x", "use_research": "maybe"}, timeout=10
    )
    assert response.status_code == 400 and "use_research" in response.json()["error"]
    response = requests.post(
        server.url + "/api/chat_stream", json={"message": "x", "use_research": True, "mode": "compare"}, timeout=10
    )
    assert response.status_code == 400
    response = requests.post(
        server.url + "/api/chat_stream", json={"message": "x", "use_research": True, "max_rounds": 99}, timeout=10
    )
    assert response.status_code == 400 and "max_rounds" in response.json()["error"]
