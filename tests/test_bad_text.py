"""Lone and split UTF-16 surrogates from a model, over the real wire, for every adapter.

The fake providers send the JSON escapes ``\\ud83d`` / ``\\ude00`` exactly as a buggy or
truncating model server would: one half alone, or the two halves of one emoji in two
chunks. The reply must stream, end ``done``, be saved (U+FFFD for a lone half, the joined
character for a split pair) and replay on resume; a lone surrogate in user input is a 400.
"""

from __future__ import annotations

import json

import pytest
import requests
from fakeproviders import (
    FakeProvider,
    Reply,
    anthropic_block,
    anthropic_end,
    anthropic_start,
    ndjson,
    ollama_text,
    openai_chunk,
    openai_text,
)
from sseclient import open_stream, post_chat, text_of, types_of

from odysseus.events import Event
from odysseus.llm.text_repair import repair_text, repair_value, repaired

EMOJI = "\U0001f600"
#: (pieces the model sends, the text the user must get)
CASES = {
    "lone-high": (["A\ud83dB"], "A\ufffdB"),
    "lone-low": (["\ude00end"], "\ufffdend"),
    "split-pair": (["X\ud83d", "\ude00Y"], f"X{EMOJI}Y"),
    "split-pair-alone": (["\ud83d", "\ude00"], EMOJI),
    "high-at-the-end": (["Z\ud83d"], "Z\ufffd"),
    "high-then-text": (["Q\ud83d", "R"], "Q\ufffdR"),
}


def openai_reply(pieces):
    return Reply(chunks=openai_text(*pieces))


def ollama_reply(pieces):
    return Reply(chunks=ollama_text(*pieces), content_type="application/x-ndjson")


def anthropic_reply(pieces):
    return Reply(chunks=anthropic_start() + anthropic_block(0, "text", list(pieces)) + anthropic_end())


