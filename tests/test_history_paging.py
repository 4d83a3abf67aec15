"""Long conversations: newest-first history pages, paged sessions, a model context built from the newest messages."""

from __future__ import annotations

import os
import time

import pytest
import requests
from fakeproviders import FakeProvider, Reply, openai_text
from sseclient import post_chat, text_of, types_of

from odysseus.store import Store
from odysseus.store.messages import insert_message

LONG = 1200


def fill(store: Store, owner: str, session_id: str, count: int, prefix: str = "m") -> list:
    """``count`` alternating user/assistant messages in one transaction; their ids."""
    ids = []
    with store.locked.tx() as db:
        for i in range(count):
            role = "user" if i % 2 == 0 else "assistant"
            ids.append(insert_message(db, owner, session_id, role, f"{prefix}{i}"))
    return ids


@pytest.fixture
def store(app):
    return app.extensions["odysseus.store"]


def walk_messages(client, session_id, limit=None, between=None):
    """Every page from the newest back; ``between(n)`` runs after page n (to write meanwhile)."""
    pages, before = [], None
    for n in range(10_000):
        query = [f"limit={limit}"] if limit else []
        if before is not None:
            query.append(f"before={before}")
        body = client.get(f"/api/sessions/{session_id}/messages?{'&'.join(query)}").get_json()
        pages.append(body)
        if between:
            between(n)
        if not body["has_more"]:
            return pages
        before = body["messages"][0]["id"]
    raise AssertionError("paging did not end")


@pytest.mark.slow  # measured 3 s with page size 1
@pytest.mark.parametrize("limit", [None, 1, 7, 200, 1000])
def test_pages_cover_a_long_session_without_gap_or_duplicate(client, store, limit):
    session = store.sessions.create("local")
    ids = fill(store, "local", session["id"], LONG)
    pages = walk_messages(client, session["id"], limit)
    size = limit or 200
    assert all(len(p["messages"]) == size for p in pages[:-1]) and 0 < len(pages[-1]["messages"]) <= size
    assert pages[0]["messages"][-1]["content"] == f"m{LONG - 1}"  # the first page ends with the newest
    seen = [m["id"] for page in reversed(pages) for m in page["messages"]]
    assert seen == ids  # chronological, complete, no duplicate
    for page in pages:  # each page is in order
        assert [m["id"] for m in page["messages"]] == sorted(m["id"] for m in page["messages"])


def test_messages_written_while_paging_back_neither_shift_nor_repeat(client, store):
    session = store.sessions.create("local")
    ids = fill(store, "local", session["id"], 500)
    late = []
    pages = walk_messages(
        client, session["id"], 100, between=lambda n: late.extend(fill(store, "local", session["id"], 3, prefix="late"))
    )
    seen = [m["id"] for page in reversed(pages) for m in page["messages"]]
    assert seen == ids and not set(seen) & set(late)
    # the newest page now starts with the late ones
    newest = client.get(f"/api/sessions/{session['id']}/messages?limit=5").get_json()
    assert [m["id"] for m in newest["messages"]] == late[-5:] and newest["has_more"] is True


def test_small_and_empty_sessions(client, store):
    session = store.sessions.create("local")
    body = client.get(f"/api/sessions/{session['id']}/messages").get_json()
    assert body == {"session_id": session["id"], "messages": [], "has_more": False}
    fill(store, "local", session["id"], 3)
    body = client.get(f"/api/sessions/{session['id']}/messages").get_json()
    assert [m["content"] for m in body["messages"]] == ["m0", "m1", "m2"] and body["has_more"] is False
    first = body["messages"][0]["id"]
    assert client.get(f"/api/sessions/{session['id']}/messages?before={first}").get_json()["messages"] == []


def test_another_users_session_is_404_and_before_cannot_reach_across(client, store):
    mine = store.sessions.create("local")
    theirs = store.sessions.create("mallory")
    their_ids = fill(store, "mallory", theirs["id"], 5, prefix="secret")
    fill(store, "local", mine["id"], 2)
    assert client.get(f"/api/sessions/{theirs['id']}/messages").status_code == 404
    body = client.get(f"/api/sessions/{mine['id']}/messages?before={their_ids[-1] + 1}").get_json()
    assert all(not m["content"].startswith("secret") for m in body["messages"])


def test_repository_recent_and_latest(store):
    session = store.sessions.create("local")
    fill(store, "local", session["id"], LONG)
    recent = store.messages.recent("local", session["id"], 1000)
    assert len(recent) == 1000 and recent[-1]["content"] == f"m{LONG - 1}" and recent[0]["content"] == "m200"
    assert store.messages.latest("local", session["id"], "assistant")["content"] == f"m{LONG - 1}"
    assert store.messages.latest("local", session["id"], "user")["content"] == f"m{LONG - 2}"
    assert store.messages.latest("local", "s_nope", "user") is None


# ---------------------------------------------------------------- sessions


