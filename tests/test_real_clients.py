"""Real, independently written SSE clients (``httpx-sse``, ``sseclient-py``) against a real gunicorn
server through a proxy that cuts connections at random points, across a run switch on one session:
the text each client assembles equals the model's text, with no gap and no duplicate (issue 12).

Each client behaves as its library's users write it: keep the last ``id``, reconnect with
``Last-Event-ID`` (a dropped ``POST /api/chat_stream`` is retried with the same body and
``client_message_id``), and stop when the server answers 204.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from typing import Callable, List, Optional, Tuple

import httpx
import pytest
import requests
from cutproxy import CutProxy
from httpx_sse import connect_sse

from odysseus.llm.demo import demo_reply


def _sseclient_py():
    """The PyPI package ``sseclient-py`` (its module name, ``sseclient``, is shadowed by tests/sseclient.py)."""
    for entry in sys.path:
        path = os.path.join(entry, "sseclient", "__init__.py")
        if entry and os.path.isfile(path):
            spec = importlib.util.spec_from_file_location("sseclient_py", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module
    pytest.fail("sseclient-py is not installed (pip install -e '.[test]')")


sseclient = _sseclient_py()
ATTEMPTS = 300  # reconnects per stream, at most (the proxy stops cutting after its max_cuts)

#: one received event: (id, event name, data text)
Received = Tuple[Optional[str], str, str]


def _httpx_once(
    method: str, url: str, body: Optional[dict], last_id: Optional[str], got: Callable[[Received], None]
) -> bool:
    """One connection with httpx-sse; True when the server answered 204 (nothing more to come)."""
    headers = {"Last-Event-ID": last_id} if last_id else {}
    with httpx.Client(timeout=httpx.Timeout(30.0)) as client:
        with connect_sse(client, method, url, json=body, headers=headers) as source:
            if source.response.status_code == 204:
                return True
            source.response.raise_for_status()
            for sse in source.iter_sse():
                got((sse.id or None, sse.event, sse.data))
    return False


def _sseclient_once(
    method: str, url: str, body: Optional[dict], last_id: Optional[str], got: Callable[[Received], None]
) -> bool:
    """One connection with sseclient-py over a requests stream; True on 204."""
    headers = {"Last-Event-ID": last_id} if last_id else {}
    response = requests.request(method, url, json=body, headers=headers, stream=True, timeout=30)
    try:
        if response.status_code == 204:
            return True
        response.raise_for_status()
        for event in sseclient.SSEClient(response).events():
            got((event.id, event.event, event.data))
    finally:
        response.close()
    return False


CLIENTS = {
    "httpx-sse": (_httpx_once, (httpx.TransportError,)),
    "sseclient-py": (_sseclient_once, (requests.RequestException, ValueError)),
}


def follow(
    client: str, method: str, url: str, body: Optional[dict], last_id: Optional[str]
) -> Tuple[List[Received], Optional[str]]:
    """Read a stream to its end the way an SSE client does, reconnecting after every cut; (events, last id)."""
    once, errors = CLIENTS[client]
    events: List[Received] = []

    def got(item: Received) -> None:
        nonlocal last_id
        if not item[2] and not item[0]:
            return  # httpx-sse dispatches the data-less "retry:" block; EventSource and sseclient-py do not
        events.append(item)
        if item[0]:
            last_id = item[0]

    for _ in range(ATTEMPTS):
        try:
            if once(method, url, body, last_id, got):
                return events, last_id
        except errors:
            continue
    raise AssertionError(f"{client}: no 204 after {ATTEMPTS} connections")


def chat_text(events: List[Received]) -> str:
    """The reply text from chat-projection events (reasoning deltas left out)."""
    text = []
    for _, name, data in events:
        if name == "message" and data.startswith("{"):
            payload = json.loads(data)
            if "delta" in payload and not payload.get("thinking"):
                text.append(payload["delta"])
    return "".join(text)


def agent_text(events: List[Received]) -> str:
    """The reply text from agent-projection ``chunk`` events."""
    return "".join(json.loads(data)["content"] for _, name, data in events if name == "chunk")


def assert_no_duplicate(events: List[Received]) -> None:
    ids = [int(i) for i, _, _ in events if i]
    assert ids == sorted(ids) and len(ids) == len(set(ids)), f"ids repeat or go back: {ids}"


@pytest.fixture
def cut_server(server_factory):
    server = server_factory(
        {"ODYSSEUS_DEMO_TOKEN_DELAY": "0.004", "ODYSSEUS_HEARTBEAT_INTERVAL": "0.5", "ODYSSEUS_EVICT_GRACE": "60"}
    )
    proxy = CutProxy(server.port, seed=len(server.url))
    yield server, proxy
    proxy.close()


@pytest.mark.parametrize("client", list(CLIENTS))
def test_real_client_through_random_cuts_across_a_run_switch(cut_server, client):
    server, proxy = cut_server
    session_id = requests.post(server.url + "/api/sessions", json={"title": client}, timeout=10).json()["id"]
    first, second = f"first run for {client}", f"second run for {client}"

    # run 1: the POST itself is cut; the client retries it with the same client_message_id + Last-Event-ID
    body = {"message": first, "session_id": session_id, "client_message_id": f"cm-{client}-1"}
    run1, last_id = follow(client, "POST", proxy.url + "/api/chat_stream", body, None)
    assert_no_duplicate(run1)
    assert chat_text(run1) == demo_reply(first)
    assert [d for _, _, d in run1].count("[DONE]") == 1

    # run 2 on the same session, started elsewhere; the client resumes the session with its run-1 cursor
    starter = requests.post(
        server.url + "/api/chat_stream", json={"message": second, "session_id": session_id}, stream=True, timeout=30
    )
    run_id = starter.headers["X-Odysseus-Run-Id"]
    starter.close()
    run2, last_id2 = follow(client, "GET", f"{proxy.url}/api/chat/resume/{session_id}", None, last_id)
    assert_no_duplicate(run1 + run2)  # ids keep increasing across the run switch
    assert chat_text(run2) == demo_reply(second)

    # the agent projection of run 2, attached by id through the same cuts (?after=0, header wins later)
    agent, _ = follow(client, "GET", f"{proxy.url}/api/agent/chat/stream/attach?run_id={run_id}&after=0", None, None)
    assert_no_duplicate(agent)
    assert agent_text(agent) == demo_reply(second)
    assert [name for _, name, _ in agent][:2] == ["run_started", "start"] and agent[-1][1] == "close"
    assert proxy.cuts > 5, "the proxy should have cut the streams many times"
