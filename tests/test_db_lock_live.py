"""A database locked by another process never freezes the server (issue 38, item 3).

An outside process holds ``BEGIN EXCLUSIVE`` on the server's SQLite file while a reply streams and
other requests come in. Throughout: ``/api/health`` and static files answer fast (they never touch
the database on the hub), the stream keeps its heartbeats, a request that must write answers a quick
503 with ``Retry-After`` instead of hanging, and once the lock goes the reply is saved exactly once.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest
import requests
from liveserver import LiveServer
from sseclient import post_chat, text_of
from waiting import wait_for

from odysseus.llm.demo import demo_reply

pytestmark = pytest.mark.slow

HOLDER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
conn.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
conn.execute("ROLLBACK")
print("released", flush=True)
"""


class Reader(threading.Thread):
    """Reads one chat stream to its end, noting when each frame (heartbeats included) arrived."""

    def __init__(self, stream):
        super().__init__(daemon=True)
        self.stream, self.frames, self.times = stream, [], []

    def run(self) -> None:
        for frame in self.stream.frames():
            self.frames.append(frame)
            self.times.append(time.monotonic())


def _p99(values):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


@pytest.mark.parametrize("seconds", [16, 60])
def test_an_outside_lock_freezes_nothing_and_loses_nothing(tmp_path, seconds):
    data_dir = str(tmp_path / "locked")
    server = LiveServer(
        data_dir,
        {"ODYSSEUS_HEARTBEAT_INTERVAL": "1", "ODYSSEUS_DEMO_TOKEN_DELAY": str(round((seconds + 4) / 60, 3))},
    ).start()
    try:
        message = f"a reply that outlives a {seconds} s lock"
        reader = Reader(post_chat(server.url, message, timeout=seconds + 60))
        reader.start()
        wait_for(lambda: text_of([f for f in reader.frames if "comment" not in f]), 20, what="the reply streaming")
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLDER, os.path.join(data_dir, "odysseus.db"), str(seconds)],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert holder.stdout.readline().strip() == "locked"
            locked_at = time.monotonic()
            health, static, refused = [], [], []
            while time.monotonic() - locked_at < seconds - 1:
                started = time.monotonic()
                assert requests.get(f"{server.url}/api/health", timeout=10).status_code == 200
                health.append(time.monotonic() - started)
                started = time.monotonic()
                assert requests.get(f"{server.url}/static/css/app.css", timeout=10).status_code == 200
                static.append(time.monotonic() - started)
                if len(refused) < 3:  # a new turn needs a write: refused quickly, never left hanging
                    started = time.monotonic()
                    answer = requests.post(f"{server.url}/api/chat_stream", json={"message": "now?"}, timeout=30)
                    refused.append((answer.status_code, answer.headers.get("Retry-After"), time.monotonic() - started))
                time.sleep(0.1)
            assert _p99(health) < 0.1, sorted(health)[-5:]
            assert _p99(static) < 0.1, sorted(static)[-5:]
            for status, retry_after, took in refused:
                assert status == 503 and retry_after and took < 3.0, refused
            # the stream kept its heartbeats through the lock: no silence much over the interval
            during = [t for t in reader.times if locked_at <= t <= locked_at + seconds - 1]
            gaps = [b - a for a, b in zip([locked_at, *during[:-1]], during, strict=True)]
            assert during and max(gaps) < 2.5, max(gaps)
            assert holder.stdout.readline().strip() == "released"
        finally:
            holder.kill()
            holder.wait()
        reader.join(seconds + 60)
        events = [f for f in reader.frames if "comment" not in f]
        assert text_of(events) == demo_reply(message) and events[-1]["data"] == "[DONE]"
        session = reader.stream.headers["X-Odysseus-Session-Id"]

        def saved():
            rows = requests.get(f"{server.url}/api/sessions/{session}/messages", timeout=10).json()["messages"]
            return [m for m in rows if m["role"] == "assistant"]

        wait_for(lambda: saved() and saved()[0]["content"] == demo_reply(message), 60, what="the reply saved")
        assert len(saved()) == 1
    finally:
        server.stop()
