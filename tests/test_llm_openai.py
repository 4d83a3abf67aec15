"""The OpenAI-compatible adapter against a local server speaking /v1/chat/completions SSE."""

import json
import time

import pytest
from fakeproviders import Reply, openai_chunk, openai_text, refused_url
from provider_helpers import HELLO, collect, make, of_type, stop_while_streaming, text, tool_calls

from odysseus.cancel import Cancelled
from odysseus.llm.base import ChatRequest
from odysseus.llm.openai_compat import api_root

USAGE = {"prompt_tokens": 11, "completion_tokens": 4, "total_tokens": 15}


def test_plain_text_with_usage(fake):
    fake.script(Reply(chunks=openai_text("Hel", "lo", " world", usage=USAGE)))
    provider = make("openai", fake.url + "/v1", api_key="sk-test")
    events, error = collect(provider, ChatRequest("gpt-x", HELLO, temperature=0.2, max_tokens=50))
    assert error is None
    assert text(events) == "Hello world"
    assert of_type(events, "usage") == [{"data": {"input_tokens": 11, "output_tokens": 4}}]
    assert of_type(events, "finish") == [{"reason": "stop"}]
    assert events[-1].type == "finish"
    post = fake.posts[0]
    assert post.path == "/v1/chat/completions"
    assert post.headers["Authorization"] == "Bearer sk-test"
    assert post.body == {
        "model": "gpt-x",
        "messages": HELLO,
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0.2,
        "max_tokens": 50,
    }


def test_usage_absent_means_no_usage_event(fake):
    fake.script(Reply(chunks=openai_text("Hi")))
    events, error = collect(make("openai", fake.url + "/v1"))
    assert error is None and text(events) == "Hi"
    assert of_type(events, "usage") == []


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_reasoning_fields(fake, field):
    fake.script(
        Reply(
            chunks=[
                openai_chunk({"role": "assistant", "content": None, field: "Let me"}),
                openai_chunk({field: " think."}),
                openai_chunk({"content": "Answer"}),
                openai_chunk({}, "stop"),
                "data: [DONE]\n\n",
            ]
        )
    )
    events, error = collect(make("openai", fake.url + "/v1"))
    assert error is None
    assert text(events, thinking=True) == "Let me think."
    assert text(events) == "Answer"


def test_think_tag_split_across_chunks(fake):
    fake.script(Reply(chunks=openai_text("<th", "ink>The user", " greets.</t", "hink>\n\nHi", "!")))
    events, error = collect(make("openai", fake.url + "/v1"))
    assert error is None
    assert text(events, thinking=True) == "The user greets."
    assert text(events) == "Hi!"


def test_reply_starting_inside_think_when_configured(fake):
    fake.script(Reply(chunks=openai_text("Reasoning", " here</th", "ink>Answer")))
    events, error = collect(make("openai", fake.url + "/v1", options={"think_starts_open": True}))
    assert error is None
    assert text(events, thinking=True) == "Reasoning here" and text(events) == "Answer"


def test_sse_frames_split_across_writes(fake):
    whole = "".join(openai_text("one ", "two", usage=USAGE))
    fake.script(Reply(chunks=[whole[i : i + 7] for i in range(0, len(whole), 7)]))
    events, error = collect(make("openai", fake.url + "/v1"))
    assert error is None and text(events) == "one two"


def test_close_delimited_body(fake):
    fake.script(Reply(chunks=openai_text("no ", "chunking"), chunked=False))
    events, error = collect(make("openai", fake.url + "/v1"))
    assert error is None and text(events) == "no chunking"


def test_parallel_tool_calls_split_across_many_deltas(fake):
    def tc(index, **kw):
        return openai_chunk({"tool_calls": [{"index": index, **kw}]})

    fake.script(
        Reply(
            chunks=[
                openai_chunk({"role": "assistant", "content": None}),
                tc(0, id="call_a", type="function", function={"name": "get_weather", "arguments": ""}),
                tc(1, id="call_b", type="function", function={"name": "get_time", "arguments": ""}),
                tc(0, function={"arguments": '{"ci'}),
                tc(1, function={"arguments": '{"tz": '}),
                tc(0, function={"arguments": 'ty": "Pa'}),
                tc(1, function={"arguments": '"UTC"}'}),
                tc(0, function={"arguments": 'ris"}'}),
                openai_chunk({}, "tool_calls"),
                openai_chunk(None, usage=USAGE),
                "data: [DONE]\n\n",
            ]
        )
    )
    events, error = collect(make("openai", fake.url + "/v1"))
    assert error is None
    assert tool_calls(events) == [
        {"id": "call_a", "name": "get_weather", "arguments": {"city": "Paris"}, "index": 0},
        {"id": "call_b", "name": "get_time", "arguments": {"tz": "UTC"}, "index": 1},
    ]
    assert of_type(events, "finish") == [{"reason": "tool_calls"}]


def test_tool_history_and_tools_are_sent_in_openai_shape(fake):
    fake.script(Reply(chunks=openai_text("done")))
    tools = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]
    messages = [
        {"role": "user", "content": "add 1 2"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "add", "arguments": {"a": 1}}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "3"},
    ]
    events, error = collect(make("openai", fake.url + "/v1"), ChatRequest("m", messages, tools=tools))
    assert error is None
    body = fake.posts[0].body
    assert body["tools"] == tools
    assert body["messages"][1]["tool_calls"][0]["function"]["arguments"] == json.dumps({"a": 1})
    assert body["messages"][2] == {"role": "tool", "tool_call_id": "c1", "content": "3"}