def walk_sessions(client, limit, between=None):
    pages, before = [], None
    for n in range(1000):
        url = f"/api/sessions?limit={limit}" + (f"&before={before}" if before else "")
        body = client.get(url).get_json()
        pages.append(body)
        if between:
            between(n)
        if not body["has_more"]:
            assert body["next_before"] is None
            return pages
        before = body["next_before"]
    raise AssertionError("paging did not end")


def test_sessions_page_past_the_old_limit_of_100(client, store):
    made = [store.sessions.create("local", f"chat {i}")["id"] for i in range(260)]
    store.sessions.create("mallory", "not mine")
    pages = walk_sessions(client, 100)
    assert [len(p["sessions"]) for p in pages] == [100, 100, 60]
    seen = [s["id"] for p in pages for s in p["sessions"]]
    assert sorted(seen) == sorted(made) and len(set(seen)) == 260
    times = [(s["updated_at"], s["id"]) for p in pages for s in p["sessions"]]
    assert times == sorted(times, reverse=True)
    assert client.get("/api/sessions").get_json()["has_more"] is True  # default page: 100


def test_sessions_updated_while_paging_are_not_repeated(client, store):
    made = [store.sessions.create("local", f"chat {i}")["id"] for i in range(50)]
    touched = []

    def touch(n):  # the oldest unseen session gets a new message: it moves to the top
        target = made[n]
        store.messages.add("local", target, "user", "bump")
        touched.append(target)

    pages = walk_sessions(client, 10, between=touch)
    seen = [s["id"] for p in pages for s in p["sessions"]]
    assert len(seen) == len(set(seen))  # no session twice
    assert set(made) - set(seen) <= set(touched)  # only sessions that moved up can be missed (they are on top now)


def test_sessions_with_equal_timestamps_page_by_id(client, store):
    made = [store.sessions.create("local")["id"] for _ in range(25)]
    with store.locked.tx() as db:
        db.execute("update sessions set updated_at = 1000.5 where owner = 'local'")
    seen = [s["id"] for p in walk_sessions(client, 4) for s in p["sessions"]]
    assert seen == sorted(made, reverse=True)


@pytest.mark.parametrize(
    "before", ["junk", "1.5", "1.5~x_abc", "1.5~s_a b", "1.5~s_" + "a" * 65, "%C2%B2~s_abc", "nan~s_abc", "inf~s_abc"]
)
def test_bad_sessions_cursor_is_400(client, before):
    response = client.get(f"/api/sessions?before={before}")
    assert response.status_code == 400 and "before" in response.get_json()["error"]


def test_before_and_offset_together_is_400(client, store):
    store.sessions.create("local")
    response = client.get("/api/sessions?before=1.5~s_abc&offset=3")
    assert response.status_code == 400


# ---------------------------------------------------------------- the model sees the newest messages


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A real server whose only model is a recording fake (OpenAI wire protocol)."""
    from liveserver import LiveServer

    fake = FakeProvider(default=Reply(chunks=openai_text("fresh answer")))
    data_dir = str(tmp_path_factory.mktemp("long"))
    server = LiveServer(data_dir, {"OPENAI_BASE_URL": fake.url + "/v1", "OPENAI_MODEL": "m"}).start()
    server.store = Store(os.path.join(data_dir, "odysseus.db"))
    yield server, fake
    server.stop()
    fake.close()
    server.store.locked.db.conn.close()


def _long_session(server) -> str:
    session_id = requests.post(server.url + "/api/sessions", json={"title": "long"}, timeout=10).json()["id"]
    fill(server.store, "local", session_id, LONG)
    return session_id


def _sent_contents(fake) -> list:
    return [m.get("content") for m in fake.posts[-1].body["messages"]]


def test_compare_mode_sends_the_newest_messages(recorded):
    server, fake = recorded
    session_id = _long_session(server)
    frames = post_chat(server.url, "newest question", session=session_id, mode="compare").events()
    assert text_of(frames) == "fresh answer" and types_of(frames)[-1] == "[DONE]"
    sent = _sent_contents(fake)
    assert sent[-1] == "newest question" and sent[-2] == f"m{LONG - 1}"
    assert "m0" not in sent and f"m{LONG - 1000}" in sent


@pytest.mark.parametrize("mode", ["chat", "agent"])
def test_a_turn_sends_the_newest_messages_to_the_model(recorded, mode):
    server, fake = recorded
    session_id = _long_session(server)
    started = time.monotonic()
    frames = post_chat(server.url, "newest question", session=session_id, mode=mode).events()
    assert time.monotonic() - started < 60
    assert "fresh answer" in text_of(frames)
    sent = _sent_contents(fake)
    assert sent[-1] == "newest question"
    assert f"m{LONG - 1}" in sent and "m0" not in sent
    # and the reply is on the newest history page
    page = requests.get(f"{server.url}/api/sessions/{session_id}/messages?limit=2", timeout=10).json()
    assert [m["content"] for m in page["messages"]] == ["newest question", "fresh answer"]
