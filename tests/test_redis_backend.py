"""RUN_BACKEND=redis with several gunicorn workers: any worker follows, stops and recovers any run.

Each connection is pinned to one worker (a keep-alive ``requests.Session`` whose ``/api/health``
answered with the pid we want), so "from another worker" is a fact of the test, not luck.
The model is a real local HTTP server speaking OpenAI's protocol that records when the client
went away; Redis is a real redis-server on a loopback port.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Iterable, List, Tuple

import pytest
import requests
from fakeproviders import FakeProvider, Reply, openai_text
from sseclient import Stream, text_of, types_of
from waiting import wait_for

TOKENS = [f"t{i} " for i in range(120)]


@pytest.fixture
def model():
    """A slow OpenAI-compatible model: 120 tokens, 50 ms apart (6 s in all)."""
    server = FakeProvider(default=Reply(chunks=openai_text(*TOKENS), delay=0.05))
    yield server
    server.close()


@pytest.fixture(params=[2, 4], ids=["2-workers", "4-workers"])
def cluster(request, redis_server, model, tmp_path):
    """A gunicorn server with ``param`` workers on the Redis backend, the slow model as openai/m."""
    from liveserver import LiveServer

    directory = str(tmp_path / "srv")
    server = LiveServer(
        directory,
        {
            **redis_server.env(directory, workers=request.param),
            "ODYSSEUS_AUTH": "none",
            "OPENAI_BASE_URL": model.url + "/v1",
            "OPENAI_API_KEY": "sk-x",
            "OPENAI_MODEL": "m",
            "ODYSSEUS_HEARTBEAT_INTERVAL": "0.5",
            "ODYSSEUS_RUN_LEASE_SECONDS": "2",
            "ODYSSEUS_EVICT_GRACE": "5",
        },
    ).start(timeout=40)
    wait_for(lambda: len(server.worker_pids()) == request.param, 20, what="all workers up")
    yield server
    server.stop()


def pinned(url: str, avoid: Iterable[int] = (), attempts: int = 400) -> Tuple[requests.Session, int]:
    """A keep-alive connection to a worker whose pid is not in ``avoid``."""
    avoid = set(avoid)
    for _ in range(attempts):
        session = requests.Session()
        pid = session.get(url + "/api/health", timeout=10).json()["pid"]
        if pid not in avoid:
            return session, pid
        session.close()
    raise AssertionError(f"no worker other than {avoid} answered")


def stream(session: requests.Session, method: str, url: str, **kwargs) -> Stream:
    """An SSE request on the pinned connection."""
    return Stream(session.request(method, url, stream=True, timeout=30, **kwargs))


def read_deltas(s: Stream, n: int) -> List[dict]:
    """Frames (no comments) up to and including the ``n``-th delta."""
    frames, seen = [], 0
    for frame in s.frames():
        if "comment" in frame:
            continue
        frames.append(frame)
        if isinstance(frame["data"], dict) and "delta" in frame["data"]:
            seen += 1
            if seen >= n:
                break
    return frames


def consecutive(frames: List[dict]) -> List[int]:
    """The frames' ids, asserting each is one more than the previous (no gap, no duplicate)."""
    ids = [f["id"] for f in frames if f.get("id") is not None]
    assert ids == list(range(ids[0], ids[0] + len(ids))), ids
    return ids


def messages(url: str, session_id: str) -> List[dict]:
    return requests.get(f"{url}/api/sessions/{session_id}/messages", timeout=10).json()["messages"]


def start_run(url: str, message: str = "hello", **fields):
    """Start a chat turn on a pinned worker; (session, pid, stream, frames so far)."""
    session, pid = pinned(url)
    s = stream(session, "POST", url + "/api/chat_stream", json={"message": message, "model": "openai/m", **fields})
    assert s.status_code == 200, s.response.text
    return session, pid, s, read_deltas(s, 5)


