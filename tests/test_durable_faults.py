"""Durable runs against a real gunicorn + gevent server on loopback, tried as an operator would.

Reload (SIGHUP) during five runs, shutdown (SIGTERM) during runs, kill -9 then restart and
resume with ``Last-Event-ID``, another process holding SQLite's write lock for 5 s, 503 at
capacity (also for an agent approval answer), and the refused set-ups (two workers, a second
server on one data directory).
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import threading
import time
from typing import Dict, List, Optional

import pytest
import requests
from liveserver import LiveServer
from scripted_model import ScriptedModel, reply, tool
from waiting import wait_for

from odysseus.llm.demo import demo_reply, demo_thinking, tokenize
from odysseus.sse import parse_sse


class Reader(threading.Thread):
    """Reads one SSE response in a thread; keeps each frame's id, event, raw data text and arrival time."""

    def __init__(self, method: str, url: str, **kwargs):
        super().__init__(daemon=True)
        self.response = requests.request(method, url, stream=True, timeout=60, **kwargs)
        self.headers = self.response.headers
        self.frames: List[Dict] = []
        self.error: Optional[str] = None
        self.start()

    def run(self) -> None:
        try:
            for frame in parse_sse(self.response.iter_content(chunk_size=None)):
                if frame.get("comment") is None:
                    self.frames.append(
                        {
                            "id": int(frame["id"]) if frame.get("id") else None,
                            "event": frame.get("event"),
                            "data": frame.get("data"),
                            "t": time.monotonic(),
                        }
                    )
        except Exception as exc:  # noqa: BLE001 - a cut connection is what some tests provoke
            self.error = f"{type(exc).__name__}: {exc}"

    @property
    def session_id(self) -> str:
        return self.headers["X-Odysseus-Session-Id"]

    def deltas(self, thinking: bool = False) -> List[str]:
        out = []
        for frame in list(self.frames):
            if frame["data"] and frame["data"].startswith('{"delta"'):
                data = json.loads(frame["data"])
                if bool(data.get("thinking")) == thinking:
                    out.append(data["delta"])
        return out

    def text(self, thinking: bool = False) -> str:
        return "".join(self.deltas(thinking))

    def terminal(self) -> Optional[str]:
        """``[DONE]`` or ``error`` when the stream carried a terminal frame."""
        for frame in self.frames:
            if frame["data"] == "[DONE]":
                return "[DONE]"
            if frame["event"] == "error":
                return "error"
        return None

    def finish(self, timeout: float = 30) -> "Reader":
        self.join(timeout)
        assert not self.is_alive(), "stream did not end"
        self.response.close()
        return self


def chat(server: LiveServer, message: str, **fields) -> Reader:
    return Reader("POST", server.url + "/api/chat_stream", json={"message": message, **fields})


def db_rows(server: LiveServer, sql: str, params=()) -> list:
    """Read the server's database directly (WAL readers never wait for the writer)."""
    conn = sqlite3.connect(os.path.join(server.data_dir, "odysseus.db"), timeout=5)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def assistant_of(server: LiveServer, session_id: str) -> list:
    return db_rows(
        server,
        "select content, thinking, metadata from messages where session_id = ? and role = 'assistant' order by id",
        [session_id],
    )


def status_of(server: LiveServer, session_id: str) -> dict:
    return requests.get(f"{server.url}/api/chat/stream_status/{session_id}", timeout=5).json()


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0] not in ("Z", "X")
    except OSError:
        return False


# ---------------------------------------------------------------- reload
def test_sighup_during_five_runs_saves_each_reply_once_and_complete(server_factory):
    server = server_factory(
        {"ODYSSEUS_DEMO_TOKEN_DELAY": "0.04", "ODYSSEUS_SHUTDOWN_GRACE": "20", "ODYSSEUS_GRACEFUL_MARGIN": "5"}
    )
    old_workers = server.worker_pids()
    prompts = [f"reload run {i}" for i in range(5)]
    readers = [chat(server, p) for p in prompts]
    wait_for(lambda: all(len(r.deltas(thinking=True)) >= 3 for r in readers), 15, what="every run streaming")
    os.kill(server.proc.pid, signal.SIGHUP)
    wait_for(lambda: set(server.worker_pids()) - set(old_workers), 20, what="a new worker")
    for r in readers:
        r.finish(40)
    wait_for(lambda: not any(alive(pid) for pid in old_workers), 40, what="the old worker to exit")
    for prompt, r in zip(prompts, readers, strict=False):
        assert r.terminal() == "[DONE]", (r.error, r.frames[-3:])
        assert r.text() == demo_reply(prompt)
        saved = assistant_of(server, r.session_id)
        assert len(saved) == 1, saved
        assert saved[0][0] == demo_reply(prompt) and saved[0][1] == demo_thinking(prompt)
        assert status_of(server, r.session_id)["status"] == "done"
    # the new worker serves turns normally
    after = chat(server, "after the reload").finish()
    assert after.terminal() == "[DONE]" and after.text() == demo_reply("after the reload")
    assert db_rows(server, "select count(*) from runs where status != 'done'") == [(0,)]