ADAPTERS = {"oa/m": ("openai", openai_reply), "ol/m": ("ollama", ollama_reply), "an/m": ("anthropic", anthropic_reply)}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A real server with one provider per adapter kind, each a local fake."""
    from liveserver import LiveServer

    fakes = {route: FakeProvider() for route in ADAPTERS}
    directory = tmp_path_factory.mktemp("badtext")
    tables = "".join(
        f'''
[[providers]]
name = "{route.split("/")[0]}"
kind = "{kind}"
base_url = "{fakes[route].url}"
models = ["m"]
context_length = 8192
'''
        for route, (kind, _) in ADAPTERS.items()
    )  # a known window: no /api/show probe takes a scripted reply
    config = directory / "odysseus.toml"
    config.write_text('default_model = "oa/m"\nevict_grace = 60\n' + tables)
    server = LiveServer(str(directory / "data"), {"ODYSSEUS_CONFIG": str(config)}).start()
    yield server, fakes
    server.stop()
    for fake in fakes.values():
        fake.close()


def saved_reply(base, session_id):
    messages = requests.get(f"{base}/api/sessions/{session_id}/messages", timeout=10).json()["messages"]
    return [m for m in messages if m["role"] == "assistant"][-1]


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("route", sorted(ADAPTERS))
def test_reply_with_bad_surrogates_streams_saves_and_resumes(world, route, case):
    server, fakes = world
    pieces, expected = CASES[case]
    fakes[route].script(ADAPTERS[route][1](pieces))
    stream = post_chat(server.url, "hi", model=route)
    assert stream.status_code == 200
    frames = stream.events()
    assert types_of(frames)[-1] == "[DONE]", frames
    assert text_of(frames) == expected
    session_id = stream.headers["X-Odysseus-Session-Id"]
    saved = saved_reply(server.url, session_id)
    assert saved["content"] == expected and not saved["metadata"].get("error")
    status = requests.get(f"{server.url}/api/chat/stream_status/{session_id}", timeout=10).json()
    assert status["status"] == "done"
    replay = open_stream("GET", f"{server.url}/api/chat/resume/{session_id}?after=0")
    assert replay.status_code == 200
    again = replay.events()
    assert text_of(again) == expected and types_of(again)[-1] == "[DONE]"
    # the next turn on the session still works and sends the repaired reply back to the model
    fakes[route].script(ADAPTERS[route][1](["fine"]))
    follow = post_chat(server.url, "again", model=route, session=session_id).events()
    assert text_of(follow) == "fine"
    assert expected in json.dumps(fakes[route].posts[-1].body, ensure_ascii=False)


def test_split_pair_in_reasoning_and_in_tool_arguments(world):
    """OpenAI reasoning_content split across chunks; surrogates inside meta fields of a chunk."""
    server, fakes = world
    fakes["oa/m"].script(
        Reply(
            chunks=[
                openai_chunk(
                    {"role": "assistant", "content": "", "reasoning_content": "think \ud83d"}, extra="\udc00x"
                ),
                openai_chunk({"reasoning_content": "\ude00 done"}),
                openai_chunk({"content": "ok"}),
                openai_chunk({}, "stop"),
                "data: [DONE]\n\n",
            ]
        )
    )
    stream = post_chat(server.url, "hi", model="oa/m")
    frames = stream.events()
    assert types_of(frames)[-1] == "[DONE]"
    assert text_of(frames, thinking=True) == f"think {EMOJI} done" and text_of(frames) == "ok"
    saved = saved_reply(server.url, stream.headers["X-Odysseus-Session-Id"])
    assert saved["thinking"] == f"think {EMOJI} done"


def test_error_message_with_a_lone_surrogate_reaches_the_client(world):
    server, fakes = world
    fakes["ol/m"].script(
        Reply(
            chunks=ollama_text("part")[:1] + [ndjson({"error": "bad \ud83d thing"})],
            content_type="application/x-ndjson",
        )
    )
    stream = post_chat(server.url, "hi", model="ol/m")
    frames = stream.events()
    errors = [f["data"] for f in frames if f.get("event") == "error"]
    assert len(errors) == 1 and "bad \ufffd thing" in errors[0]["error"]
    saved = saved_reply(server.url, stream.headers["X-Odysseus-Session-Id"])
    assert saved["content"] == "part"


def test_model_listing_with_lone_surrogates(fake):
    from provider_helpers import make

    fake.get_json["/v1/models"] = {"data": [{"id": "m\ud83d"}, {"id": "ok"}]}
    assert make("openai", fake.url + "/v1").list_models() == ["m\ufffd", "ok"]


# ---------------------------------------------------------------- user input


@pytest.mark.parametrize(
    "method, path, raw",
    [
        ("POST", "/api/chat_stream", '{"message": "hi \\ud83d"}'),
        ("POST", "/api/chat_stream", '{"message": "\\ude00"}'),
        ("POST", "/api/chat_stream", '{"message": "hi", "client_message_id": "c\\ud800"}'),
        ("POST", "/api/chat_stream", '{"message": "hi", "\\ud83d": 1}'),
        ("POST", "/api/chat_stream", '{"message": "hi", "nested": {"deep": ["ok", "\\udfff"]}}'),
        ("POST", "/api/sessions", '{"title": "t\\ud83d"}'),
        ("POST", "/api/agent/chat/stream", '{"message": "hi \\ud83d"}'),
    ],
)
def test_lone_surrogate_in_user_input_is_400(app, client, method, path, raw):
    from test_bad_input import _counts

    before = _counts(app)
    response = client.open(path, method=method, data=raw, content_type="application/json")
    assert response.status_code == 400
    assert "surrogate" in response.get_json()["error"]
    assert _counts(app) == before


def test_a_valid_pair_in_user_input_is_fine(client):
    response = client.post("/api/sessions", data='{"title": "t\\ud83d\\ude00"}', content_type="application/json")
    assert response.status_code == 201 and response.get_json()["title"] == f"t{EMOJI}"


def test_lone_surrogate_in_a_message_edit_is_400(app, client):
    store = app.extensions["odysseus.store"]
    session = store.sessions.create("local")
    message_id = store.messages.add("local", session["id"], "user", "hello")
    response = client.patch(
        f"/api/messages/{message_id}", data='{"content": "x\\udc00"}', content_type="application/json"
    )
    assert response.status_code == 400
    assert store.messages.get("local", message_id)["content"] == "hello"


# ---------------------------------------------------------------- the repair itself


def test_repair_text_and_value():
    assert repair_text("plain") == "plain"
    assert repair_text("a\ud83d\ude00b\udc00") == f"a{EMOJI}b\ufffd"
    value = {"k\ud83d": ["x", {"y": "\ude00"}], "n": 1}
    assert repair_value(value) == {"k\ufffd": ["x", {"y": "\ufffd"}], "n": 1}
    clean = {"a": ["b", {"c": "d"}]}
    assert repair_value(clean) is clean


def test_repaired_holds_a_high_half_per_channel_and_flushes_before_finish():
    events = [
        Event("delta", {"delta": "a\ud83d"}),
        Event("delta", {"delta": "t\ud83d", "thinking": True}),
        Event("provider_meta", {"fields": {"x": "\ud83d"}}),
        Event("delta", {"delta": "\ude00b"}),
        Event("delta", {"delta": "\ude00", "thinking": True}),
        Event("delta", {"delta": "c\udbff"}),
        Event("finish", {"reason": "stop"}),
    ]
    out = list(repaired(iter(events)))
    content = "".join(e.data["delta"] for e in out if e.type == "delta" and not e.data.get("thinking"))
    thinking = "".join(e.data["delta"] for e in out if e.type == "delta" and e.data.get("thinking"))
    assert content == f"a{EMOJI}bc\ufffd" and thinking == f"t{EMOJI}"
    assert out[-1].type == "finish" and out[-2].data == {"delta": "\ufffd"}
    meta = next(e for e in out if e.type == "provider_meta")
    assert meta.data == {"fields": {"x": "\ufffd"}}
    for event in out:  # everything is encodable as UTF-8 now
        json.dumps(event.data, ensure_ascii=False).encode("utf-8")


def test_search_results_with_lone_surrogates_are_repaired():
    from searxng import searxng
    from test_tools_web import ctx

    from odysseus.tools.web import web_search

    with searxng([{"title": "T\ud83d", "url": "https://example.com/x", "content": "snip \ude00pet"}]) as base:
        result = web_search({"query": "q"}, ctx(WEB_SEARCH_BACKEND="searxng", SEARXNG_URL=base))
    assert result.events[0].data["data"] == [
        {"title": "T\ufffd", "url": "https://example.com/x", "snippet": "snip \ufffdpet"}
    ]
    result.output.encode("utf-8")


def test_tool_call_arguments_with_split_and_lone_surrogates(fake):
    from provider_helpers import collect, make, tool_calls

    call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "web_search", "arguments": ""}}
    pieces = ['{"query": "', "smile \ud83d", '\ude00 and \udc00", "n": "\\ud83d"}']
    chunks = [openai_chunk({"role": "assistant", "tool_calls": [call]})]
    chunks += [openai_chunk({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}) for p in pieces]
    chunks += [openai_chunk({}, "tool_calls"), "data: [DONE]\n\n"]
    fake.script(Reply(chunks=chunks))
    events, error = collect(make("openai", fake.url + "/v1"))
    assert error is None
    assert tool_calls(events)[0]["arguments"] == {"query": f"smile {EMOJI} and \ufffd", "n": "\ufffd"}


def test_agent_projection_streams_the_repaired_text(world):
    server, fakes = world
    fakes["oa/m"].script(openai_reply(["agent \ud83d", "\ude00 ok \udfff"]))
    stream = open_stream("POST", server.url + "/api/agent/chat/stream", json={"message": "hi", "model": "oa/m"})
    frames = stream.events()
    names = [f["event"] for f in frames]
    assert names[-1] == "close" and "done" in names and "error" not in names
    assert "".join(f["data"]["content"] for f in frames if f["event"] == "chunk") == f"agent {EMOJI} ok \ufffd"


@pytest.mark.parametrize(
    "charset, raw, expected",
    [
        ("utf-7", b"smile +2D0- end", "smile \ufffd end"),
        ("unicode_escape", b"smile \\ud83d\\ude00 and \\ud83d end", f"smile {EMOJI} and \ufffd end"),
        ("no-such-charset", b"plain \xff bytes", "plain \ufffd bytes"),
        ("hex", b"414243", "414243"),
    ],
)
def test_fetched_pages_in_hostile_charsets_have_no_lone_surrogates(charset, raw, expected):
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from test_tools_web import ctx

    from odysseus.tools.web import fetch_url

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):  # noqa: N802 - http.server naming
            self.send_response(200)
            self.send_header("Content-Type", f"text/plain; charset={charset}")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        result = fetch_url(
            {"url": f"http://127.0.0.1:{server.server_address[1]}/page"}, ctx(FETCH_ALLOWED_NETWORKS="127.0.0.1/32")
        )
    finally:
        server.shutdown()
        server.server_close()
    assert result.output.endswith(expected)
    result.output.encode("utf-8")
