"""The official ``openai`` Python library against a real gunicorn server (issue 33).

A client we did not write drives /v1: background streams cut after N events and resumed with
``starting_after`` through a proxy that cuts connections at random, retrieve while running and after,
cancel mid-stream (and again), chat completions streamed and not, a function tool round trip,
``previous_response_id``, and errors raised as the SDK's own exception classes.
"""

from __future__ import annotations

import time
from typing import List, Optional, Tuple

import openai
import pytest
import requests
from cutproxy import CutProxy
from liveserver import LiveServer, free_port
from openai_fakes import LONG_TEXT, WEATHER_ARGS, model_server

pytestmark = pytest.mark.slow

MODEL = "openai/m"
TERMINAL = {"response.completed", "response.incomplete", "response.failed", "response.cancelled"}


def _env(model_url: str, **extra: str) -> dict:
    return {
        "OPENAI_BASE_URL": model_url + "/v1",
        "OPENAI_API_KEY": "sk-test",
        "ODYSSEUS_HEARTBEAT_INTERVAL": "0.5",
        **extra,
    }


@pytest.fixture(scope="module")
def model():
    server = model_server()
    yield server
    server.close()


@pytest.fixture(scope="module")
def server(model, tmp_path_factory):
    live = LiveServer(str(tmp_path_factory.mktemp("v1")), _env(model.url)).start()
    yield live
    live.stop()


def _client(url: str, **options) -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key="any-key-works-without-accounts", **options)


def _read(stream, events: list) -> bool:
    """Read ``stream`` into ``events`` until its terminal event (True) or until the connection ends (False)."""
    try:
        for event in stream:
            events.append(event)
            if event.type in TERMINAL:
                return True
    except openai.APIConnectionError:
        pass
    return False


def _text(events: list) -> str:
    return "".join(e.delta for e in events if e.type == "response.output_text.delta")


def _resume(client: openai.OpenAI, response_id: str, events: list, attempts: int = 200) -> int:
    """Resume after the last event held until the terminal event; the number of connections it took."""
    for attempt in range(1, attempts + 1):
        try:
            stream = client.responses.retrieve(response_id, stream=True, starting_after=events[-1].sequence_number)
        except openai.APIConnectionError:
            continue
        if _read(stream, events):
            return attempt
    raise AssertionError(f"no terminal event after {attempts} connections")


def _assert_numbered(events: list) -> None:
    numbers = [e.sequence_number for e in events]
    assert numbers == list(range(len(numbers))), numbers[:50]  # from 0, no gap, no duplicate


def test_background_stream_cut_after_n_events_resumes_exactly_through_a_cutting_proxy(server):
    direct = _client(server.url)
    events: list = []
    stream = direct.responses.create(model=MODEL, input="long story please", background=True, stream=True)
    for event in stream:
        events.append(event)
        if len(events) == 12:
            break
    stream.close()  # the client goes away after 12 events; the response goes on
    response_id = events[0].response.id
    assert events[0].type == "response.created" and response_id.startswith("resp_")
    proxy = CutProxy(server.port, low=300, high=3000, max_cuts=25, seed=33)
    try:
        connections = _resume(_client(proxy.url, max_retries=0), response_id, events)
    finally:
        proxy.close()
    assert connections > 3 and proxy.cuts > 3  # it was really cut, more than once
    _assert_numbered(events)
    assert _text(events) == LONG_TEXT
    assert events[-1].type == "response.completed"
    assert events[-1].response.output[-1].content[0].text == LONG_TEXT
    assert direct.responses.retrieve(response_id).output_text == LONG_TEXT


def test_a_stream_that_is_not_background_goes_on_when_the_client_leaves_and_resumes_the_same_way(server):
    client = _client(server.url)
    events: list = []
    _read_some(client.responses.create(model=MODEL, input="long, not in the background", stream=True), events, 15)
    response = events[0].response
    assert response.background is False
    assert _resume(client, response.id, events, attempts=2) == 1
    _assert_numbered(events)
    assert _text(events) == LONG_TEXT and events[-1].type == "response.completed"