def test_sighup_with_a_short_grace_ends_runs_interrupted_once_with_everything_sent(server_factory):
    server = server_factory(
        {"ODYSSEUS_DEMO_TOKEN_DELAY": "0.1", "ODYSSEUS_SHUTDOWN_GRACE": "1", "ODYSSEUS_GRACEFUL_MARGIN": "3"}
    )
    old_workers = server.worker_pids()
    prompts = [f"short reload {i}" for i in range(5)]
    readers = [chat(server, p) for p in prompts]
    wait_for(lambda: all(r.text() for r in readers), 20, what="every run in its reply text")
    os.kill(server.proc.pid, signal.SIGHUP)
    for r in readers:
        r.finish(30)
    wait_for(lambda: not any(alive(pid) for pid in old_workers), 30, what="the old worker to exit")
    for prompt, r in zip(prompts, readers, strict=False):
        assert r.terminal() == "error", (r.error, r.frames[-3:])
        saved = assistant_of(server, r.session_id)
        assert len(saved) == 1, saved  # the new worker's recovery left the old worker's live runs alone
        assert saved[0][0] == r.text() and demo_reply(prompt).startswith(saved[0][0])
        assert json.loads(saved[0][2])["interrupted"] is True
        assert status_of(server, r.session_id)["status"] == "interrupted"


# ---------------------------------------------------------------- shutdown
def test_sigterm_gives_every_client_a_terminal_frame_and_saves_what_they_saw(server_factory, tmp_path):
    data_dir = str(tmp_path / "term")
    env = {"ODYSSEUS_DEMO_TOKEN_DELAY": "0.1", "ODYSSEUS_SHUTDOWN_GRACE": "1", "ODYSSEUS_GRACEFUL_MARGIN": "3"}
    server = server_factory(env, data_dir=data_dir)
    prompts = [f"shutdown run {i}" for i in range(4)]
    readers = [chat(server, p) for p in prompts]
    wait_for(lambda: all(r.text() for r in readers), 20, what="every run in its reply text")
    server.proc.send_signal(signal.SIGTERM)
    for r in readers:
        r.finish(30)
    server.proc.wait(30)
    for r in readers:
        assert r.terminal() == "error", (r.error, [f["data"] for f in r.frames[-4:]])
        kinds = [json.loads(f["data"]).get("type") for f in r.frames[-3:-1]]
        assert kinds == ["message_saved", "chat_terminal"]
        terminal = json.loads(r.frames[-2]["data"])["data"]
        assert terminal["status"] == "interrupted" and terminal["message_id"] is not None
    again = server_factory(env, data_dir=data_dir)
    for prompt, r in zip(prompts, readers, strict=False):
        saved = assistant_of(again, r.session_id)
        assert len(saved) == 1
        content, metadata = saved[0][0], json.loads(saved[0][2])
        assert content.startswith(r.text()) and demo_reply(prompt).startswith(content)
        assert metadata["interrupted"] is True
        assert status_of(again, r.session_id)["status"] == "interrupted"


# ---------------------------------------------------------------- crash, restart, resume
def ends_interrupted(reader: Reader) -> bool:
    """The stream ended in the recovered run's terminal record: message_saved, chat_terminal, error."""
    kinds = [("error" if f["event"] == "error" else json.loads(f["data"]).get("type")) for f in reader.frames[-3:]]
    return (
        kinds == ["message_saved", "chat_terminal", "error"]
        and json.loads(reader.frames[-2]["data"])["data"]["status"] == "interrupted"
    )


FLUSH = 0.2
DELAY = 0.02


