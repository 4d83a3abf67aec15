"""bench/stack_floor.py and its floor app: the floor does the work it claims, and the comparison runs."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys

import pytest
import requests

from bench.common import model_server
from bench.stack_floor import floor_server

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
pytestmark = pytest.mark.slow


def _frames(body: str) -> list:
    return [json.loads(line[6:]) for line in body.splitlines() if line.startswith("data: {")]


def test_the_floor_turn_streams_every_token_with_ids_and_saves_the_turn_twice_over():
    with model_server(tokens=5) as model_port, floor_server(model_port, "turn") as (port, _pid, data_dir, _master):
        for _ in range(2):  # the second turn reuses the kept-alive provider socket
            reply = requests.post(
                f"http://127.0.0.1:{port}/api/chat_stream", json={"message": "hi tokens=5"}, timeout=10
            )
            assert reply.status_code == 200
            assert reply.headers["content-type"].startswith("text/event-stream")
            frames = _frames(reply.text)
            assert [f["delta"] for f in frames if "delta" in f] == [f"tk{i} " for i in range(5)]
            assert frames[-1]["data"]["status"] == "done"
            ids = [int(line[4:]) for line in reply.text.splitlines() if line.startswith("id: ")]
            assert ids == list(range(2, 8))  # five tokens, then the terminal event
            assert reply.text.rstrip().endswith("data: [DONE]")
        with sqlite3.connect(os.path.join(data_dir, "floor.db")) as conn:
            rows = conn.execute("select role, content from messages order by id").fetchall()
            runs = conn.execute("select status, finished_at is not null from runs").fetchall()
    assert rows == [("user", "hi tokens=5"), ("assistant", "tk0 tk1 tk2 tk3 tk4 ")] * 2
    assert runs == [("done", 1), ("done", 1)]


def test_the_bare_mode_answers_without_storage_or_model():
    with model_server() as model_port, floor_server(model_port, "bare") as (port, _pid, data_dir, _master):
        reply = requests.post(f"http://127.0.0.1:{port}/api/chat_stream", json={"message": "hello there"}, timeout=10)
        assert _frames(reply.text) == [{"delta": "hello th"}]
        assert not os.path.exists(os.path.join(data_dir, "floor.db"))


def test_smoke_comparison_reports_three_servers_without_errors():
    done = subprocess.run(
        [sys.executable, "-m", "bench.stack_floor", "--smoke"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = {
        line.split("|")[1].strip(): line.split("|")[2:-1] for line in done.stdout.splitlines() if line.startswith("| ")
    }
    assert set(rows) >= {"bare Flask", "floor turn", "Odysseus"}
    assert rows["floor turn"][1].strip() == "1.00x"  # the ratios are to the floor turn
    for name in ("floor turn", "Odysseus"):
        assert rows[name][2].strip().startswith("+")  # both called the model and got every token
        assert rows[name][-1].strip() == "0"
    assert rows["bare Flask"][2].strip() == "-"
    assert rows["Odysseus"][4].strip().endswith("µs")  # CPU per paced token with 100 streams in flight
