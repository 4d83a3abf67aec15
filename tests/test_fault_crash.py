"""Crash: ``kill -9`` of the server while several runs stream, then a restart on the same data.

Every run reads ``interrupted`` in stream_status, its partial reply (the deltas the durable
log had flushed) is in history exactly once, a resume replays that log to its terminal
record, and nothing is left ``running`` in the agent API's run list.
"""

from __future__ import annotations

import os
import sqlite3

import requests
from sseclient import open_stream, post_chat, text_of, types_of
from waiting import wait_for

from odysseus.llm.demo import demo_reply

RUNS = 5


def _durable_seq(data_dir: str, run_id: str) -> int:
    """The last event ``run_id`` has in the durable log."""
    conn = sqlite3.connect(os.path.join(data_dir, "odysseus.db"), timeout=5)
    try:
        return conn.execute("select coalesce(max(seq), 0) from run_events where run_id = ?", [run_id]).fetchone()[0]
    finally:
        conn.close()


def test_kill_during_several_runs_leaves_them_interrupted_with_partials(server_factory, tmp_path):
    env = {"ODYSSEUS_DEMO_TOKEN_DELAY": "0.05", "ODYSSEUS_EVENT_FLUSH_INTERVAL": "0.1"}
    data_dir = str(tmp_path / "crash")
    server = server_factory(env, data_dir=data_dir)
    streams = [post_chat(server.url, f"crash run {i}") for i in range(RUNS)]
    sessions = [s.headers["X-Odysseus-Session-Id"] for s in streams]

    def all_checkpointed():
        rows = [requests.get(f"{server.url}/api/chat/stream_status/{sid}", timeout=5).json() for sid in sessions]
        return all(r["status"] == "running" and r["event_count"] > 25 for r in rows)

    wait_for(all_checkpointed, 20, what="every run past its reasoning")
    # a few events after the reply text began are in the durable log (the server's SQLite file, read directly)
    counted = {
        s.headers["X-Odysseus-Run-Id"]: requests.get(f"{server.url}/api/chat/stream_status/{sid}", timeout=5).json()[
            "event_count"
        ]
        for s, sid in zip(streams, sessions, strict=True)
    }
    wait_for(
        lambda: all(_durable_seq(data_dir, run_id) >= count + 3 for run_id, count in counted.items()),
        20,
        what="the reply text of every run in the durable log",
    )
    server.kill()
    for stream in streams:
        stream.close()

    again = server_factory(env, data_dir=data_dir)
    for index, session_id in enumerate(sessions):
        status = requests.get(f"{again.url}/api/chat/stream_status/{session_id}", timeout=5).json()
        assert status["status"] == "interrupted", status
        assert status["resumable"] is True  # the durable log is kept for the replay window
        messages = requests.get(f"{again.url}/api/sessions/{session_id}/messages", timeout=5).json()["messages"]
        assistant = [m for m in messages if m["role"] == "assistant"]
        assert len(assistant) == 1
        assert assistant[0]["metadata"]["interrupted"] is True and assistant[0]["metadata"]["partial"] is True
        content = assistant[0]["content"]
        assert content and demo_reply(f"crash run {index}").startswith(content[:40])
        replay = open_stream("GET", f"{again.url}/api/chat/resume/{session_id}", timeout=10).events()
        assert text_of(replay) == content
        assert types_of(replay)[-3:] == ["message_saved", "chat_terminal", "error"]
    runs = requests.get(f"{again.url}/api/agent/chat/runs", timeout=5).json()["runs"]
    mine = [r for r in runs if r["session_id"] in sessions]
    assert len(mine) == RUNS
    assert not [r for r in runs if r["status"] == "running"]
    assert {r["status"] for r in mine} == {"interrupted"}
