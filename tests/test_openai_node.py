"""The official ``openai`` npm library against a real gunicorn server (issue 33).

Each test runs one scenario of tests/openai_node/checks.mjs with node (the library is a devDependency,
installed by ``make vendor``'s ``npm ci``) and asserts on the JSON it prints: a background stream cut
after 10 events and resumed with ``starting_after`` through the random-cut proxy, retrieve and cancel
(twice), chat completions streamed and not, function tools, ``previous_response_id``, and errors
raised as the library's own classes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from typing import Dict

import pytest
from cutproxy import CutProxy
from liveserver import ROOT, LiveServer
from openai_fakes import LONG_TEXT, WEATHER_ARGS, model_server
from test_openai_sdk import _account, _env

pytestmark = pytest.mark.slow

SCRIPT = os.path.join(ROOT, "tests", "openai_node", "checks.mjs")
NODE = shutil.which("node")


@pytest.fixture(scope="module")
def model():
    server = model_server()
    yield server
    server.close()


@pytest.fixture(scope="module")
def server(model, tmp_path_factory):
    if NODE is None or not os.path.isdir(os.path.join(ROOT, "node_modules", "openai")):
        pytest.fail("node and the openai npm package are needed (make vendor)")
    live = LiveServer(str(tmp_path_factory.mktemp("v1node")), _env(model.url)).start()
    yield live
    live.stop()


def run(scenario: str, env: Dict[str, str]) -> dict:
    """Run one scenario; its printed JSON."""
    done = subprocess.run(
        [NODE, SCRIPT, scenario],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_cut_background_stream_resumes_exactly_through_a_cutting_proxy(server):
    proxy = CutProxy(server.port, low=300, high=3000, max_cuts=25, seed=7)
    try:
        out = run("resume", {"ODY_URL": server.url, "ODY_PROXY_URL": proxy.url})
    finally:
        proxy.close()
    assert proxy.cuts > 3 and out["connections"] > 3
    assert out["numbers"] == list(range(len(out["numbers"])))
    assert out["text"] == LONG_TEXT == out["stored"]
    assert out["last"] == "response.completed"


def test_retrieve_while_running_then_cancel_twice(server):
    out = run("retrieve_and_cancel", {"ODY_URL": server.url})
    assert out["running"]["status"] == "in_progress" and LONG_TEXT.startswith(out["running"]["text"])
    assert out["cancelled"]["status"] == "cancelled" == out["again"]["status"]
    assert out["again"]["text"] == out["cancelled"]["text"] and LONG_TEXT.startswith(out["cancelled"]["text"])
    assert out["last"] == "response.cancelled" and out["streamed"] == out["cancelled"]["text"]


def test_chat_completions_stream_and_not(server):
    out = run("chat", {"ODY_URL": server.url})
    assert out["plain"] == "Echo: npm hello" and out["finish"] == "stop"
    assert out["runId"].startswith("run_")
    assert out["streamed"] == "Echo: npm stream" and out["role"] == "assistant"
    assert out["usage"] == {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}


def test_function_tools_round_trip(server):
    out = run("tools", {"ODY_URL": server.url})
    assert out["call"] == {"name": "get_weather", "call_id": "call_w1", "arguments": WEATHER_ARGS}
    assert out["answer"] == "It is foggy in Paris."
    assert out["chatCall"] == {"name": "get_weather", "finish": "tool_calls"}
    assert out["chatAnswer"] == "It is windy in Paris."


def test_previous_response_id_keeps_the_conversation(server, model):
    out = run("conversation", {"ODY_URL": server.url})
    assert out["second"] == "Echo: npm: what do I like?" and out["previous"] == out["firstId"]
    sent = model.posts[-1].body["messages"]
    assert [m["content"] for m in sent] == ["npm: I like tea", "Echo: npm: I like tea", "npm: what do I like?"]


def test_errors_are_the_librarys_own_classes(server):
    out = run("errors", {"ODY_URL": server.url})
    assert out["model"]["name"] == "NotFoundError" and out["model"]["code"] == "model_not_found"
    assert out["missing"]["name"] == "NotFoundError" and out["missing"]["status"] == 404
    assert out["tokens"]["name"] == "BadRequestError" and out["tokens"]["param"] == "max_output_tokens"
    assert out["empty"]["name"] == "BadRequestError" and out["empty"]["param"] == "input"
    assert out["after"]["name"] == "BadRequestError" and out["after"]["param"] == "starting_after"


def test_tokens_and_another_users_ids(model, tmp_path):
    live = LiveServer(str(tmp_path / "accounts"), _env(model.url, ODYSSEUS_AUTH="password")).start()
    try:
        _, alice = _account(live.url, "alice", signup=False)
        _, bob = _account(live.url, "bob", signup=True)
        out = run("accounts", {"ODY_URL": live.url, "ODY_KEY": alice, "ODY_OTHER_KEY": bob})
    finally:
        live.stop()
    assert out["mine"] == "Echo: npm secret"
    assert out["otherRetrieve"]["name"] == out["otherCancel"]["name"] == "NotFoundError"
    assert out["otherContinue"]["name"] == "BadRequestError"
    assert out["wrongKey"]["name"] == "AuthenticationError" and out["wrongKey"]["status"] == 401