def test_retrieve_while_it_runs_and_after_it_ends(server):
    client = _client(server.url)
    created = client.responses.create(model=MODEL, input="slow please", background=True)
    assert created.status in ("queued", "in_progress") and created.background is True
    deadline = time.monotonic() + 10
    running = client.responses.retrieve(created.id)
    while not running.output and time.monotonic() < deadline:
        time.sleep(0.1)
        running = client.responses.retrieve(created.id)
    assert running.status == "in_progress"
    partial = running.output[-1].content[0].text
    assert partial and LONG_TEXT.startswith(partial) and partial != LONG_TEXT
    client.responses.cancel(created.id)  # (a slow model: do not wait 20 s for it)
    quick = client.responses.create(model=MODEL, input="long again", background=True)
    while client.responses.retrieve(quick.id).status == "in_progress" and time.monotonic() < deadline + 10:
        time.sleep(0.1)
    done = client.responses.retrieve(quick.id)
    assert done.status == "completed" and done.output_text == LONG_TEXT
    assert done.usage.input_tokens == 11 and done.usage.output_tokens == 7 and done.usage.total_tokens == 18


def test_cancel_mid_stream_stops_the_provider_saves_the_partial_once_and_is_idempotent(server, model):
    client = _client(server.url)
    events: list = []
    stream = client.responses.create(model=MODEL, input="slow cancel me", background=True, stream=True)
    for event in stream:
        events.append(event)
        if sum(e.type == "response.output_text.delta" for e in events) >= 3:
            break
    response_id = events[0].response.id
    posts_before = len(model.posts)
    record = next(r for r in reversed(model.posts) if "cancel me" in str(r.body))
    started = time.monotonic()
    cancelled = client.responses.cancel(response_id)
    assert cancelled.status == "cancelled"
    assert record.finished.wait(5)
    assert record.disconnected_at is not None and record.disconnected_at - started < 1.0  # provider stopped < 1 s
    again = client.responses.cancel(response_id)
    assert again.status == "cancelled" and again.output_text == cancelled.output_text
    assert LONG_TEXT.startswith(cancelled.output_text) and cancelled.output_text
    _read(stream, events)  # the first stream, still open, ends with the cancelled state
    assert events[-1].type == "response.cancelled"
    assert _text(events) == cancelled.output_text
    assert len(model.posts) == posts_before  # nothing generated again
    listing = requests.get(server.url + "/api/sessions?origin=api").json()["sessions"]
    session = next(s for s in listing if "cancel me" in s["title"])
    messages = requests.get(server.url + f"/api/sessions/{session['id']}/messages").json()["messages"]
    replies = [m for m in messages if m["role"] == "assistant"]
    assert len(replies) == 1 and replies[0]["content"] == cancelled.output_text  # saved once
    assert replies[0]["metadata"]["stop_reason"] == "cancelled"


def test_chat_completions_stream_and_not(server):
    client = _client(server.url)
    completion = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi there"}])
    assert completion.choices[0].message.content == "Echo: hi there"
    assert completion.choices[0].finish_reason == "stop" and completion.usage.total_tokens == 18
    raw = client.chat.completions.with_raw_response.create(model=MODEL, messages=[{"role": "user", "content": "raw"}])
    assert raw.headers["X-Odysseus-Run-Id"].startswith("run_")
    chunks = list(
        client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "system", "content": "be brief"}, {"role": "user", "content": "stream it"}],
            stream=True,
            stream_options={"include_usage": True},
            max_tokens=50,
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Echo: stream it"
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 7
    assert len({c.id for c in chunks}) == 1 and chunks[0].id.startswith("chatcmpl-")


def test_function_tools_round_trip_on_both_apis(server, model):
    client = _client(server.url)
    tools = [
        {
            "type": "function",
            "name": "get_weather",
            "description": "the weather in a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        }
    ]
    first = client.responses.create(model=MODEL, input="what is the weather?", tools=tools)
    calls = [item for item in first.output if item.type == "function_call"]
    assert len(calls) == 1 and calls[0].name == "get_weather" and calls[0].call_id == "call_w1"
    import json

    assert json.loads(calls[0].arguments) == WEATHER_ARGS
    second = client.responses.create(
        model=MODEL,
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": "call_w1", "output": "sunny"}],
        tools=tools,
    )
    assert second.output_text == "It is sunny in Paris."
    sent = model.posts[-1].body["messages"]
    assert sent[-2]["tool_calls"][0]["id"] == "call_w1" and sent[-1] == {
        "role": "tool",
        "tool_call_id": "call_w1",
        "content": "sunny",
    }
    chat_tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    messages = [{"role": "user", "content": "weather in chat?"}]
    asked = client.chat.completions.create(model=MODEL, messages=messages, tools=chat_tools)
    call = asked.choices[0].message.tool_calls[0]
    assert asked.choices[0].finish_reason == "tool_calls" and call.function.name == "get_weather"
    messages += [
        asked.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "rainy"},
    ]
    answered = client.chat.completions.create(model=MODEL, messages=messages, tools=chat_tools)
    assert answered.choices[0].message.content == "It is rainy in Paris."


