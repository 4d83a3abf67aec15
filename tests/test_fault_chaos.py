"""Disconnect chaos over a real server: clients drop at random points and resume at random times.

For every run, the events the client reconstructed (resuming with a cursor, or without
one and de-duplicating by id itself) equal a full replay of the run's log exactly, and
the reply is saved exactly once. Bounded: 30 runs, at most 5 drops each, 10 at a time.
"""

from __future__ import annotations

import random
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, List

import pytest
import requests
from sseclient import open_stream, post_chat, text_of, types_of

from odysseus.llm.demo import demo_reply

RUNS = 30
MAX_DROPS = 5


@pytest.fixture(scope="module")
def chaos_server(tmp_path_factory):
    """Demo model at 10 ms/token; logs kept long enough for the final full replay."""
    from liveserver import LiveServer

    server = LiveServer(
        str(tmp_path_factory.mktemp("chaos")),
        {"ODYSSEUS_DEMO_TOKEN_DELAY": "0.01", "ODYSSEUS_HEARTBEAT_INTERVAL": "0.3", "ODYSSEUS_EVICT_GRACE": "60"},
    ).start()
    yield server
    server.stop()


def _frames(stream, limit: int) -> List[Dict]:
    """Up to ``limit`` event frames (comments skipped); fewer when the stream ends."""
    out = []
    if limit <= 0:
        return out
    for frame in stream.frames():
        if "comment" in frame:
            continue
        out.append(frame)
        if len(out) >= limit:
            break
    return out


def _ended(frames: List[Dict]) -> bool:
    kinds = types_of(frames)
    return bool(kinds) and kinds[-1] in ("[DONE]", "error")


def _one_run(base: str, index: int) -> Dict:
    """Drive one run through random drops and resumes; return what the client reconstructed."""
    rng = random.Random(1000 + index)
    message = f"chaos run {index}"
    stream = post_chat(base, message)
    assert stream.status_code == 200
    session_id = stream.headers["X-Odysseus-Session-Id"]
    got: List[Dict] = []
    last = 0
    with_cursor = False
    drops = rng.randint(1, MAX_DROPS)
    frames = _frames(stream, rng.randint(0, 40))
    for attempt in range(drops + 1):
        for frame in frames:
            assert frame["id"] is not None, frame
            if frame["id"] <= last:  # only resuming without a cursor may repeat ids
                assert not with_cursor
                continue
            got.append(frame)
            last = frame["id"]
        stream.close()
        if _ended(got):
            break
        time.sleep(rng.uniform(0, 0.3))  # the scenario: clients arrive at random moments
        with_cursor = rng.random() < 0.5
        headers = {"Last-Event-ID": str(last)} if with_cursor and last else {}
        stream = open_stream("GET", f"{base}/api/chat/resume/{session_id}", headers=headers)
        assert stream.status_code == 200, stream.response.text
        final = attempt == drops - 1
        frames = stream.events() if final else _frames(stream, rng.randint(0, 40))
    stream.close()
    return {"session_id": session_id, "message": message, "frames": got, "drops": drops}


def test_random_drops_and_resumes_reconstruct_the_log_exactly(chaos_server):
    base = chaos_server.url
    with ThreadPoolExecutor(max_workers=10) as pool:
        outcomes = list(pool.map(lambda i: _one_run(base, i), range(RUNS)))
    for outcome in outcomes:
        session_id = outcome["session_id"]
        full = open_stream("GET", f"{base}/api/chat/resume/{session_id}").events()
        assert _ended(full) and types_of(full)[-1] == "[DONE]"
        assert outcome["frames"] == full, f"run in {session_id} after {outcome['drops']} drops"
        ids = [f["id"] for f in outcome["frames"]]
        assert ids == sorted(set(ids))  # no duplicate, no reordering
        assert text_of(full) == demo_reply(outcome["message"])
        messages = requests.get(f"{base}/api/sessions/{session_id}/messages", timeout=10).json()["messages"]
        assistant = [m for m in messages if m["role"] == "assistant"]
        assert len(assistant) == 1  # saved exactly once whatever the clients did
        assert assistant[0]["content"] == demo_reply(outcome["message"])
        status = requests.get(f"{base}/api/chat/stream_status/{session_id}", timeout=10).json()
        assert status["status"] == "done"
    assert sum(o["drops"] for o in outcomes) >= RUNS  # the chaos really happened
