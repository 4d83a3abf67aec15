"""Compare loses nothing (issue 35 item 1): the question is stored once, each pane's reply (whole, or
partial when its fetch was cancelled) once, as alternatives of the question; the user's system
prompt, memories and attachments reach every pane; ids of other sessions or users are 404.

Streaming against real gunicorn over a real socket; the validation in-process."""

from __future__ import annotations

import time

import pytest
import requests
from fakeproviders import FakeProvider, Reply, openai_text
from sseclient import post_chat, text_of

from odysseus import create_app
from odysseus.llm.base import ProviderConfig

PASSWORD = "correct horse battery"


def _provider(slow_words: int = 0) -> FakeProvider:
    def choose(record):
        name = record.body.get("model")
        count = slow_words or 3
        pieces = [f"{name} says " if i == 0 else f"word{i} " for i in range(count)]
        return Reply(chunks=openai_text(*pieces), delay=0.2 if slow_words else 0.0)

    server = FakeProvider(chooser=choose)
    server.get_json["/v1/models"] = {"object": "list", "data": [{"id": "m1"}, {"id": "m2"}]}
    return server


@pytest.fixture
def provider():
    server = _provider()
    yield server
    server.close()


@pytest.fixture
def live_app(server_factory, provider):
    server = server_factory(
        {"OPENAI_BASE_URL": provider.url + "/v1", "OPENAI_API_KEY": "sk-test", "OPENAI_MODEL": "m1"}
    )
    models = [m["id"] for m in requests.get(server.url + "/api/models", timeout=10).json()["models"]]
    server.ids = sorted(m for m in models if m.endswith(("/m1", "/m2")))
    assert len(server.ids) == 2, models
    return server


def _start(base, message, models, **fields):
    response = requests.post(
        base + "/api/compare/start", json={"message": message, "models": models, **fields}, timeout=10
    )
    assert response.status_code == 201, response.text
    return response.json()


def _messages(base, session):
    return requests.get(f"{base}/api/sessions/{session}/messages", timeout=10).json()["messages"]


def _chat_posts(provider):
    return [p for p in provider.posts if p.path.endswith("/chat/completions")]


def test_question_and_each_reply_are_saved_once_as_alternatives(live_app, provider):
    base, (m1, m2) = live_app.url, live_app.ids
    requests.patch(base + "/api/user/settings", json={"system_prompt": "Answer like a pirate."}, timeout=10)
    requests.post(base + "/api/memory", json={"text": "The user's cat is called Biscuit", "pinned": True}, timeout=10)
    upload = requests.post(
        base + "/api/upload", files=[("files", ("notes.txt", b"The secret word is PAPAYA.", "text/plain"))], timeout=10
    ).json()["files"][0]
    started = _start(base, "which is best?", [m1, m2], attachments=[upload["id"]])
    session, question = started["session_id"], started["message_id"]
    texts = {}
    for model in (m1, m2):
        stream = post_chat(
            base,
            "ignored: the stored question answers",
            mode="compare",
            model=model,
            session=session,
            compare_of=question,
        )
        assert stream.headers["X-Odysseus-Session-Id"] == session
        reply_id = int(stream.headers["X-Odysseus-Message-Id"])
        frames = stream.events()
        assert any(f.get("data", {}).get("type") == "memories_used" for f in frames if isinstance(f.get("data"), dict))
        texts[model] = (reply_id, text_of(frames))
    # Each pane's model got the system prompt, the memory and the stored question.
    for post in _chat_posts(provider):
        sent = post.body["messages"]
        assert sent[0] == {"role": "system", "content": "Answer like a pirate."}
        assert "Biscuit" in " ".join(str(m.get("content")) for m in sent)  # the memory
        assert "PAPAYA" in " ".join(str(m.get("content")) for m in sent)  # the question's attachment
        assert sent[-1]["content"] == "which is best?"
    rows = _messages(base, session)
    user = [m for m in rows if m["role"] == "user"]
    assert [m["content"] for m in user] == ["which is best?"] and user[0]["id"] == question
    assert [c["name"] for c in user[0]["metadata"]["attachments"]] == ["notes.txt"]  # the chip, once
    replies = [m for m in rows if m["role"] == "assistant"]
    assert len(replies) == 1  # the selected branch shows one of them...
    assert replies[0]["branch"]["count"] == 2  # ...with the other as its alternative: the `< i/n >` pager
    ids = replies[0]["branch"]["ids"]
    assert sorted(ids) == sorted(r for r, _ in texts.values())
    for model, (reply_id, text) in texts.items():
        requests.put(
            f"{base}/api/sessions/{session}/branch", json={"message_id": reply_id}, timeout=10
        ).raise_for_status()
        shown = [m for m in _messages(base, session) if m["role"] == "assistant"][0]
        assert shown["id"] == reply_id and shown["content"] == text and text.startswith(model.split("/")[-1] + " says")
        assert shown["metadata"]["status"] == "done" and shown["metadata"]["compare_model"] == model
    # Saved once: a second pane for the same model is refused and stores nothing.
    again = requests.post(
        base + "/api/chat_stream",
        json={"message": "x", "mode": "compare", "model": m1, "session": session, "compare_of": question},
        timeout=10,
    )
    assert again.status_code == 409
    assert len(_messages(base, session)) == 2
    # "Keep this" is a branch selection: the next chat turn continues from the kept reply.
    kept = texts[m1][0]
    requests.put(f"{base}/api/sessions/{session}/branch", json={"message_id": kept}, timeout=10).raise_for_status()
    post_chat(base, "and now?", session=session, model=m2).events()
    sent = _chat_posts(provider)[-1].body["messages"]
    assert [m["content"] for m in sent if m["role"] != "system"][-3:] == ["which is best?", texts[m1][1], "and now?"]


