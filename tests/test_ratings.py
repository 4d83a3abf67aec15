"""Ratings of replies (issue 36): thumbs up or down with a comment, on the caller's own replies only,
shown in the messages list and the exports, listed for the user and counted per model for the admin."""

from __future__ import annotations

import json

import pytest
from apphelpers import two_users

from odysseus.store.ratings import MAX_COMMENT

H = {"Origin": "http://localhost"}


def chat(call, message: str) -> tuple:
    """One finished demo turn through ``call(method, path, json)``: (session id, user message, reply)."""
    response = call("POST", "/api/chat_stream", {"message": message})
    assert response.status_code == 200, response.get_data(as_text=True)
    response.get_data()  # to the end of the stream
    session_id = response.headers["X-Odysseus-Session-Id"]
    messages = call("GET", f"/api/sessions/{session_id}/messages", None).json["messages"]
    user, reply = messages[-2], messages[-1]
    assert (user["role"], reply["role"]) == ("user", "assistant")
    return session_id, user, reply


@pytest.fixture
def call(client):
    return lambda method, path, json=None: client.open(path, method=method, json=json, headers=H)


@pytest.fixture
def users(tmp_path):
    """Alice (the admin) and Bob, signed in to one password-mode app."""
    yield from two_users(str(tmp_path))


def messages_of(call, session_id: str) -> list:
    return call("GET", f"/api/sessions/{session_id}/messages").json["messages"]


def test_a_reply_is_rated_changed_and_unrated_and_the_messages_list_shows_it(call):
    session_id, user, reply = chat(call, "Rate me")
    assert [m["rating"] for m in messages_of(call, session_id)] == [None, None]
    rated = call("PUT", f"/api/messages/{reply['id']}/rating", {"value": 1, "comment": "  Clear and short. "})
    assert rated.status_code == 200, rated.json
    assert rated.json["message_id"] == reply["id"]
    assert (rated.json["rating"]["value"], rated.json["rating"]["comment"]) == (1, "Clear and short.")
    shown = messages_of(call, session_id)[1]["rating"]
    assert (shown["value"], shown["comment"]) == (1, "Clear and short.") and shown["rated_at"] > 0
    # a new PUT replaces the rating whole (no comment now)
    call("PUT", f"/api/messages/{reply['id']}/rating", {"value": -1})
    assert (messages_of(call, session_id)[1]["rating"] or {}).get("comment") is None
    assert messages_of(call, session_id)[1]["rating"]["value"] == -1
    # an empty comment is no comment
    call("PUT", f"/api/messages/{reply['id']}/rating", {"value": -1, "comment": " \n "})
    assert messages_of(call, session_id)[1]["rating"]["comment"] is None
    removed = call("DELETE", f"/api/messages/{reply['id']}/rating")
    assert removed.status_code == 200 and removed.json == {"message_id": reply["id"], "rating": None}
    assert [m["rating"] for m in messages_of(call, session_id)] == [None, None]
    assert call("DELETE", f"/api/messages/{reply['id']}/rating").status_code == 200  # unrated: still fine


def test_only_replies_can_be_rated(call):
    _, user, reply = chat(call, "Rate me")
    for target in (user["id"], reply["id"] + 1000, "12a", "٣"):
        assert call("PUT", f"/api/messages/{target}/rating", {"value": 1}).status_code == 404, target
        assert call("DELETE", f"/api/messages/{target}/rating").status_code == 404, target
    assert call("GET", "/api/ratings").json["ratings"] == []


@pytest.mark.parametrize(
    "body, words",
    [
        ({}, "value must be"),
        ({"value": 0}, "value must be"),
        ({"value": 2}, "value must be"),
        ({"value": True}, "value must be"),
        ({"value": "1"}, "value must be"),
        ({"value": 1.0}, "value must be"),
        ({"value": None}, "value must be"),
        ({"value": 1, "comment": 5}, "comment must be a string"),
        ({"value": 1, "comment": "x" * (MAX_COMMENT + 1)}, "longer than"),
        ({"value": -1, "comment": "a\x00b"}, "NUL"),
    ],
)
def test_bad_ratings_are_refused_and_store_nothing(call, body, words):
    session_id, _, reply = chat(call, "Rate me")
    call("PUT", f"/api/messages/{reply['id']}/rating", {"value": 1, "comment": "kept"})
    answer = call("PUT", f"/api/messages/{reply['id']}/rating", body)
    assert answer.status_code == 400 and words in answer.json["error"], answer.json
    kept = messages_of(call, session_id)[1]["rating"]
    assert (kept["value"], kept["comment"]) == (1, "kept")


def test_markup_in_a_comment_is_kept_as_text(call):
    _, _, reply = chat(call, "Rate me")
    comment = '<img src=x onerror="alert(1)"> **bold**'
    assert (
        call("PUT", f"/api/messages/{reply['id']}/rating", {"value": 1, "comment": comment}).json["rating"]["comment"]
        == comment
    )