def test_previous_response_id_keeps_the_conversation(server, model):
    client = _client(server.url)
    first = client.responses.create(model=MODEL, input="my name is Ada", instructions="answer briefly")
    second = client.responses.create(model=MODEL, input="what is my name?", previous_response_id=first.id)
    assert second.output_text == "Echo: what is my name?" and second.previous_response_id == first.id
    sent = model.posts[-1].body["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]  # the instructions are not carried over
    assert sent[0]["content"] == "my name is Ada" and sent[1]["content"] == "Echo: my name is Ada"
    # a fork: continuing the first response again does not see the second
    third = client.responses.create(model=MODEL, input="fork", previous_response_id=first.id)
    assert [m["content"] for m in model.posts[-1].body["messages"]] == [
        "my name is Ada",
        "Echo: my name is Ada",
        "fork",
    ]
    assert third.output_text == "Echo: fork"
    sessions = requests.get(server.url + "/api/sessions").json()["sessions"]
    assert all("Ada" not in s["title"] for s in sessions)  # kept out of the default chat list
    api = requests.get(server.url + "/api/sessions?origin=api").json()["sessions"]
    assert sum("Ada" in s["title"] for s in api) == 1  # one conversation, findable with the filter


def test_errors_raise_the_sdks_own_exception_classes(server):
    client = _client(server.url, max_retries=0)
    for model in ("agent:no_such", "workflow:nope"):
        with pytest.raises(openai.NotFoundError) as missing_model:
            client.responses.create(model=model, input="hi")
        assert missing_model.value.body["code"] == "model_not_found" and missing_model.value.body["param"] == "model"
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="agent:no_such", messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve("resp_doesnotexist")
    with pytest.raises(openai.BadRequestError) as bad:
        client.responses.create(model=MODEL, input="hi", max_output_tokens=-5)
    assert bad.value.body["param"] == "max_output_tokens"
    with pytest.raises(openai.BadRequestError) as previous:
        client.responses.create(model=MODEL, input="hi", previous_response_id="resp_nothere")
    assert previous.value.body["code"] == "previous_response_not_found"
    with pytest.raises(openai.BadRequestError):
        client.responses.retrieve("resp_x", stream=True, starting_after=-1)  # type: ignore[arg-type]
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model=MODEL, messages=[])


def _account(url: str, username: str, signup: bool) -> Tuple[requests.Session, str]:
    """A signed-in session (setup or signup) and an API token of that account."""
    browser = requests.Session()
    answer = browser.post(
        url + ("/api/auth/signup" if signup else "/api/auth/setup"), json={"username": username, "password": "pw-" * 4}
    )
    assert answer.status_code == 201, answer.text
    csrf = {"X-Odysseus-CSRF": answer.json()["csrf_token"]}
    if not signup:
        browser.post(url + "/api/auth/settings", json={"allow_signup": True}, headers=csrf).raise_for_status()
    token = browser.post(url + "/api/auth/tokens", json={"name": "sdk"}, headers=csrf)
    assert token.status_code == 201, token.text
    return browser, token.json()["token"]