def test_a_cancelled_pane_saves_its_partial_reply_once(server_factory):
    provider = _provider(slow_words=60)
    try:
        server = server_factory(
            {"OPENAI_BASE_URL": provider.url + "/v1", "OPENAI_API_KEY": "sk-test", "OPENAI_MODEL": "m1"}
        )
        ids = sorted(
            m["id"]
            for m in requests.get(server.url + "/api/models", timeout=10).json()["models"]
            if m["id"].endswith(("/m1", "/m2"))
        )
        started = _start(server.url, "slow please", ids)
        stream = post_chat(
            server.url,
            "slow please",
            mode="compare",
            model=ids[0],
            session=started["session_id"],
            compare_of=started["message_id"],
        )
        reply_id = int(stream.headers["X-Odysseus-Message-Id"])
        seen = ""
        for frame in stream.frames():
            if isinstance(frame.get("data"), dict) and "delta" in frame["data"]:
                seen += frame["data"]["delta"]
                if seen.count("word") >= 4:
                    break
        stream.close()  # the page's fetch is cancelled (Stop, a reload, a closed tab)
        record = _chat_posts(provider)[-1]
        assert record.finished.wait(10) and record.disconnected_at is not None  # the provider was let go
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            shown = [m for m in _messages(server.url, started["session_id"]) if m["role"] == "assistant"]
            if shown and shown[0]["content"].startswith(seen) and shown[0]["metadata"]["status"] == "stopped":
                break
            time.sleep(0.1)
        assert shown[0]["id"] == reply_id
        assert shown[0]["content"].startswith(seen) and "word59" not in shown[0]["content"]
        assert shown[0]["metadata"]["status"] == "stopped" and shown[0]["branch"]["count"] == 1
    finally:
        provider.close()


# ---------------------------------------------------------------- validation, other users (in-process)


@pytest.fixture
def two_users(tmp_path):
    """A password-mode app with two signed-in users (test clients) and two models (a fake provider)."""
    provider = _provider()
    app = create_app(
        {
            "DATA_DIR": str(tmp_path),
            "AUTH": "password",
            "PROVIDERS": [
                ProviderConfig(name="fake", kind="openai", base_url=provider.url + "/v1", models=["m1", "m2"])
            ],
            "LOGIN_BASE_DELAY": 0.0,
        }
    )
    accounts = app.extensions["odysseus.accounts"]
    clients = []
    for name in ("alice", "bob"):
        accounts.create_user(name, PASSWORD, is_admin=False)
        client = app.test_client()
        login = client.post("/api/auth/login", json={"username": name, "password": PASSWORD})
        assert login.status_code == 200, login.json
        client.environ_base["HTTP_X_ODYSSEUS_CSRF"] = login.json["csrf_token"]
        clients.append(client)
    ids = sorted(m["id"] for m in clients[0].get("/api/models").json["models"] if m["id"].endswith(("/m1", "/m2")))
    yield app, clients, ids
    app.extensions["odysseus.runs"].close()
    provider.close()