def test_kill9_loses_at_most_one_flush_interval_and_resume_replays_the_same_ids(server_factory, tmp_path):
    data_dir = str(tmp_path / "kill")
    env = {"ODYSSEUS_DEMO_TOKEN_DELAY": str(DELAY), "ODYSSEUS_EVENT_FLUSH_INTERVAL": str(FLUSH)}
    server = server_factory(env, data_dir=data_dir)
    prompts = [f"kill nine run {i}" for i in range(3)]
    readers = [chat(server, p) for p in prompts]
    wait_for(lambda: all(len(r.deltas()) >= 15 for r in readers), 20, what="every run well into its reply")
    server.kill()
    killed_at = time.monotonic()
    for r in readers:
        r.finish(10)
    again = server_factory(env, data_dir=data_dir)
    lags = []
    for prompt, r in zip(prompts, readers, strict=False):
        before = [f for f in r.frames if f["t"] <= killed_at]
        saved = assistant_of(again, r.session_id)
        assert len(saved) == 1
        content, thinking = saved[0][0], saved[0][1]
        seen = "".join(
            json.loads(f["data"])["delta"]
            for f in before
            if (f["data"] or "").startswith('{"delta"') and not json.loads(f["data"]).get("thinking")
        )
        assert thinking == demo_thinking(prompt)
        assert seen.startswith(content), (seen, content)
        lost_tokens = len(tokenize(seen[len(content) :]))
        lags.append(lost_tokens * DELAY)
        # at most one flush interval (plus the flush itself and one token in flight)
        assert lost_tokens * DELAY <= FLUSH + 2 * DELAY + 0.1, (lost_tokens, seen[len(content) :])

        # resume with Last-Event-ID from a point the client had seen: same ids, same bytes, then the end
        cursor = before[len(before) // 2]["id"]
        resumed = Reader(
            "GET", f"{again.url}/api/chat/resume/{r.session_id}", headers={"Last-Event-ID": str(cursor)}
        ).finish(15)
        ids = [f["id"] for f in resumed.frames]
        assert ids and ids[0] == cursor + 1 and ids == sorted(set(ids))
        mine = {f["id"]: f["data"] for f in before}
        overlap = [f for f in resumed.frames if f["id"] in mine]
        assert overlap and all(f["data"] == mine[f["id"]] for f in overlap), [
            (f["id"], f["data"], mine[f["id"]]) for f in overlap if f["data"] != mine[f["id"]]
        ]
        assert ends_interrupted(resumed)
        # with the LAST id the client had (possibly past what reached the disk): the end, never a reused id
        last = before[-1]["id"]
        rest = Reader(
            "GET", f"{again.url}/api/chat/resume/{r.session_id}", headers={"Last-Event-ID": str(last)}
        ).finish(15)
        assert ends_interrupted(rest), rest.frames
        assert all(f["id"] > last for f in rest.frames)
        full = Reader("GET", f"{again.url}/api/chat/resume/{r.session_id}").finish(15)
        assert full.text() == content and ends_interrupted(full)
    print(f"kill -9 lag per run (s of tokens): {lags}; flush interval {FLUSH}")


# ---------------------------------------------------------------- a locked database
def test_an_outside_write_lock_for_five_seconds_delays_saves_not_streams(server_factory):
    server = server_factory({"ODYSSEUS_DEMO_TOKEN_DELAY": "0.02"})
    chat(server, "warm up").finish()
    prompts = [f"locked run {i}" for i in range(4)]
    readers = [chat(server, p) for p in prompts]
    wait_for(lambda: all(r.deltas(thinking=True) for r in readers), 15, what="every run streaming")
    conn = sqlite3.connect(os.path.join(server.data_dir, "odysseus.db"), isolation_level=None, timeout=5)
    conn.execute("BEGIN IMMEDIATE")
    held_from = time.monotonic()
    slowest, polls, backlog = 0.0, 0, []
    try:
        while time.monotonic() - held_from < 5.0:
            t0 = time.perf_counter()
            health = requests.get(server.url + "/api/health", timeout=5)
            took = time.perf_counter() - t0
            assert health.ok
            backlog.append(health.json()["durable_log"]["pending_events"])
            slowest, polls = max(slowest, took), polls + 1
            time.sleep(max(0.0, 0.05 - took))  # measurement: poll /api/health every 50 ms
        streamed = [r.text() for r in readers]
    finally:
        conn.execute("COMMIT")
        conn.close()
    assert polls >= 40
    assert slowest < 0.1, f"/api/health took {slowest * 1000:.0f} ms during the lock"
    assert max(backlog) > 0  # the writer had events it could not write yet
    # the runs kept streaming during the lock (their text was all out before it was released)
    assert all(text == demo_reply(p) for text, p in zip(streamed, prompts, strict=False))
    for prompt, r in zip(prompts, readers, strict=False):
        r.finish(30)
        assert r.terminal() == "[DONE]" and r.text() == demo_reply(prompt)
        saved = assistant_of(server, r.session_id)
        assert [s[0] for s in saved] == [demo_reply(prompt)]
        assert status_of(server, r.session_id)["status"] == "done"
    wait_for(
        lambda: requests.get(server.url + "/api/health", timeout=5).json()["durable_log"]["pending_events"] == 0,
        10,
        what="the backlog to drain",
    )


# ---------------------------------------------------------------- capacity
def _counts(server: LiveServer) -> tuple:
    return tuple(db_rows(server, f"select count(*) from {t}")[0][0] for t in ("sessions", "messages", "runs"))


def test_503_at_capacity_stores_nothing_and_the_retry_generates(server_factory):
    server = server_factory({"ODYSSEUS_MAX_ACTIVE_RUNS": "1", "ODYSSEUS_DEMO_TOKEN_DELAY": "0.03"})
    empty = requests.post(server.url + "/api/sessions", json={"title": "empty"}, timeout=5).json()["id"]
    slow = chat(server, "the slow one")
    wait_for(lambda: slow.deltas(thinking=True), 10, what="the first run streaming")
    before = _counts(server)
    refused = requests.post(
        server.url + "/api/chat_stream", timeout=10, json={"message": "second", "client_message_id": "cm-503"}
    )
    assert refused.status_code == 503 and refused.headers.get("Retry-After")
    assert "error" in refused.json()
    existing = requests.post(
        server.url + "/api/chat_stream",
        timeout=10,
        json={"message": "third", "session": empty, "client_message_id": "cm-x"},
    )
    assert existing.status_code == 503
    assert _counts(server) == before
    assert db_rows(server, "select count(*) from messages where client_message_id in ('cm-503', 'cm-x')") == [(0,)]
    slow.finish()
    assert slow.terminal() == "[DONE]" and slow.text() == demo_reply("the slow one")
    retry = chat(server, "second", client_message_id="cm-503").finish()
    assert retry.terminal() == "[DONE]" and retry.text() == demo_reply("second")
    roles = db_rows(server, "select role, content from messages where session_id = ? order by id", [retry.session_id])
    assert roles == [("user", "second"), ("assistant", demo_reply("second"))]


@pytest.fixture
def scripted():
    with ScriptedModel() as model:
        yield model


def test_503_for_an_approval_answer_leaves_the_approval_unused(server_factory, scripted):
    server = server_factory(
        {
            "OPENAI_BASE_URL": scripted.url + "/v1",
            "OPENAI_API_KEY": "sk-test-not-secret",
            "ODYSSEUS_AGENT_TOOLS": "shell",
            "ODYSSEUS_MAX_ACTIVE_RUNS": "1",
        }
    )
    scripted.script(
        reply("", [tool("call_1", "shell", command="echo approved")]),
        reply("slow " * 40, chunk_delay=0.05),
        reply("The command ran."),
    )
    ask = Reader("POST", server.url + "/api/chat_stream", json={"mode": "agent", "message": "run it"}).finish()
    card = next(json.loads(f["data"]) for f in ask.frames if f["data"] and '"ask_user"' in f["data"][:20])["data"]
    session_id = ask.session_id
    slow = chat(server, "keep the slot busy")
    wait_for(lambda: slow.text(), 10, what="the slow run streaming")
    before = _counts(server)
    answer = {
        "mode": "agent",
        "session_id": session_id,
        "tool_approval_id": card["approval_id"],
        "tool_approval_decision": "approve",
        "client_message_id": "cm-approve",
    }
    refused = requests.post(server.url + "/api/chat_stream", json=answer, timeout=10)
    assert refused.status_code == 503 and refused.headers.get("Retry-After"), refused.text
    assert _counts(server) == before
    assert db_rows(server, "select used_at from approvals where id = ?", [card["approval_id"]]) == [(None,)]
    slow.finish()
    retry = Reader("POST", server.url + "/api/chat_stream", json=answer).finish()
    assert retry.terminal() == "[DONE]", retry.frames[-3:]
    assert "The command ran." in retry.text()
    assert any('"tool_output"' in (f["data"] or "") and "approved" in f["data"] for f in retry.frames)
    assert db_rows(server, "select used_at is not null from approvals where id = ?", [card["approval_id"]]) == [(1,)]


# ---------------------------------------------------------------- refused set-ups
def test_two_workers_with_the_in_process_backend_are_refused(tmp_path):
    server = LiveServer(str(tmp_path / "two"), {"ODYSSEUS_WORKERS": "2"})
    with pytest.raises(RuntimeError) as info:
        server.start(timeout=20)
    server.stop()
    assert "refusing to start 2 workers with the in-process run backend" in str(info.value)


def test_a_second_server_on_the_same_data_directory_is_refused(server_factory, tmp_path):
    data_dir = str(tmp_path / "shared")
    first = server_factory({}, data_dir=data_dir)
    second = LiveServer(data_dir, {"ODYSSEUS_AUTH": "none"})
    with pytest.raises(RuntimeError) as info:
        second.start(timeout=20)
    second.stop()
    assert "another Odysseus server already serves the data directory" in str(info.value)
    assert requests.get(first.url + "/api/health", timeout=5).ok  # the first one is untouched
