"""Cursor and wire rules of issue 12 over a real gunicorn server: what SSE clients rely on."""

from __future__ import annotations

import socket
import time

import requests
from sseclient import open_stream, post_chat, text_of
from waiting import wait_for

from odysseus.llm.demo import demo_reply


def _read_deltas(stream, n):
    """Frames (no comments) until ``n`` deltas were read."""
    frames, seen = [], 0
    for frame in stream.frames():
        if "comment" in frame:
            continue
        frames.append(frame)
        if isinstance(frame["data"], dict) and "delta" in frame["data"]:
            seen += 1
            if seen >= n:
                break
    return frames


def _status(server, session_id):
    return requests.get(f"{server.url}/api/chat/stream_status/{session_id}", timeout=5).json()


def _done(server, session_id):
    wait_for(lambda: _status(server, session_id)["status"] == "done", 30, what="run done")


def test_last_event_id_wins_over_after_on_resume_and_attach(live):
    stream = post_chat(live.url, "header wins over the query " * 3)
    session_id, run_id = stream.headers["X-Odysseus-Session-Id"], stream.headers["X-Odysseus-Run-Id"]
    before = _read_deltas(stream, 6)
    stream.close()
    cursor = before[-1]["id"]
    resumed = open_stream(
        "GET", f"{live.url}/api/chat/resume/{session_id}?after=0", headers={"Last-Event-ID": str(cursor)}
    ).events()
    assert all(f["id"] > cursor for f in resumed)
    assert text_of(before) + text_of(resumed) == demo_reply("header wins over the query " * 3)
    attached = open_stream(
        "GET",
        f"{live.url}/api/agent/chat/stream/attach?run_id={run_id}&after=0",
        headers={"Last-Event-ID": str(cursor)},
    ).events()
    assert attached[0]["id"] > cursor and "run_started" not in [f["event"] for f in attached]
    # without the header the query still counts; an empty header is no cursor
    by_query = open_stream(
        "GET", f"{live.url}/api/chat/resume/{session_id}?after={cursor}", headers={"Last-Event-ID": ""}
    ).events()
    assert [f["id"] for f in by_query] == [f["id"] for f in resumed]


def test_ids_increase_across_the_runs_of_a_session(live):
    first = post_chat(live.url, "first run").events()
    session_id = None
    ids_first = [f["id"] for f in first]
    status = requests.get(f"{live.url}/api/sessions", timeout=5).json()["sessions"]
    session_id = next(s["id"] for s in status if s["title"].startswith("first run"))
    _done(live, session_id)
    second = post_chat(live.url, "second run", session_id=session_id).events()
    ids_second = [f["id"] for f in second]
    assert min(ids_second) > max(ids_first)
    assert ids_first == sorted(ids_first) and ids_second == sorted(ids_second)
    _done(live, session_id)
    # agent projection: run_started and start have ids of their own, following the chat runs
    agent = open_stream(
        "POST", f"{live.url}/api/agent/chat/stream", json={"message": "third run", "session_id": session_id}
    ).events()
    names = [f["event"] for f in agent]
    assert names[:2] == ["run_started", "start"]
    assert agent[1]["id"] == agent[0]["id"] + 1
    assert agent[0]["id"] > max(ids_second)
    assert [f["id"] for f in agent] == sorted(set(f["id"] for f in agent))
    _done(live, session_id)
    # a cursor kept from the previous run means "from the start of this run"
    replay = open_stream(
        "GET", f"{live.url}/api/chat/resume/{session_id}", headers={"Last-Event-ID": str(max(ids_second))}
    ).events()
    assert text_of(replay) == demo_reply("third run")


def test_repeated_post_with_last_event_id_attaches_after_the_cursor(live):
    body = {"message": "retry me with a cursor " * 2, "client_message_id": "cm-cursor-1"}
    stream = post_chat(live.url, **body)
    session_id = stream.headers["X-Odysseus-Session-Id"]
    before = _read_deltas(stream, 5)
    stream.close()
    cursor = before[-1]["id"]
    retry = open_stream(
        "POST",
        f"{live.url}/api/chat_stream",
        json=dict(body, session_id=session_id),
        headers={"Last-Event-ID": str(cursor)},
    ).events()
    assert all(f["id"] > cursor for f in retry)
    assert text_of(before) + text_of(retry) == demo_reply(body["message"])
    # the agent projection: the same retry rule
    abody = {"message": "agent retry with a cursor", "client_message_id": "cm-cursor-2", "session_id": session_id}
    _done(live, session_id)
    astream = open_stream("POST", f"{live.url}/api/agent/chat/stream", json=abody)
    got = []
    for frame in astream.frames():
        if "comment" not in frame:
            got.append(frame)
        if sum(f["event"] == "chunk" for f in got) >= 3:
            break
    astream.close()
    rest = open_stream(
        "POST", f"{live.url}/api/agent/chat/stream", json=abody, headers={"Last-Event-ID": str(got[-1]["id"])}
    ).events()
    assert [f["event"] for f in rest][-1] == "close" and "run_started" not in [f["event"] for f in rest]
    text = "".join(f["data"]["content"] for f in got + rest if f["event"] == "chunk")
    assert text == demo_reply(abody["message"])


