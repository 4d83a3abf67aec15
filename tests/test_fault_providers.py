"""Provider faults under load: some model streams stall, reset or answer 500 while others stream.

24 runs start at once against one fake OpenAI server that picks each reply from the
prompt. Every affected run ends with the right terminal event (504 after the idle
timeout for a stall, 502 for a reset, the provider's 500 passed on) and keeps its
partial; every healthy run completes exactly, as if it were alone.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from fakeproviders import FakeProvider, Record, Reply, openai_text
from sseclient import post_chat, text_of, types_of

WORDS = [f"w{i} " for i in range(30)]
KINDS = ["ok"] * 12 + ["stall"] * 4 + ["reset"] * 4 + ["500"] * 4
EXPECTED = {"stall": {"status": 504, "error": "Read timeout"}, "reset": {"status": 502}, "500": {"status": 500}}


def _choose(record: Record) -> Reply:
    prompt = record.body["messages"][-1]["content"]
    kind = prompt.split()[1]
    if kind == "ok":
        return Reply(chunks=openai_text(*WORDS), delay=0.03)
    if kind == "stall":
        return Reply(chunks=openai_text("Par", "tial", done=False)[:3], delay=0.03, end="stall")
    if kind == "reset":
        return Reply(chunks=openai_text("Par", "tial")[:3], delay=0.03, end="reset")
    return Reply(status=500, body={"error": {"message": "overloaded"}})


@pytest.fixture(scope="module")
def faulty(tmp_path_factory):
    """The app against a fake OpenAI server whose replies depend on the prompt; 1 s idle timeout."""
    from liveserver import LiveServer

    fake = FakeProvider(chooser=_choose)
    server = LiveServer(
        str(tmp_path_factory.mktemp("faults")),
        {
            "OPENAI_BASE_URL": fake.url + "/v1",
            "OPENAI_API_KEY": "sk-x",
            "OPENAI_MODEL": "m",
            "ODYSSEUS_IDLE_TIMEOUT": "1",
            "ODYSSEUS_FIRST_TOKEN_TIMEOUT": "5",
        },
    ).start()
    yield server, fake
    server.stop()
    fake.close()


def _run(base: str, index: int, kind: str) -> dict:
    stream = post_chat(base, f"run {kind} {index}", timeout=30)
    frames = stream.events()
    return {"kind": kind, "frames": frames, "session_id": stream.headers["X-Odysseus-Session-Id"]}


def test_faulty_streams_end_right_and_healthy_ones_are_unaffected(faulty):
    server, fake = faulty
    order = KINDS[::2] + KINDS[1::2]  # faults interleaved with healthy runs
    with ThreadPoolExecutor(max_workers=len(order)) as pool:
        outcomes = list(pool.map(lambda pair: _run(server.url, *pair), enumerate(order)))
    assert len(fake.posts) == len(order)
    for outcome in outcomes:
        kinds, frames = types_of(outcome["frames"]), outcome["frames"]
        terminal = next(f["data"]["data"] for f in frames if types_of([f]) == ["chat_terminal"])
        messages = requests.get(f"{server.url}/api/sessions/{outcome['session_id']}/messages", timeout=10).json()[
            "messages"
        ]
        assistant = [m for m in messages if m["role"] == "assistant"]
        assert len(assistant) == 1
        if outcome["kind"] == "ok":
            assert kinds[-1] == "[DONE]" and "error" not in kinds, kinds
            assert text_of(frames) == "".join(WORDS)
            assert terminal["status"] == "done" and terminal["partial"] is False
            assert assistant[0]["content"] == "".join(WORDS)
            continue
        expected = EXPECTED[outcome["kind"]]
        errors = [f["data"] for f in frames if f.get("event") == "error"]
        assert kinds[-1] == "error" and len(errors) == 1, kinds
        assert {k: errors[0][k] for k in expected} == expected
        assert terminal["status"] == "error" and terminal["error"]["status"] == expected["status"]
        partial = "" if outcome["kind"] == "500" else "Partial"
        assert text_of(frames) == partial and assistant[0]["content"] == partial
        assert assistant[0]["metadata"]["partial"] is True
