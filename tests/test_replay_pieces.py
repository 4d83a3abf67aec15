"""Replays in pieces (issue 22): a resume of a 100,000-event run sends its first event at once,
from the memory log and, after a restart, from the durable log; and every byte still arrives."""

from __future__ import annotations

import socket
import time

import pytest
import requests
from fakeproviders import FakeProvider, Reply, openai_text
from liveserver import LiveServer
from sseclient import open_stream, text_of
from waiting import wait_for

TOKENS = 100_000
#: generous for a loaded machine; the real number is in the bench (a few milliseconds)
FIRST_EVENT_BOUND = 0.5


def _first_event_seconds(server: LiveServer, session_id: str) -> float:
    """Seconds from sending ``GET /api/chat/resume`` to receiving the first ``id:`` line; reads to the end."""
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=60)
    try:
        started = time.monotonic()
        sock.sendall(
            f"GET /api/chat/resume/{session_id} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode()
        )
        seen = b""
        first = None
        while True:
            data = sock.recv(65536)
            if not data:
                break
            if first is None:  # then read on to the end, discarding
                seen += data
                if b"\nid: " in seen:
                    first = time.monotonic() - started
        assert first is not None, seen[:500]
        return first
    finally:
        sock.close()


@pytest.fixture
def long_run(tmp_path):
    texts = [f"t{i} " for i in range(TOKENS)]
    fake = FakeProvider(default=Reply(chunks=["".join(openai_text(*texts))]))
    env = {
        "OPENAI_BASE_URL": fake.url + "/v1",
        "OPENAI_API_KEY": "sk-x",
        "OPENAI_MODEL": "m",
        "ODYSSEUS_RUN_MAX_EVENTS": str(TOKENS + 1000),
        "ODYSSEUS_RUN_MAX_BYTES": str(64 * 1024 * 1024),
        "ODYSSEUS_EVICT_GRACE": "600",
    }
    server = LiveServer(str(tmp_path), env).start()
    try:
        stream = open_stream("POST", server.url + "/api/chat_stream", json={"message": "long"}, timeout=120)
        session_id = stream.headers["X-Odysseus-Session-Id"]
        assert text_of(stream.events()) == "".join(texts)
        wait_for(
            lambda: (
                requests.get(f"{server.url}/api/chat/stream_status/{session_id}", timeout=5).json()["status"] == "done"
            ),
            60,
            what="run done",
        )
        yield server, session_id, "".join(texts), tmp_path, env
    finally:
        server.stop()
        fake.close()


def test_a_100k_event_resume_starts_at_once_from_memory_and_from_the_durable_log(long_run):
    server, session_id, expected, tmp_path, env = long_run
    memory = min(_first_event_seconds(server, session_id) for _ in range(3))
    assert memory < FIRST_EVENT_BOUND
    replay = open_stream("GET", f"{server.url}/api/chat/resume/{session_id}", timeout=120).events()
    assert text_of(replay) == expected  # in pieces, byte for byte
    ids = [int(f["id"]) for f in replay if f.get("id")]
    assert ids == sorted(ids) and len(ids) == len(set(ids))

    server.stop()  # the memory log is gone; the durable log replays
    restarted = LiveServer(str(tmp_path), env).start()
    try:
        durable = min(_first_event_seconds(restarted, session_id) for _ in range(3))
        assert durable < FIRST_EVENT_BOUND
        replay = open_stream("GET", f"{restarted.url}/api/chat/resume/{session_id}", timeout=120).events()
        assert text_of(replay) == expected
        assert [int(f["id"]) for f in replay if f.get("id")] == ids  # the same ids from either log
    finally:
        restarted.stop()
    print(f"first event of a {TOKENS:,}-event resume: memory {memory * 1000:.1f} ms, durable {durable * 1000:.1f} ms")
