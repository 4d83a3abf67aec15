"""Deleting a session over a real server: its run stops, later sends are 404, a racing send never writes
into it, and its jobs, durable run events and results are gone (issue 12, fault 4)."""

from __future__ import annotations

import os
import sqlite3
import threading

import requests
from sseclient import open_stream, post_chat
from waiting import wait_for


def _db(server) -> sqlite3.Connection:
    return sqlite3.connect(os.path.join(server.data_dir, "odysseus.db"), timeout=10)


def _count(server, sql, args) -> int:
    with _db(server) as conn:
        return conn.execute(sql, args).fetchone()[0]


def test_delete_stops_the_run_refuses_later_sends_and_removes_events(server_factory):
    server = server_factory({"ODYSSEUS_DEMO_TOKEN_DELAY": "0.05", "ODYSSEUS_EVENT_FLUSH_INTERVAL": "0.05"})
    first = post_chat(server.url, "an earlier reply").events()
    session_id = requests.get(server.url + "/api/sessions", timeout=5).json()["sessions"][0]["id"]
    assert first[-1]["data"] == "[DONE]"
    stream = post_chat(server.url, "a long reply to be cut by a delete " * 6, session_id=session_id)
    run_id = stream.headers["X-Odysseus-Run-Id"]
    frames = []
    for frame in stream.frames():
        if "comment" not in frame:
            frames.append(frame)
        if sum(isinstance(f["data"], dict) and "delta" in f["data"] for f in frames) >= 3:
            break
    wait_for(
        lambda: _count(server, "select count(*) from run_events where run_id = ?", [run_id]) > 0,
        10,
        what="durable events written",
    )
    assert requests.delete(f"{server.url}/api/sessions/{session_id}", timeout=30).json() == {"deleted": True}
    rest = list(stream.events())
    terminal = [
        f["data"]["data"] for f in rest if isinstance(f["data"], dict) and f["data"].get("type") == "chat_terminal"
    ]
    assert terminal and terminal[0]["stop_reason"] == "session_deleted"
    # its partial was saved before the delete removed everything (checked below): no orphan rows remain
    # later starts are 404 and store nothing; attach answers run_missing
    again = requests.post(server.url + "/api/chat_stream", json={"message": "hi", "session_id": session_id}, timeout=10)
    assert again.status_code == 404 and "error" in again.json()
    attach = open_stream("GET", f"{server.url}/api/agent/chat/stream/attach?run_id={run_id}").events()
    assert [f["event"] for f in attach] == ["run_missing", "close"]
    for table in ("messages", "runs", "jobs"):
        assert _count(server, f"select count(*) from {table} where session_id = ?", [session_id]) == 0
    assert _count(server, "select count(*) from run_events where run_id = ?", [run_id]) == 0


def test_background_job_results_are_gone_after_the_delete(server_factory):
    server = server_factory({"ODYSSEUS_DEMO_TOKEN_DELAY": "0.001"})
    job = requests.post(server.url + "/api/chat/background", json={"message": "a background reply"}, timeout=10).json()
    wait_for(
        lambda: requests.get(f"{server.url}/api/chat/background/{job['job_id']}", timeout=5).json()["status"] == "done",
        30,
        what="job done",
    )
    assert requests.delete(f"{server.url}/api/sessions/{job['session_id']}", timeout=30).ok
    gone = requests.get(f"{server.url}/api/chat/background/{job['job_id']}", timeout=5)
    assert gone.status_code == 404
    listed = requests.get(server.url + "/api/chat/background", timeout=5).json()["jobs"]
    assert job["job_id"] not in [j["job_id"] for j in listed]


def test_sends_racing_a_delete_never_write_into_the_deleted_session(server_factory):
    server = server_factory({"ODYSSEUS_DEMO_TOKEN_DELAY": "0.01"})
    for attempt in range(4):  # bounded: a few races, each with several senders
        session_id = requests.post(server.url + "/api/sessions", json={"title": f"race {attempt}"}, timeout=5).json()[
            "id"
        ]
        barrier = threading.Barrier(5)
        statuses = []

        def send(i: int) -> None:
            barrier.wait(10)
            response = requests.post(
                server.url + "/api/chat_stream",
                stream=True,
                timeout=30,
                json={"message": f"racer {i}", "session_id": session_id},
            )
            statuses.append(response.status_code)
            response.close()

        threads = [threading.Thread(target=send, args=(i,)) for i in range(4)]
        for thread in threads:
            thread.start()
        barrier.wait(10)
        deleted = requests.delete(f"{server.url}/api/sessions/{session_id}", timeout=30)
        for thread in threads:
            thread.join(30)
        assert deleted.status_code == 200
        assert set(statuses) <= {200, 404}, statuses

        def settled() -> bool:
            return (
                _count(server, "select count(*) from runs where session_id = ? and status = 'running'", [session_id])
                == 0
            )

        wait_for(settled, 20, what="racing runs settled")
        for table in ("messages", "runs"):
            assert _count(server, f"select count(*) from {table} where session_id = ?", [session_id]) == 0, table
        assert _count(server, "select count(*) from sessions where id = ?", [session_id]) == 0


def test_streams_per_user_are_capped_with_a_json_429(server_factory):
    server = server_factory({"ODYSSEUS_DEMO_TOKEN_DELAY": "0.2", "ODYSSEUS_MAX_STREAMS_PER_USER": "2"})
    open_ = [post_chat(server.url, "hold this stream open " * 4) for _ in range(2)]
    assert all(s.status_code == 200 for s in open_)
    third = requests.post(server.url + "/api/chat_stream", json={"message": "one too many"}, timeout=10)
    assert third.status_code == 429 and "stream" in third.json()["error"]
    session_id = open_[0].headers["X-Odysseus-Session-Id"]
    resume = requests.get(f"{server.url}/api/chat/resume/{session_id}", timeout=10)
    assert resume.status_code == 429
    # nothing was started by the refused send
    sessions = requests.get(server.url + "/api/sessions", timeout=5).json()["sessions"]
    assert not any(s["title"].startswith("one too many") for s in sessions)
    open_[0].close()
    wait_for(
        lambda: requests.get(f"{server.url}/api/chat/resume/{session_id}", stream=True, timeout=10).status_code == 200,
        10,
        what="a slot freed",
    )