def test_reconnect_to_an_ended_run_gets_204_at_or_past_its_last_frame(live):
    stream = post_chat(live.url, "end then reconnect")
    session_id, run_id = stream.headers["X-Odysseus-Session-Id"], stream.headers["X-Odysseus-Run-Id"]
    frames = stream.events()
    assert frames[-1]["data"] == "[DONE]"
    done_id = frames[-1]["id"]
    _done(live, session_id)
    for cursor in (done_id, done_id + 5):
        response = requests.get(
            f"{live.url}/api/chat/resume/{session_id}", headers={"Last-Event-ID": str(cursor)}, timeout=10
        )
        assert response.status_code == 204 and response.content == b""
    # one before [DONE]: that frame is still owed
    tail = open_stream(
        "GET", f"{live.url}/api/chat/resume/{session_id}", headers={"Last-Event-ID": str(done_id - 1)}
    ).events()
    assert [f["data"] for f in tail] == ["[DONE]"]
    # the agent projection's last frame is close (after [DONE]'s done): done's id is not the end there
    agent = open_stream("GET", f"{live.url}/api/agent/chat/stream/attach?run_id={run_id}").events()
    assert agent[-1]["event"] == "close" and agent[-1]["id"] == done_id + 1
    assert [
        f["event"]
        for f in open_stream(
            "GET", f"{live.url}/api/agent/chat/stream/attach?run_id={run_id}", headers={"Last-Event-ID": str(done_id)}
        ).events()
    ] == ["close"]
    ended = requests.get(
        f"{live.url}/api/agent/chat/stream/attach?run_id={run_id}",
        headers={"Last-Event-ID": str(done_id + 1)},
        timeout=10,
    )
    assert ended.status_code == 204


def _raw_get(server, path, headers=""):
    """The first bytes of a raw HTTP response (to see fields a parser hides)."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{headers}Connection: close\r\n\r\n".encode())
        data = b""
        while b"connected" not in data and len(data) < 65536:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    return data


def test_first_frame_of_every_stream_carries_retry(live):
    stream = post_chat(live.url, "retry field")
    session_id, run_id = stream.headers["X-Odysseus-Session-Id"], stream.headers["X-Odysseus-Run-Id"]
    stream.events()
    for path in (
        f"/api/chat/resume/{session_id}",
        f"/api/agent/chat/stream/attach?run_id={run_id}",
        "/api/agent/chat/stream/attach?run_id=run_nobody",
    ):
        raw = _raw_get(live, path)
        body = raw.split(b"\r\n\r\n", 1)[1]
        assert b"retry: 3000\n: connected\n\n" in body, raw[:400]


def test_heartbeats_stay_per_interval_when_the_cursor_is_ahead_of_the_log(live):
    # live: 20 ms per token and a heartbeat after 0.5 s of silence
    message = "ahead of the log " * 12
    stream = post_chat(live.url, message)
    session_id = stream.headers["X-Odysseus-Session-Id"]
    _read_deltas(stream, 1)
    ahead = open_stream("GET", f"{live.url}/api/chat/resume/{session_id}", headers={"Last-Event-ID": "100000"})
    started, beats, events = time.monotonic(), 0, 0
    for frame in ahead.frames():
        if "comment" in frame:
            beats += frame["comment"].startswith("heartbeat")
        else:
            events += 1
        if time.monotonic() - started > 2.5:
            break
    ahead.close()
    stream.close()
    elapsed = time.monotonic() - started
    assert events == 0
    # the run appended dozens of events meanwhile; heartbeats still come only per 0.5 s of silence
    assert 1 <= beats <= elapsed / 0.5 + 1, (beats, elapsed)