def test_tokens_authenticate_and_another_users_ids_are_not_found(model, tmp_path):
    live = LiveServer(str(tmp_path / "accounts"), _env(model.url, ODYSSEUS_AUTH="password")).start()
    try:
        _, alice_key = _account(live.url, "alice", signup=False)
        _, bob_key = _account(live.url, "bob", signup=True)
        alice = openai.OpenAI(base_url=live.url + "/v1", api_key=alice_key, max_retries=0)
        bob = openai.OpenAI(base_url=live.url + "/v1", api_key=bob_key, max_retries=0)
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=live.url + "/v1", api_key="ody_not_a_token", max_retries=0).models.list()
        mine = alice.responses.create(model=MODEL, input="secret plans")
        assert mine.output_text == "Echo: secret plans"
        for call in (
            lambda: bob.responses.retrieve(mine.id),
            lambda: bob.responses.cancel(mine.id),
            lambda: bob.responses.delete(mine.id),
            lambda: bob.responses.retrieve(mine.id, stream=True),
        ):
            with pytest.raises(openai.NotFoundError):
                call()
        with pytest.raises(openai.BadRequestError):
            bob.responses.create(model=MODEL, input="continue", previous_response_id=mine.id)
        assert alice.responses.retrieve(mine.id).output_text == "Echo: secret plans"
        assert [m.id for m in alice.models.list()] == [m.id for m in bob.models.list()]
    finally:
        live.stop()


def test_a_stream_resumes_across_a_server_restart(model, tmp_path):
    data_dir, port = str(tmp_path / "restart"), free_port()
    env = _env(model.url, ODYSSEUS_SHUTDOWN_GRACE="20", ODYSSEUS_GRACEFUL_MARGIN="5")
    first: Optional[LiveServer] = LiveServer(data_dir, env, port=port).start()
    events: list = []
    try:
        client = _client(first.url, max_retries=0)
        stream = client.responses.create(model=MODEL, input="long across a restart", background=True, stream=True)
        for event in stream:
            events.append(event)
            if len(events) == 8:
                break
        stream.close()
        first.stop(timeout=30)  # graceful: the running response finishes before the worker exits
        first = None
        second = LiveServer(data_dir, env, port=port).start()
        try:
            again = _client(second.url, max_retries=0)
            _resume(again, events[0].response.id, events, attempts=5)
            _assert_numbered(events)
            assert _text(events) == LONG_TEXT and events[-1].type == "response.completed"
            stored = again.responses.retrieve(events[0].response.id)
            assert stored.status == "completed" and stored.output_text == LONG_TEXT
        finally:
            second.stop()
    finally:
        if first is not None:
            first.stop()


def _types(events: List) -> List[str]:
    return [e.type for e in events]


def _pinned(url: str, avoid: int = 0, attempts: int = 400) -> Tuple[openai.OpenAI, int]:
    """A client whose one keep-alive connection is held by a worker other than ``avoid`` (and that pid)."""
    for _ in range(attempts):
        http = openai.DefaultHttpxClient()
        pid = http.get(url + "/api/health").json()["pid"]
        if pid != avoid:
            return openai.OpenAI(base_url=url + "/v1", api_key="k", http_client=http, max_retries=0), pid
        http.close()
    raise AssertionError(f"no worker other than {avoid} answered")


def test_another_worker_retrieves_resumes_and_cancels_on_the_redis_backend(redis_server, model, tmp_path):
    directory = str(tmp_path / "redis")
    live = LiveServer(directory, {**_env(model.url), **redis_server.env(directory, workers=2)}).start(timeout=40)
    try:
        first, pid = _pinned(live.url)
        events: list = []
        stream = first.responses.create(model=MODEL, input="long on two workers", background=True, stream=True)
        _read_some(stream, events, 10)
        other, other_pid = _pinned(live.url, avoid=pid)
        assert other_pid != pid
        running = other.responses.retrieve(events[0].response.id)
        assert running.status in ("in_progress", "completed")
        _resume(other, events[0].response.id, events, attempts=3)
        _assert_numbered(events)
        assert _text(events) == LONG_TEXT and events[-1].type == "response.completed"
        slow = first.responses.create(model=MODEL, input="slow on two workers", background=True)
        deadline = time.monotonic() + 10
        while not other.responses.retrieve(slow.id).output and time.monotonic() < deadline:
            time.sleep(0.1)
        cancelled = other.responses.cancel(slow.id)  # the run is driven by the first worker
        assert cancelled.status == "cancelled" and LONG_TEXT.startswith(cancelled.output_text)
        assert first.responses.retrieve(slow.id).status == "cancelled"
    finally:
        live.stop()


def _read_some(stream, events: list, count: int) -> None:
    for event in stream:
        events.append(event)
        if len(events) == count:
            break
    stream.close()