def test_the_user_s_ratings_are_listed_newest_first_with_model_and_session(call):
    first_session, _, first = chat(call, "First question")
    second_session, _, second = chat(call, "Second question")
    chat(call, "Not rated")
    call("PUT", f"/api/messages/{first['id']}/rating", {"value": 1})
    call("PUT", f"/api/messages/{second['id']}/rating", {"value": -1, "comment": "wrong"})
    listed = call("GET", "/api/ratings").json
    assert [(r["message_id"], r["value"], r["comment"]) for r in listed["ratings"]] == [
        (second["id"], -1, "wrong"),
        (first["id"], 1, None),
    ]
    top = listed["ratings"][0]
    assert top["session_id"] == second_session and top["session_title"]
    assert top["model"] == second["metadata"]["model_info"]["route"] and top["excerpt"] == second["content"][:200]
    assert listed["next_offset"] is None
    page = call("GET", "/api/ratings?limit=1").json
    assert [r["message_id"] for r in page["ratings"]] == [second["id"]] and page["next_offset"] == 1
    assert [r["message_id"] for r in call("GET", "/api/ratings?limit=1&offset=1").json["ratings"]] == [first["id"]]
    assert call("GET", "/api/ratings?limit=0").status_code == 400
    # a deleted reply, or a deleted session, takes its rating with it
    call("DELETE", f"/api/messages/{second['id']}")
    call("DELETE", f"/api/sessions/{first_session}")
    assert call("GET", "/api/ratings").json["ratings"] == []


def test_exports_carry_the_rating_and_an_import_restores_it(call):
    session_id, _, reply = chat(call, "Export me")
    call("PUT", f"/api/messages/{reply['id']}/rating", {"value": -1, "comment": "Too   long\nreally"})
    doc = call("GET", f"/api/sessions/{session_id}/export?format=json").get_json()
    exported = [m.get("rating") for m in doc["messages"]]
    assert exported[0] is None and (exported[1]["value"], exported[1]["comment"]) == (-1, "Too   long\nreally")
    markdown = call("GET", f"/api/sessions/{session_id}/export?format=md").get_data(as_text=True)
    assert "_Rated 👎 (bad)_ — Too long really" in markdown
    imported = call("POST", "/api/sessions/import", doc)
    assert imported.status_code == 201, imported.json
    restored = messages_of(call, imported.json["id"])[1]["rating"]
    assert (restored["value"], restored["comment"]) == (-1, "Too   long\nreally")
    assert restored["rated_at"] == exported[1]["rated_at"]


@pytest.mark.parametrize(
    "index, rating, words",
    [
        (0, {"value": 1}, "only an assistant message"),
        (1, {"value": 3}, "value must be"),
        (1, "up", "must be an object"),
        (1, {"value": 1, "rated_at": "yesterday"}, "rated_at must be a number"),
    ],
)
def test_an_import_with_a_bad_rating_is_refused_whole(call, index, rating, words):
    session_id, _, _ = chat(call, "Export me")
    doc = call("GET", f"/api/sessions/{session_id}/export?format=json").get_json()
    doc["messages"][index]["rating"] = rating
    before = call("GET", "/api/sessions").json["sessions"]
    answer = call("POST", "/api/sessions/import", doc)
    assert answer.status_code == 400 and words in answer.json["error"], answer.json
    assert call("GET", "/api/sessions").json["sessions"] == before


def test_another_user_s_reply_answers_404_and_keeps_its_rating(users):
    alice, bob = users
    session_id, _, reply = chat(alice.call, "Alice asks")
    alice.call("PUT", f"/api/messages/{reply['id']}/rating", {"value": 1, "comment": "mine"})
    assert bob.call("PUT", f"/api/messages/{reply['id']}/rating", {"value": -1}).status_code == 404
    assert bob.call("PUT", f"/api/messages/{reply['id']}/rating", {"value": "bad"}).status_code in (400, 404)
    assert bob.call("DELETE", f"/api/messages/{reply['id']}/rating").status_code == 404
    assert bob.call("GET", "/api/ratings").json["ratings"] == []
    kept = messages_of(alice.call, session_id)[1]["rating"]
    assert (kept["value"], kept["comment"]) == (1, "mine")


def test_the_admin_sees_every_user_s_ratings_per_model_and_nobody_else_does(users):
    alice, bob = users
    _, _, mine = chat(alice.call, "Alice asks")
    _, _, his = chat(bob.call, "Bob asks")
    _, _, other = chat(bob.call, "Bob asks again")
    alice.call("PUT", f"/api/messages/{mine['id']}/rating", {"value": 1})
    bob.call("PUT", f"/api/messages/{his['id']}/rating", {"value": -1, "comment": "meh"})
    bob.call("PUT", f"/api/messages/{other['id']}/rating", {"value": -1})
    assert bob.call("GET", "/api/admin/ratings").status_code == 403
    model = mine["metadata"]["model_info"]["route"]
    counts = alice.call("GET", "/api/admin/ratings").json
    assert counts == {"models": [{"model": model, "up": 1, "down": 2, "total": 3}]}
    assert "meh" not in json.dumps(alice.call("GET", "/api/admin/ratings").json)  # counts, no comments


def test_the_single_user_owner_is_the_admin_of_ratings(app, call):
    _, _, reply = chat(call, "Rate me")
    store = app.extensions["odysseus.store"]
    imported = store.sessions.create("local", "old")  # a reply without a route (an old import) counts as "unknown"
    old = store.messages.add("local", imported["id"], "assistant", "old text", metadata={"model_info": {"label": "x"}})
    call("PUT", f"/api/messages/{reply['id']}/rating", {"value": 1})
    call("PUT", f"/api/messages/{old}/rating", {"value": 1})
    counts = call("GET", "/api/admin/ratings").json["models"]
    assert sorted((c["model"], c["up"], c["down"]) for c in counts) == sorted(
        [(reply["metadata"]["model_info"]["route"], 1, 0), ("unknown", 1, 0)]
    )
