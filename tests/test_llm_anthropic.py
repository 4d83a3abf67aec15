"""The Anthropic adapter against a local server speaking /v1/messages SSE."""

import time

import pytest
from fakeproviders import Reply, anthropic_block, anthropic_end, anthropic_start, anthropic_text, refused_url, sse_event
from provider_helpers import HELLO, collect, make, of_type, stop_while_streaming, text, tool_calls

from odysseus.cancel import Cancelled
from odysseus.llm.anthropic import wire_messages
from odysseus.llm.base import ChatRequest


def test_plain_text_and_request_shape(fake):
    fake.script(Reply(chunks=anthropic_text("Hel", "lo", input_tokens=21, output_tokens=6)))
    provider = make("anthropic", fake.url, {"DEFAULT_MAX_TOKENS": 321}, api_key="sk-ant")
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    events, error = collect(provider, ChatRequest("claude-x", messages, temperature=0.3))
    assert error is None and text(events) == "Hello"
    assert of_type(events, "usage") == [{"data": {"input_tokens": 21, "output_tokens": 6}}]
    assert of_type(events, "finish") == [{"reason": "stop"}]
    post = fake.posts[0]
    assert post.path == "/v1/messages"
    assert post.headers["x-api-key"] == "sk-ant" and post.headers["anthropic-version"] == "2023-06-01"
    assert post.body == {
        "model": "claude-x",
        "stream": True,
        "max_tokens": 321,
        "system": "be brief",
        "temperature": 0.3,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
    }


def test_thinking_is_kept_and_signature_goes_to_meta(fake):
    chunks = (
        anthropic_start()
        + anthropic_block(0, "thinking", ["Let me ", "see."])
        + [
            sse_event(
                "content_block_delta",
                {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "sig=="}},
            )
        ]
        + anthropic_block(1, "text", ["Yes."])
        + anthropic_end()
    )
    fake.script(Reply(chunks=chunks))
    events, error = collect(make("anthropic", fake.url), ChatRequest("c", HELLO, extra={"thinking_budget": 1024}))
    assert error is None
    assert text(events, thinking=True) == "Let me see." and text(events) == "Yes."
    assert {"provider": "anthropic", "index": 0, "delta": {"type": "signature_delta", "signature": "sig=="}} in of_type(
        events, "provider_meta"
    )
    assert fake.posts[0].body["thinking"] == {"type": "enabled", "budget_tokens": 1024}


def test_tool_use_input_json_accumulated(fake):
    chunks = (
        anthropic_start()
        + anthropic_block(0, "text", ["Checking."])
        + anthropic_block(1, "tool_use", ['{"ci', 'ty": "Pa', 'ris"}'], id="toolu_1", name="get_weather")
        + anthropic_block(2, "tool_use", [""], id="toolu_2", name="now")
        + anthropic_end("tool_use")
    )
    fake.script(Reply(chunks=chunks))
    events, error = collect(make("anthropic", fake.url))
    assert error is None
    assert tool_calls(events) == [
        {"id": "toolu_1", "name": "get_weather", "arguments": {"city": "Paris"}, "index": 0},
        {"id": "toolu_2", "name": "now", "arguments": {}, "index": 1},
    ]
    assert of_type(events, "finish") == [{"reason": "tool_calls"}]


def test_openai_history_and_tools_are_translated(fake):
    fake.script(Reply(chunks=anthropic_text("ok")))
    tools = [
        {
            "type": "function",
            "function": {
                "name": "add",
                "description": "adds",
                "parameters": {"type": "object", "properties": {"a": {}}},
            },
        }
    ]
    messages = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "add"},
        {
            "role": "assistant",
            "content": "On it.",
            "tool_calls": [
                {"id": "t1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}},
                {"id": "t2", "type": "function", "function": {"name": "add", "arguments": '{"a": 2}'}},
            ],
        },
        {"role": "tool", "tool_call_id": "t1", "content": "1"},
        {"role": "tool", "tool_call_id": "t2", "content": "2"},
        {"role": "user", "content": "thanks"},
    ]
    collect(make("anthropic", fake.url), ChatRequest("c", messages, tools=tools, max_tokens=99))
    body = fake.posts[0].body
    assert body["system"] == "sys" and body["max_tokens"] == 99
    assert body["tools"] == [
        {"name": "add", "description": "adds", "input_schema": {"type": "object", "properties": {"a": {}}}}
    ]
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "add"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "On it."},
                {"type": "tool_use", "id": "t1", "name": "add", "input": {"a": 1}},
                {"type": "tool_use", "id": "t2", "name": "add", "input": {"a": 2}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "1"},
                {"type": "tool_result", "tool_use_id": "t2", "content": "2"},
                {"type": "text", "text": "thanks"},
            ],
        },
    ]