def test_attach_resume_status_and_stop_from_other_workers(cluster, model):
    url = cluster.url
    _, owner_pid, first, before = start_run(url, client_message_id="cm-x")
    session_id, run_id = first.headers["X-Odysseus-Session-Id"], first.headers["X-Odysseus-Run-Id"]
    record = model.wait_for_posts(1)[-1]
    cursor = before[-1]["id"]

    conn, pid = pinned(url, [owner_pid])
    resumed = stream(conn, "GET", f"{url}/api/chat/resume/{session_id}", headers={"Last-Event-ID": str(cursor)})
    assert resumed.headers["X-Odysseus-Run-Id"] == run_id
    resumed_part = read_deltas(resumed, 3)
    conn2, _ = pinned(url, [owner_pid])
    attached = stream(conn2, "GET", f"{url}/api/agent/chat/stream/attach", params={"run_id": run_id})
    conn3, _ = pinned(url, [owner_pid])
    retry = stream(
        conn3,
        "POST",
        url + "/api/chat_stream",
        json={"message": "hello", "model": "openai/m", "client_message_id": "cm-x", "session": session_id},
    )
    assert retry.headers["X-Odysseus-Run-Id"] == run_id  # attached, not generated twice

    conn4, _ = pinned(url, [owner_pid])
    status = conn4.get(f"{url}/api/chat/stream_status/{session_id}", timeout=10).json()
    assert status["status"] == "running" and status["run_id"] == run_id and status["resumable"] is True
    listed = conn4.get(f"{url}/api/agent/chat/runs", timeout=10).json()["runs"]
    assert [(r["run_id"], r["status"]) for r in listed] == [(run_id, "running")]

    conn5, _ = pinned(url, [owner_pid])
    wrong = conn5.post(f"{url}/api/chat/stop/{session_id}", headers={"X-Odysseus-Run-Id": "run_nope"}, timeout=10)
    assert wrong.json() == {"stopped": False}
    stopped_at = time.monotonic()
    answer = conn5.post(f"{url}/api/chat/stop/{session_id}", headers={"X-Odysseus-Run-Id": run_id}, timeout=30)
    assert answer.json() == {"stopped": True}
    assert record.finished.wait(5)
    assert record.disconnected_at is not None and record.disconnected_at - stopped_at < 1.0

    full = before + first.events()
    consecutive(full)
    assert types_of(full)[-2:] == ["message_saved", "chat_terminal"]
    assert full[-1]["data"]["data"]["status"] == "stopped"
    rest = resumed_part + resumed.events()
    assert rest == [f for f in full if f["id"] > cursor]  # resumed elsewhere: no gap, no duplicate
    retried = retry.events()
    assert retried == [f for f in full if f["id"] is not None]
    agent_frames = attached.events()
    assert [f["event"] for f in agent_frames[-2:]] == ["cancelled", "close"]  # a stopped run says so, then closes
    ids = [f["id"] for f in agent_frames if f["id"] is not None]
    assert ids == sorted(ids) and ids[-1] == full[-1]["id"] + 2  # after the terminal: cancelled, then close
    assert len(ids) == len(set(ids))  # run_started and start have their own ids: nothing is sent twice
    assert text_of(full) == "".join(TOKENS)[: len(text_of(full))]
    saved = [m for m in messages(url, session_id) if m["role"] == "assistant"]
    assert len(saved) == 1 and saved[0]["metadata"]["stopped"] is True and saved[0]["content"] == text_of(full)
    assert conn5.post(
        f"{url}/api/chat/stop/{session_id}", headers={"X-Odysseus-Run-Id": run_id}, timeout=10
    ).json() == {"stopped": False}
    backends = [conn.get(url + "/api/health", timeout=10).json()["run_backend"] for conn in (conn, conn2, conn3)]
    assert sum(b["stream_readers"] for b in backends) >= 3  # the other workers read the Redis Stream...
    assert sum(b["stream_handovers"] for b in backends) == 0  # ...and never needed SQLite for it