def test_other_users_sessions_and_questions_are_404(two_users):
    _, (alice, bob), ids = two_users
    started = alice.post("/api/compare/start", json={"message": "mine", "models": ids})
    assert started.status_code == 201, started.json
    session, question = started.json["session_id"], started.json["message_id"]
    pane = {"message": "x", "mode": "compare", "model": ids[0], "session": session, "compare_of": question}
    assert bob.post("/api/chat_stream", json=pane).status_code == 404
    assert (
        bob.post("/api/compare/start", json={"message": "in yours", "models": ids, "session": session}).status_code
        == 404
    )
    # bob's own session with alice's question id: still 404
    own = bob.post("/api/compare/start", json={"message": "mine too", "models": ids}).json
    assert bob.post("/api/chat_stream", json=dict(pane, session=own["session_id"])).status_code == 404
    # nothing of bob's landed in alice's session
    assert [m["content"] for m in alice.get(f"/api/sessions/{session}/messages").json["messages"]] == ["mine"]


@pytest.mark.parametrize(
    "fields, status",
    [
        ({"models": "m1"}, 400),
        ({"models": ["only-one"]}, 400),
        ({"models": [1, 2]}, 400),
        ({"models": ["same", "same"]}, 400),
        ({"models": ["m"] * 9}, 400),
        ({"message": ""}, 400),
        ({"message": "a\x00b"}, 400),
        ({"models": ["", " "]}, 400),
        ({"session": "s_missing"}, 404),
        ({"attachments": ["u_missing"]}, 400),
    ],
)
def test_a_bad_start_is_refused_and_stores_nothing(two_users, fields, status):
    _, (alice, _), ids = two_users
    body = {"message": "question", "models": ids, **fields}
    response = alice.post("/api/compare/start", json=body)
    assert response.status_code == status, response.json
    assert alice.get("/api/sessions").json["sessions"] == []


def test_a_bad_pane_is_refused(two_users):
    _, (alice, _), ids = two_users
    started = alice.post("/api/compare/start", json={"message": "q", "models": ids}).json
    pane = {"message": "x", "mode": "compare", "model": ids[0], "session": started["session_id"]}
    assert alice.post("/api/chat_stream", json=dict(pane, compare_of="1")).status_code == 400
    assert alice.post("/api/chat_stream", json=dict(pane, compare_of=True)).status_code == 400
    assert (
        alice.post("/api/chat_stream", json=dict(pane, compare_of=started["message_id"], session=None)).status_code
        == 400
    )
    # a model the comparison did not name
    other = alice.post(
        "/api/chat_stream", json=dict(pane, compare_of=started["message_id"], model="demo/odysseus-demo")
    )
    assert other.status_code == 400
    # a message that is not a comparison's question
    chat = alice.post("/api/chat_stream", json={"message": "plain", "session": started["session_id"], "model": ids[0]})
    chat.get_data()
    plain = [
        m
        for m in alice.get(f"/api/sessions/{started['session_id']}/messages").json["messages"]
        if m["content"] == "plain"
    ]
    assert alice.post("/api/chat_stream", json=dict(pane, compare_of=plain[0]["id"])).status_code == 404


def test_a_pane_refused_before_it_streamed_can_be_opened_again(two_users):
    from odysseus.store import compare_replies

    app, (alice, _), ids = two_users
    started = alice.post("/api/compare/start", json={"message": "q", "models": ids}).json
    session, question = started["session_id"], started["message_id"]
    store = app.extensions["odysseus.store"]
    with store.locked.read() as db:
        owner = db.execute("select owner from sessions where id = ?", [session]).fetchone()[0]
    opened = compare_replies.open_pane(store.locked, owner, session, question, ids[0])
    compare_replies.discard_pane(store.locked, owner, opened["reply_id"])  # what a 429 on the response does
    assert [m["content"] for m in alice.get(f"/api/sessions/{session}/messages").json["messages"]] == ["q"]
    again = compare_replies.open_pane(store.locked, owner, session, question, ids[0])
    assert again["reply_id"]  # no 409: the refused one is gone
    # a reply that streamed something is never discarded
    compare_replies.save_pane(store.locked, owner, again["reply_id"], ids[0], "partial", "", "stopped")
    compare_replies.discard_pane(store.locked, owner, again["reply_id"])
    assert [m["content"] for m in alice.get(f"/api/sessions/{session}/messages").json["messages"]] == ["q", "partial"]
