"""Bounded replays (issue 12, fault 3): 40 readers that never read a 16 MB reply's replay keep the
worker's memory bounded, the server stays responsive, and a reader that does read gets every byte."""

from __future__ import annotations

import socket
import time

import pytest
import requests
from fakeproviders import FakeProvider, Reply, openai_text
from liveserver import LiveServer
from sseclient import open_stream, text_of
from waiting import wait_for

PIECE = "0123456789abcdef" * 512  # 8 KiB per model chunk
PIECES = 2048  # 16 MiB in all
READERS = 40


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


@pytest.fixture
def big_reply_server(tmp_path):
    texts = [f"{i:06d}" + PIECE[6:] for i in range(PIECES)]
    fake = FakeProvider(default=Reply(chunks=openai_text(*texts)))
    server = LiveServer(
        str(tmp_path),
        {
            "OPENAI_BASE_URL": fake.url + "/v1",
            "OPENAI_API_KEY": "sk-x",
            "OPENAI_MODEL": "m",
            "ODYSSEUS_RUN_MAX_BYTES": str(64 * 1024 * 1024),
            "ODYSSEUS_MAX_STREAMS_PER_USER": "100",
            "ODYSSEUS_EVICT_GRACE": "600",
        },
    ).start()
    yield server, "".join(texts)
    server.stop()
    fake.close()


def _open_silent_reader(server, session_id: str) -> socket.socket:
    """A client that sends its request and never reads (a small receive buffer: it fills at once)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", server.port))
    sock.sendall(f"GET /api/chat/resume/{session_id} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    return sock


def test_forty_non_reading_replays_of_a_16_mb_reply_keep_rss_bounded(big_reply_server):
    server, expected = big_reply_server
    stream = open_stream("POST", server.url + "/api/chat_stream", json={"message": "a very long answer"}, timeout=120)
    session_id = stream.headers["X-Odysseus-Session-Id"]
    frames = stream.events()
    assert text_of(frames) == expected  # the live stream, in pieces, is exact
    wait_for(
        lambda: requests.get(f"{server.url}/api/chat/stream_status/{session_id}", timeout=5).json()["status"] == "done",
        30,
        what="run done",
    )
    [worker] = server.worker_pids()
    time.sleep(0.5)  # measurement: let the worker's memory settle before the baseline
    before = rss_kib(worker)
    readers = [_open_silent_reader(server, session_id) for _ in range(READERS)]
    try:
        peak = before
        deadline = time.monotonic() + 6
        while time.monotonic() < deadline:
            peak = max(peak, rss_kib(worker))
            time.sleep(0.2)  # measurement: sample the peak for 6 s
        started = time.monotonic()
        assert requests.get(server.url + "/api/health", timeout=10).ok
        health_seconds = time.monotonic() - started
        # a reader that does read gets the whole replay, byte for byte, while the others stall
        replay = open_stream("GET", f"{server.url}/api/chat/resume/{session_id}", timeout=120).events()
        assert text_of(replay) == expected
        peak = max(peak, rss_kib(worker))
    finally:
        for sock in readers:
            sock.close()
    growth_mib = (peak - before) / 1024
    # one 64 KiB piece (plus its encoded copy) per stalled connection: a few MiB; unbounded was over 1 GiB
    assert growth_mib < 120, f"worker RSS grew by {growth_mib:.0f} MiB under {READERS} non-reading replays"
    assert health_seconds < 2.0, f"/api/health took {health_seconds:.2f} s"
