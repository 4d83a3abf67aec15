"""The Ollama adapter against a local server speaking /api/chat NDJSON."""

import pytest
from fakeproviders import Reply, ndjson, ollama_text, refused_url
from provider_helpers import HELLO, collect, make, of_type, stop_while_streaming, text, tool_calls

from odysseus.cancel import Cancelled
from odysseus.llm.base import ChatRequest

NDJSON = "application/x-ndjson"
BASE = {"model": "llama3", "created_at": "2024-01-01T00:00:00Z"}


def reply(lines, **kw):
    return Reply(chunks=lines, content_type=NDJSON, **kw)


def test_plain_text_with_counts(fake):
    fake.script(
        reply(
            ollama_text("Hel", "lo"),
        )
    )
    events, error = collect(make("ollama", fake.url), ChatRequest("llama3", HELLO, temperature=0.5, max_tokens=9))
    assert error is None and text(events) == "Hello"
    assert of_type(events, "usage") == [{"data": {"input_tokens": 7, "output_tokens": 3}}]
    assert of_type(events, "finish") == [{"reason": "stop"}]
    meta = of_type(events, "provider_meta")[-1]["fields"]
    assert meta["total_duration"] == 1000 and meta["eval_duration"] == 500
    post = fake.posts[0]
    assert post.path == "/api/chat"
    assert post.body == {
        "model": "llama3",
        "messages": HELLO,
        "stream": True,
        "options": {"temperature": 0.5, "num_predict": 9},
    }


def test_usage_absent(fake):
    fake.script(reply(ollama_text("Hi", prompt_eval_count=None, eval_count=None)))
    events, error = collect(make("ollama", fake.url))
    assert error is None and of_type(events, "usage") == []


def test_thinking_field_and_think_tags(fake):
    fake.script(
        reply(ollama_text("Answer", thinking=("Hmm, ", "ok."))), reply(ollama_text("<thi", "nk>inline</thi", "nk>Text"))
    )
    events, _ = collect(make("ollama", fake.url), ChatRequest("m", HELLO, extra={"think": True}))
    assert text(events, thinking=True) == "Hmm, ok." and text(events) == "Answer"
    assert fake.posts[0].body["think"] is True
    events, _ = collect(make("ollama", fake.url))
    assert text(events, thinking=True) == "inline" and text(events) == "Text"


def test_lines_split_across_writes(fake):
    whole = "".join(ollama_text("a", "b", "c"))
    fake.script(reply([whole[i : i + 5] for i in range(0, len(whole), 5)]))
    events, error = collect(make("ollama", fake.url))
    assert error is None and text(events) == "abc"


def test_tool_calls_get_ids_and_finish_says_tool_calls(fake):
    calls = [
        {"function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
        {"function": {"name": "get_time", "arguments": {"tz": "UTC"}}},
    ]
    fake.script(
        reply(
            [ndjson({**BASE, "message": {"role": "assistant", "content": "", "tool_calls": calls}, "done": False})]
            + ollama_text()
        )
    )
    events, error = collect(make("ollama", fake.url))
    assert error is None
    got = tool_calls(events)
    assert [(c["name"], c["arguments"], c["index"]) for c in got] == [
        ("get_weather", {"city": "Paris"}, 0),
        ("get_time", {"tz": "UTC"}, 1),
    ]
    assert all(c["id"].startswith("call_") for c in got) and got[0]["id"] != got[1]["id"]
    assert of_type(events, "finish") == [{"reason": "tool_calls"}]


def test_openai_shaped_history_is_translated(fake):
    fake.script(reply(ollama_text("ok")))
    tools = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]
    messages = [
        {"role": "system", "content": "be brief"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,QUJD"}},
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "3"},
    ]
    collect(make("ollama", fake.url), ChatRequest("m", messages, tools=tools))
    body = fake.posts[0].body
    assert body["tools"] == tools
    assert body["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "look", "images": ["QUJD"]},
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "add", "arguments": {"a": 1}}}]},
        {"role": "tool", "content": "3", "tool_name": "add"},
    ]


@pytest.mark.parametrize(
    "script, status, message",
    [
        (reply([], end="silent"), 504, "Read timeout"),
        (reply(ollama_text("Par", "tial")[:2], end="stall"), 504, "Read timeout"),
        (reply(ollama_text("Par", "tial")[:2], end="reset"), 502, "reset"),
        (reply(ollama_text("Par", "tial")[:2], end="cut"), 502, "closed"),
        (Reply(status=401, body={"error": "unauthorized"}), 401, "unauthorized"),
        (Reply(status=404, body={"error": 'model "nope" not found, try pulling it first'}), 404, "not found"),
        (Reply(status=429, body={"error": "busy"}, headers={"Retry-After": "3"}), 429, "busy"),
        (Reply(status=500, body={"error": "llama runner process has terminated"}), 500, "terminated"),
        (reply(ollama_text("Par", "tial")[:2] + ['{"message": {"content": "x"\n']), 502, "Malformed chunk"),
        (reply(ollama_text("Par", "tial")[:2] + [ndjson({"error": "out of memory"})]), 502, "out of memory"),
    ],
    ids=["no-first-byte", "stall", "reset", "cut", "401", "404", "429", "500", "malformed", "in-stream-error"],
)
def test_faults(fake, script, status, message):
    fake.script(script)
    events, error = collect(make("ollama", fake.url))
    assert error is not None and error.status == status and message in error.message
    assert text(events) == ("Partial" if script.chunks else "")
    if status == 429:
        assert error.retry_after == 3


def test_refused_connection_is_503():
    assert collect(make("ollama", refused_url()))[1].status == 503


@pytest.mark.parametrize(
    "script",
    [
        reply(ollama_text(*["tok "] * 50), delay=0.1),
        reply(ollama_text("a", "b")[:2], end="stall"),
        reply([], end="silent"),
    ],
    ids=["streaming", "silent-after-output", "silent"],
)
def test_stop_closes_the_server_connection_promptly(fake, script):
    fake.script(script)
    outcome = stop_while_streaming(make("ollama", fake.url, {"FIRST_TOKEN_TIMEOUT": 30, "IDLE_TIMEOUT": 30}), fake)
    assert isinstance(outcome["ended"], Cancelled) and not outcome["thread_alive"]
    assert outcome["server_saw_close_after"] is not None and outcome["server_saw_close_after"] < 1.0


def test_list_models_and_unreachable_listing(fake):
    fake.get_json["/api/tags"] = {"models": [{"name": "llama3:8b", "model": "llama3:8b"}, {"name": "qwen3"}]}
    assert make("ollama", fake.url).list_models() == ["llama3:8b", "qwen3"]
    with pytest.raises(Exception) as info:
        make("ollama", refused_url()).list_models()
    assert getattr(info.value, "status", None) == 503