def test_unknown_fields_become_provider_meta(fake):
    fake.script(
        Reply(
            chunks=[
                openai_chunk({"role": "assistant", "content": "x"}, provider="Acme"),
                openai_chunk({}, "stop", x_groq={"id": "q1"}),
                "data: [DONE]\n\n",
            ]
        )
    )
    events, error = collect(make("openai", fake.url + "/v1"))
    assert error is None
    metas = of_type(events, "provider_meta")
    assert metas[0]["fields"]["provider"] == "Acme"
    assert metas[-1]["fields"] == {"x_groq": {"id": "q1"}}
    assert {e.type for e in events} <= {"delta", "provider_meta", "finish"}


def test_server_rejecting_stream_options_is_asked_again_without(fake):
    fake.script(
        Reply(status=400, body={"error": {"message": "Unrecognized request argument: stream_options"}}),
        Reply(chunks=openai_text("ok")),
        Reply(chunks=openai_text("again")),
    )
    provider = make("openai", fake.url + "/v1")
    assert text(collect(provider)[0]) == "ok"
    assert text(collect(provider)[0]) == "again"
    bodies = [p.body for p in fake.posts]
    assert "stream_options" in bodies[0]
    assert "stream_options" not in bodies[1] and "stream_options" not in bodies[2]


@pytest.mark.parametrize(
    "reply, status, message",
    [
        (Reply(end="silent"), 504, "Read timeout"),
        (Reply(chunks=openai_text("Par", "tial", done=False)[:3], end="stall"), 504, "Read timeout"),
        (Reply(chunks=openai_text("Par", "tial")[:3], end="reset"), 502, "reset"),
        (Reply(chunks=openai_text("Par", "tial")[:3], end="cut"), 502, "closed"),
        (Reply(status=401, body={"error": {"message": "Incorrect API key"}}), 401, "Incorrect API key"),
        (Reply(status=404, body={"error": {"message": "The model `nope` does not exist"}}), 404, "does not exist"),
        (
            Reply(status=429, body={"error": {"message": "Rate limit"}}, headers={"Retry-After": "12"}),
            429,
            "Rate limit",
        ),
        (Reply(status=500, body={"error": {"message": "boom"}}), 500, "boom"),
        (Reply(chunks=openai_text("Par", "tial")[:3] + ['data: {"choices": [\n\n']), 502, "Malformed chunk"),
    ],
    ids=["no-first-byte", "stall", "reset", "cut", "401", "404", "429", "500", "malformed"],
)
def test_faults(fake, reply, status, message):
    fake.script(reply)
    events, error = collect(make("openai", fake.url + "/v1"))
    assert error is not None and error.status == status and message in error.message
    assert not error.message.startswith("Read timeout") or error.message == "Read timeout"
    partial = text(events)
    assert partial == ("Partial" if reply.chunks else "")
    if status == 429:
        assert error.retry_after == 12


def test_refused_connection_is_503():
    events, error = collect(make("openai", refused_url() + "/v1"))
    assert events == [] and error.status == 503


def test_idle_timeout_applies_after_first_output(fake):
    # first byte after 0.6 s is fine (first-token limit 2 s), a 0.6 s gap later is not (idle 0.3 s)
    fake.script(Reply(chunks=openai_text("a", "b", "c", done=False)[:3], first_delay=0.6, end="stall"))
    provider = make("openai", fake.url + "/v1", {"FIRST_TOKEN_TIMEOUT": 5.0, "IDLE_TIMEOUT": 0.3})
    started = time.monotonic()
    events, error = collect(provider)
    assert text(events) == "ab" and error.status == 504 and error.message == "Read timeout"
    assert time.monotonic() - started < 3.0  # the idle limit ended it, not the first-token one


def test_provider_option_overrides_timeouts(fake):
    provider = make("openai", fake.url + "/v1", options={"first_token_timeout": 0.2, "idle_timeout": 7})
    assert provider.timeouts.first_token == 0.2 and provider.timeouts.idle == 7
    fake.script(Reply(end="silent"))
    assert collect(provider)[1].status == 504


@pytest.mark.parametrize(
    "reply",
    [
        Reply(chunks=openai_text(*["tok "] * 50), delay=0.1),
        Reply(chunks=openai_text("a", "b", done=False)[:3], end="stall"),
        Reply(end="silent"),
    ],
    ids=["streaming", "silent-after-output", "silent"],
)
def test_stop_closes_the_server_connection_promptly(fake, reply):
    fake.script(reply)
    outcome = stop_while_streaming(
        make("openai", fake.url + "/v1", {"FIRST_TOKEN_TIMEOUT": 30, "IDLE_TIMEOUT": 30}), fake, after=0.5
    )
    assert not outcome["thread_alive"]
    assert isinstance(outcome["ended"], Cancelled)
    assert outcome["server_saw_close_after"] is not None and outcome["server_saw_close_after"] < 1.0


def test_api_root_and_model_listing(fake):
    assert api_root("http://localhost:8080") == "http://localhost:8080/v1"
    assert api_root("https://openrouter.ai/api/v1/") == "https://openrouter.ai/api/v1"
    assert api_root(None) == "https://api.openai.com/v1"
    fake.get_json["/v1/models"] = {"object": "list", "data": [{"id": "qwen3"}, {"id": "llama"}]}
    assert make("openai", fake.url).list_models() == ["qwen3", "llama"]
    assert make("openai", fake.url, models=["only-this"]).list_models() == ["only-this"]
    assert make("openai", fake.url, models=["a", "b"]).default_model == "a"
