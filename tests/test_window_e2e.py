"""The model's window over the real wire: a scripted model with a tiny window (``context_length``
in the TOML config) records what it was sent.

Checked: the oldest turns are dropped and the newest message kept, ``context_trimmed`` comes once
and before the first delta on both projections with its counts (and in the saved reply), the
provider's prompt_tokens correct the estimate, compaction with a scripted summary (stored as a
message, summarised rows hidden from the model but kept in history), a failing summary that
stores nothing and still trims, and POST /compact (409 while a run is going, 404 for a foreign id).
"""

from __future__ import annotations


import pytest
import requests
from liveserver import LiveServer
from scripted_model import ScriptedModel, reply
from sseclient import open_stream, post_chat, types_of

WINDOW = 700


#: the scripted model's "tokenizer": 3 characters a token, 5 tokens per message (the estimate uses 4 and 4)
def real_tokens(body):
    return sum(len(m.get("content") or "") // 3 + 5 for m in body.get("messages", []))


def config_file(tmp_path_factory, url: str) -> str:
    path = tmp_path_factory.mktemp("cfg") / "odysseus.toml"
    path.write_text(f'''
[[providers]]
name = "tiny"
kind = "openai"
base_url = "{url}/v1"
api_key = "sk-test-key-not-secret"
models = [{{name = "scripted", context_length = {WINDOW}}}]
''')
    return str(path)


@pytest.fixture(scope="module")
def model():
    with ScriptedModel() as scripted:
        scripted.prompt_tokens = real_tokens
        yield scripted


def _server(model, tmp_path_factory, **env):
    return LiveServer(
        str(tmp_path_factory.mktemp("window")),
        {
            "ODYSSEUS_CONFIG": config_file(tmp_path_factory, model.url),
            "ODYSSEUS_REPLY_RESERVE_TOKENS": "100",
            "ODYSSEUS_HEARTBEAT_INTERVAL": "0.5",
            "ODYSSEUS_AGENT_TOOLS": "update_plan",
            **{f"ODYSSEUS_{k}": str(v) for k, v in env.items()},
        },
    ).start()


@pytest.fixture(scope="module")
def trimming(model, tmp_path_factory):
    srv = _server(model, tmp_path_factory, COMPACT_THRESHOLD=0)
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def compacting(model, tmp_path_factory):
    srv = _server(model, tmp_path_factory, COMPACT_THRESHOLD=0.5, COMPACT_MIN_MESSAGES=4)
    yield srv
    srv.stop()


@pytest.fixture(autouse=True)
def empty_script(model):
    with model.lock:
        model.replies.clear()
        model.requests.clear()


def chat(server, message, path="/api/chat_stream", **fields):
    stream = open_stream("POST", server.url + path, json={"message": message, **fields}, timeout=60)
    try:
        frames = stream.events()
    finally:
        stream.close()
    return stream.headers.get("X-Odysseus-Session-Id"), frames


def seed(server, model, turns, size=300, session=None):
    """``turns`` exchanges of ``size``-character messages; the session id."""
    for n in range(turns):
        model.script(reply(f"A{n} " + "a" * size))
        sid, frames = chat(server, f"Q{n} " + "q" * size, **({"session_id": session} if session else {}))
        session = session or sid
        assert types_of(frames)[-1] == "[DONE]", frames[-3:]
    return session


def messages_of(server, session):
    return requests.get(f"{server.url}/api/sessions/{session}/messages", timeout=10).json()["messages"]


def sent_text(body):
    return [m.get("content") or "" for m in body["messages"]]


def test_trimming_drops_the_oldest_turns_and_announces_once_before_the_first_delta(trimming, model):
    session = seed(trimming, model, 3)
    assert all(
        not any(m.get("metadata", {}).get("context_trimmed") for m in messages_of(trimming, session)[:2]) for _ in [0]
    )
    model.script(reply("fits now"))
    _, frames = chat(trimming, "NEWEST " + "n" * 300, session_id=session)
    kinds = types_of(frames)
    assert kinds.count("context_trimmed") == 1
    assert kinds.index("context_trimmed") < kinds.index("delta")
    counts = next(
        f["data"]["data"]
        for f in frames
        if f["data"] and isinstance(f["data"], dict) and f["data"].get("type") == "context_trimmed"
    )
    sent = sent_text(model.requests[-1])
    assert sent[-1].startswith("NEWEST") and len(sent[-1]) == 307  # the newest message whole
    assert not any(text.startswith("Q0") or text.startswith("A0") for text in sent)  # the oldest turn went
    assert counts["messages_before"] == 7 and counts["messages_after"] == len(sent) < 7
    assert counts["context_length"] == WINDOW and counts["tokens_after"] <= WINDOW - 100 < counts["tokens_before"]
    roles = [m["role"] for m in model.requests[-1]["messages"]]
    assert roles[0] == "user"  # whole turns: the sent history starts with a user message
    saved = messages_of(trimming, session)
    assert saved[-1]["metadata"]["context_trimmed"]["messages_after"] == counts["messages_after"]
    assert len(saved) == 8  # nothing was deleted
    context = saved[-1]["metadata"]["context"]
    assert context["prompt_tokens"] == real_tokens(model.requests[-1]) and context["context_length"] == WINDOW


def test_agent_projection_sends_context_trimmed_as_a_named_event(trimming, model):
    session = seed(trimming, model, 3)
    model.script(reply("agent answer"))
    _, frames = chat(trimming, "AGENT " + "n" * 300, path="/api/agent/chat/stream", session_id=session)
    names = [f["event"] for f in frames]
    assert names.count("context_trimmed") == 1 and names.index("context_trimmed") < names.index("chunk")
    data = frames[names.index("context_trimmed")]["data"]["data"]
    assert data["messages_after"] < data["messages_before"] and data["context_length"] == WINDOW
    sent = model.requests[-1]["messages"]
    assert sent[0]["role"] == "system" and sent[-1]["content"].startswith("AGENT")  # the agent's prompt stays


def test_a_short_conversation_is_not_trimmed(trimming, model):
    model.script(reply("short"))
    _, frames = chat(trimming, "hello")
    assert "context_trimmed" not in types_of(frames) and "compacted" not in types_of(frames)


def test_prompt_tokens_correct_the_estimate(trimming, model):
    session = seed(trimming, model, 1, size=200)
    before = requests.get(f"{trimming.url}/api/sessions/{session}/context", timeout=10).json()
    assert before["model"] == "tiny/scripted" and before["context_length"] == WINDOW and before["source"] == "config"
    saved = messages_of(trimming, session)[-1]["metadata"]["context"]
    assert saved["prompt_tokens"] == real_tokens(model.requests[-1]) != saved["raw_tokens"]
    model.script(reply("b" * 200))
    chat(trimming, "q" * 200, session_id=session)
    second = messages_of(trimming, session)[-1]["metadata"]["context"]
    real = real_tokens(model.requests[-1])
    # the raw estimate (4 chars a token) is far off the model's count; the corrected one is close
    assert abs(second["raw_tokens"] - real) > 0.15 * real
    assert abs(second["estimated_tokens"] - real) <= 0.08 * real
    after = requests.get(f"{trimming.url}/api/sessions/{session}/context", timeout=10).json()
    assert after["last_prompt_tokens"] == real and after["estimated_tokens"] > 0


def test_compaction_stores_a_summary_and_hides_the_summarised_rows_from_the_model(compacting, model):
    session = seed(compacting, model, 2, size=250)
    model.script(reply("SUMMARY: the user asked Q0 and Q1 about q's."), reply("answer after compaction"))
    _, frames = chat(compacting, "Q2 " + "q" * 250, session_id=session)
    kinds = types_of(frames)
    assert kinds.count("compacted") == 1 and kinds.index("compacted") < kinds.index("delta")
    event = next(f["data"] for f in frames if isinstance(f["data"], dict) and f["data"].get("type") == "compacted")
    assert event["context_length"] == WINDOW and event["data"]["messages_after"] < event["data"]["messages_before"]
    summary_request, answer_request = model.requests[-2], model.requests[-1]
    # COMPACT_SUMMARY_TOKENS (600) capped to a quarter of the 700-token window (issue 37 defect 4)
    assert summary_request["max_tokens"] == WINDOW // 4 and "Q0" in sent_text(summary_request)[-1]
    sent = sent_text(answer_request)
    assert any("SUMMARY: the user asked" in text for text in sent)
    assert not any(text.startswith("Q0") or text.startswith("A0") for text in sent)
    assert sent[-1].startswith("Q2")
    saved = messages_of(compacting, session)
    summary = next(m for m in saved if m["role"] == "system")
    assert summary["metadata"]["compacted"] is True
    assert summary["metadata"]["summarized_ids"] == [m["id"] for m in saved[:2]]
    assert [m["content"][:2] for m in saved if m["role"] != "system"] == ["Q0", "A0", "Q1", "A1", "Q2", "an"]
    exported = requests.get(f"{compacting.url}/api/sessions/{session}/export?format=json", timeout=10).json()
    assert len(exported["messages"]) == len(saved)  # the summarised messages are still exported
    # the next turn still hides them, without asking for another summary
    model.script(reply("third"))
    chat(compacting, "Q3 short", session_id=session)
    assert not any(text.startswith("Q0") for text in sent_text(model.requests[-1]))
    assert any("SUMMARY" in text for text in sent_text(model.requests[-1]))


def test_a_failing_summary_changes_nothing_and_trimming_still_applies(compacting, model):
    session = seed(compacting, model, 2, size=250)
    before = messages_of(compacting, session)
    model.script(reply(status=500, error_body='{"error": {"message": "summariser down"}}'), reply("still answered"))
    _, frames = chat(compacting, "Q2 " + "q" * 1200, session_id=session)
    kinds = types_of(frames)
    assert "compacted" not in kinds and kinds[-1] == "[DONE]"
    notices = [
        f["data"]["message"] for f in frames if isinstance(f["data"], dict) and f["data"].get("type") == "notice"
    ]
    assert any("could not be summarised" in n for n in notices)
    assert "context_trimmed" in kinds  # the window still holds
    after = messages_of(compacting, session)
    assert not any(m["role"] == "system" for m in after)
    assert [m["id"] for m in after[: len(before)]] == [m["id"] for m in before]


def test_manual_compact_409_while_running_then_200(compacting, model):
    session = seed(compacting, model, 2, size=100)
    model.script(reply("slow " * 20, chunk_delay=0.2))
    stream = post_chat(compacting.url, "keep going", session_id=session, timeout=60)
    try:
        frames = stream.frames()
        next(f for f in frames if isinstance(f.get("data"), dict) and "delta" in f["data"])
        busy = requests.post(f"{compacting.url}/api/sessions/{session}/compact", json={}, timeout=10)
        assert busy.status_code == 409 and "error" in busy.json()
        list(frames)
    finally:
        stream.close()
    model.script(reply("MANUAL SUMMARY"))
    done = requests.post(f"{compacting.url}/api/sessions/{session}/compact", json={}, timeout=30)
    assert done.status_code == 200, done.text
    body = done.json()
    assert body["compacted"] and body["message"]["content"] == "MANUAL SUMMARY"
    assert body["data"]["messages_after"] < body["data"]["messages_before"]
    assert requests.post(f"{compacting.url}/api/sessions/s_nope/compact", json={}, timeout=10).status_code == 404
    assert requests.get(f"{compacting.url}/api/sessions/s_nope/context", timeout=10).status_code == 404
    single = seed(compacting, model, 1, size=10)
    few = requests.post(f"{compacting.url}/api/sessions/{single}/compact", json={}, timeout=10)
    assert few.status_code == 409
    bad = requests.post(compacting.url + "/api/chat_stream", json={"message": "x", "max_tokens": "lots"}, timeout=10)
    assert bad.status_code == 400 and "max_tokens" in bad.json()["error"]