def test_wire_messages_merges_same_role_turns():
    system, messages = wire_messages([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
    assert system == "" and messages == [
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}
    ]


def overloaded():
    return sse_event("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})


@pytest.mark.parametrize(
    "script, status, message",
    [
        (Reply(end="silent"), 504, "Read timeout"),
        (
            Reply(chunks=anthropic_start() + anthropic_block(0, "text", ["Par", "tial"])[:3], end="stall"),
            504,
            "Read timeout",
        ),
        (Reply(chunks=anthropic_start() + anthropic_block(0, "text", ["Par", "tial"])[:3], end="reset"), 502, "reset"),
        (
            Reply(chunks=anthropic_start() + anthropic_block(0, "text", ["Par", "tial"])[:3] + [overloaded()]),
            529,
            "overloaded_error",
        ),
        (Reply(chunks=anthropic_start() + [overloaded()]), 529, "Overloaded"),
        (
            Reply(
                status=401,
                body={"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}},
            ),
            401,
            "invalid x-api-key",
        ),
        (
            Reply(status=404, body={"type": "error", "error": {"type": "not_found_error", "message": "model: nope"}}),
            404,
            "model: nope",
        ),
        (
            Reply(
                status=429,
                body={"type": "error", "error": {"type": "rate_limit_error", "message": "slow"}},
                headers={"retry-after": "30"},
            ),
            429,
            "slow",
        ),
        (
            Reply(status=500, body={"type": "error", "error": {"type": "api_error", "message": "Internal"}}),
            500,
            "Internal",
        ),
        (
            Reply(chunks=anthropic_start() + anthropic_block(0, "text", ["Par", "tial"])[:3] + ["data: {oops\n\n"]),
            502,
            "Malformed chunk",
        ),
    ],
    ids=[
        "no-first-byte",
        "stall",
        "reset",
        "overloaded-mid",
        "overloaded-first",
        "401",
        "404",
        "429",
        "500",
        "malformed",
    ],
)
def test_faults(fake, script, status, message):
    fake.script(script)
    events, error = collect(make("anthropic", fake.url))
    assert error is not None and error.status == status and message in error.message
    assert text(events) == ("Partial" if len(script.chunks) > 3 else "")
    if status == 429:
        assert error.retry_after == 30


def test_refused_connection_is_503():
    assert collect(make("anthropic", refused_url()))[1].status == 503


@pytest.mark.parametrize(
    "script",
    [
        Reply(chunks=anthropic_start() + anthropic_block(0, "text", ["tok "] * 50), delay=0.1),
        Reply(chunks=anthropic_start() + anthropic_block(0, "text", ["a", "b"])[:3], end="stall"),
        Reply(end="silent"),
    ],
    ids=["streaming", "silent-after-output", "silent"],
)
def test_stop_closes_the_server_connection_promptly(fake, script):
    fake.script(script)
    outcome = stop_while_streaming(make("anthropic", fake.url, {"FIRST_TOKEN_TIMEOUT": 30, "IDLE_TIMEOUT": 30}), fake)
    assert isinstance(outcome["ended"], Cancelled) and not outcome["thread_alive"]
    assert outcome["server_saw_close_after"] is not None and outcome["server_saw_close_after"] < 1.0


def test_list_models(fake):
    fake.get_json["/v1/models"] = {"data": [{"id": "claude-a", "type": "model"}, {"id": "claude-b"}]}
    assert make("anthropic", fake.url).list_models() == ["claude-a", "claude-b"]


def test_pings_do_not_stretch_the_first_token_timeout(fake):
    fake.script(Reply(chunks=anthropic_start() + [sse_event("ping", {"type": "ping"})] * 40, delay=0.1))
    started = time.monotonic()
    events, error = collect(make("anthropic", fake.url, {"FIRST_TOKEN_TIMEOUT": 1.0, "IDLE_TIMEOUT": 10}))
    assert error is not None and error.status == 504 and error.message == "Read timeout"
    assert 0.9 < time.monotonic() - started < 3.0