def test_cancel_and_replace_from_other_workers(cluster, model):
    url = cluster.url
    _, owner_pid, first, _ = start_run(url)
    session_id, run_id = first.headers["X-Odysseus-Session-Id"], first.headers["X-Odysseus-Run-Id"]
    record = model.wait_for_posts(1)[-1]
    conn, _ = pinned(url, [owner_pid])
    cancelled_at = time.monotonic()
    view = conn.post(f"{url}/api/agent/chat/runs/{run_id}/cancel", timeout=30).json()
    assert view["cancel_requested"] is True and view["status"] == "stopped" and view["stop_reason"] == "cancelled"
    assert record.finished.wait(5) and record.disconnected_at - cancelled_at < 1.0
    assert first.events()[-1]["data"]["data"]["stop_reason"] == "cancelled"
    again = conn.post(f"{url}/api/agent/chat/runs/{run_id}/cancel", timeout=10).json()
    assert again["cancel_requested"] is False and again["status"] == "stopped"

    # a second message on another worker replaces the running run on the first
    _, owner_pid, second, _ = start_run(url, "first question", session=session_id)
    conn2, _ = pinned(url, [owner_pid])
    model.script(Reply(chunks=openai_text("short answer")))
    third = stream(
        conn2,
        "POST",
        url + "/api/chat_stream",
        json={"message": "second question", "model": "openai/m", "session": session_id},
    )
    assert second.events()[-1]["data"]["data"]["stop_reason"] == "replaced"
    assert text_of(third.events()) == "short answer"
    roles = [(m["role"], m["metadata"].get("stop_reason")) for m in messages(url, session_id)]
    assert roles == [
        ("user", None),
        ("assistant", "cancelled"),
        ("user", None),
        ("assistant", "replaced"),
        ("user", None),
        ("assistant", None),
    ]


def test_killed_worker_runs_are_interrupted_once_and_resumable(cluster, model):
    url = cluster.url
    _, owner_pid, first, before = start_run(url, "crash me")
    session_id = first.headers["X-Odysseus-Session-Id"]
    conn, _ = pinned(url, [owner_pid])
    follower = stream(conn, "GET", f"{url}/api/chat/resume/{session_id}")  # follows via Redis on a survivor
    seen = read_deltas(follower, 10)
    os.kill(owner_pid, signal.SIGKILL)
    first.close()
    rest = follower.events()  # must end: the survivor marks the run interrupted and appends its tail
    full = seen + rest
    tail_at = types_of(full).index("message_saved")
    consecutive(full[:tail_at])
    consecutive(full[tail_at:])  # the recovery tail is numbered past any id the dead worker could have sent
    assert full[tail_at]["id"] > full[tail_at - 1]["id"]
    kinds = types_of(full)
    assert kinds[-2:] == ["chat_terminal", "error"] and kinds.count("chat_terminal") == 1
    assert full[-2]["data"]["data"]["status"] == "interrupted"
    conn2, _ = pinned(url, [owner_pid])
    assert conn2.get(f"{url}/api/chat/stream_status/{session_id}", timeout=10).json()["status"] == "interrupted"
    saved = [m for m in messages(url, session_id) if m["role"] == "assistant"]
    assert len(saved) == 1 and saved[0]["metadata"]["interrupted"] is True
    assert saved[0]["content"] == text_of(full)  # the partial reply is exactly what readers saw
    replay = stream(conn2, "GET", f"{url}/api/chat/resume/{session_id}", headers={"Last-Event-ID": "3"}).events()
    assert replay == [f for f in full if f["id"] > 3]
    assert [f["id"] for f in before] == [f["id"] for f in full[: len(before)]]
    time.sleep(2.5)  # every survivor's janitor has run its recovery again: still one reply
    assert len([m for m in messages(url, session_id) if m["role"] == "assistant"]) == 1


def test_redis_restart_mid_run_never_hangs(redis_server, model, tmp_path):
    from liveserver import LiveServer
    from redisserver import RedisServer

    own = RedisServer(str(tmp_path / "redis")).start()
    directory = str(tmp_path / "srv")
    server = LiveServer(
        directory,
        {
            **own.env(directory, workers=2),
            "ODYSSEUS_AUTH": "none",
            "OPENAI_BASE_URL": model.url + "/v1",
            "OPENAI_API_KEY": "sk-x",
            "OPENAI_MODEL": "m",
            "ODYSSEUS_HEARTBEAT_INTERVAL": "0.5",
            "ODYSSEUS_RUN_LEASE_SECONDS": "2",
        },
    ).start(timeout=40)
    try:
        wait_for(lambda: len(server.worker_pids()) == 2, 20, what="workers up")
        _, owner_pid, first, before = start_run(server.url, "through a redis crash")
        session_id = first.headers["X-Odysseus-Session-Id"]
        conn, _ = pinned(server.url, [owner_pid])
        follower = stream(conn, "GET", f"{server.url}/api/chat/resume/{session_id}")
        seen = read_deltas(follower, 8)
        own.restart(down_for=0.5)
        full = before + first.events()
        other = seen + follower.events()
        for frames in (full, other):
            consecutive(frames)
            assert types_of(frames)[-1] == "[DONE]" and text_of(frames) == "".join(TOKENS)
        assert other == [f for f in full if f["id"] is not None]
        # after the restart, new turns work again on every worker
        model.script(Reply(chunks=openai_text("after")), Reply(chunks=openai_text("after")))
        for avoid in ([], [owner_pid]):
            again, _ = pinned(server.url, avoid)
            reply = stream(again, "POST", server.url + "/api/chat_stream", json={"message": "x", "model": "openai/m"})
            assert text_of(reply.events()) == "after"
    finally:
        server.stop()
        own.stop()


def test_redis_down_at_start_refuses_to_boot(tmp_path):
    from liveserver import LiveServer, free_port

    server = LiveServer(
        str(tmp_path / "srv"),
        {
            "ODYSSEUS_RUN_BACKEND": "redis",
            "ODYSSEUS_AUTH": "none",
            "ODYSSEUS_REDIS_URL": f"redis://127.0.0.1:{free_port()}/0",
        },
    )
    with pytest.raises(RuntimeError) as failed:
        server.start(timeout=20)
    assert "cannot reach Redis" in str(failed.value)


def test_four_workers_boot_at_once_on_an_empty_data_dir(redis_server, tmp_path):
    from liveserver import LiveServer

    for attempt in range(3):
        directory = str(tmp_path / f"fresh{attempt}")
        server = LiveServer(directory, {**redis_server.env(directory, workers=4), "ODYSSEUS_AUTH": "none"})
        try:
            server.start(timeout=40)
            wait_for(lambda: len(server.worker_pids()) == 4, 30, what="four workers")
            pids = set()
            deadline = time.monotonic() + 30
            while len(pids) < 4 and time.monotonic() < deadline:
                with requests.Session() as s:
                    pids.add(s.get(server.url + "/api/health", timeout=10).json()["pid"])
            assert pids == set(server.worker_pids())  # every worker booted and serves
            logs = server.logs()
            assert "already exists" not in logs and "database is locked" not in logs and "Traceback" not in logs
        finally:
            server.stop()


def test_default_workers_follow_the_backend(monkeypatch):
    from odysseus.instance import default_workers, worker_refusal

    monkeypatch.delenv("ODYSSEUS_WORKERS", raising=False)
    assert default_workers({"RUN_BACKEND": "memory"}) == 1
    assert default_workers({"RUN_BACKEND": "redis"}) == (os.cpu_count() or 1)
    monkeypatch.setenv("ODYSSEUS_WORKERS", "3")
    assert default_workers({"RUN_BACKEND": "memory"}) == 3
    assert worker_refusal({"RUN_BACKEND": "memory"}, 3) is not None
    assert worker_refusal({"RUN_BACKEND": "redis"}, 3) is None


def test_recovery_asks_redis_for_leases_only_on_the_calling_thread():
    """The durable writer checks ownership on its native thread; Redis must not be asked from there.

    A connection a native thread used keeps a socket bound to that thread's hub, and the greenlet
    the pool gave it to next failed ("Cannot switch to a different thread"): a turn answered 503
    now and then with two workers. Leases are looked up before the writer's call; it only reads a set.
    """
    import threading

    from odysseus.config import DEFAULTS
    from odysseus.runs.redis_backend import RedisBackend

    backend = RedisBackend(dict(DEFAULTS, REDIS_URL="redis://127.0.0.1:9/0"), "host:1")  # never connected
    asked = []

    def holder(run_id):
        asked.append((run_id, threading.get_ident()))
        return "host:2" if run_id == "held" else None

    backend.leases.holder = holder
    running = [
        {"run_id": run_id, "lease_until": time.time() + 60, "worker": "host:2"} for run_id in ("held", "free", "local")
    ]
    owned = {}

    class Durable:
        def recover(self, is_owned, build_tail, timeout=None):
            worker = threading.Thread(
                target=lambda: owned.update({r["run_id"]: is_owned(r["run_id"]) for r in running})
            )
            worker.start()
            worker.join(5)
            return []

    class Engine:
        durable = Durable()

        class store:
            class runs:
                @staticmethod
                def running():
                    return running

    assert backend.recover(Engine(), lambda run_id: run_id == "local", lambda *a: []) == []
    assert owned == {"held": True, "free": False, "local": True}
    assert sorted(run_id for run_id, _ in asked) == ["free", "held"]
    assert {thread for _, thread in asked} == {threading.get_ident()}
