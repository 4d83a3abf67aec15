"""The prompt library (issue 36): saved prompts with a /command, each user's own, validated whole."""

from __future__ import annotations

import pytest
from apphelpers import two_users

from odysseus.store.prompts import MAX_CONTENT, variables


@pytest.fixture
def users(tmp_path):
    """Alice (the admin) and Bob, signed in to one password-mode app."""
    yield from two_users(str(tmp_path))


def test_a_prompt_is_created_listed_changed_and_deleted(client):
    made = client.post(
        "/api/prompts", json={"title": "  Summarize \n this ", "command": " /Sum-Up_2 ", "content": "Sum up {{ text }}"}
    )
    assert made.status_code == 201, made.json
    prompt = made.json
    assert (prompt["title"], prompt["command"], prompt["variables"]) == ("Summarize this", "sum-up_2", ["text"])
    assert client.get("/api/prompts").json["prompts"] == [prompt]
    assert client.get(f"/api/prompts/{prompt['id']}").json == prompt
    changed = client.patch(f"/api/prompts/{prompt['id']}", json={"content": "{{a}} and {{b}} and {{a}}"})
    assert changed.status_code == 200
    assert changed.json["variables"] == ["a", "b"] and changed.json["command"] == "sum-up_2"
    assert client.delete(f"/api/prompts/{prompt['id']}").json == {"deleted": True}
    assert client.get("/api/prompts").json["prompts"] == []
    assert client.get(f"/api/prompts/{prompt['id']}").status_code == 404
    assert client.delete(f"/api/prompts/{prompt['id']}").status_code == 404


def test_a_second_prompt_with_the_same_command_is_a_409_and_stores_nothing(client):
    first = client.post("/api/prompts", json={"title": "One", "command": "fix", "content": "Fix it"}).json
    again = client.post("/api/prompts", json={"title": "Two", "command": "/FIX", "content": "Fix that"})
    assert again.status_code == 409 and "/fix" in again.json["error"]
    other = client.post("/api/prompts", json={"title": "Two", "command": "fix2", "content": "Fix that"}).json
    renamed = client.patch(f"/api/prompts/{other['id']}", json={"command": "fix", "title": "Renamed"})
    assert renamed.status_code == 409
    assert [(p["title"], p["command"]) for p in client.get("/api/prompts").json["prompts"]] == [
        ("One", "fix"),
        ("Two", "fix2"),
    ]
    assert first["command"] == "fix"
    # a command freed by its prompt's deletion can be taken again
    assert client.delete(f"/api/prompts/{first['id']}").status_code == 200
    assert client.patch(f"/api/prompts/{other['id']}", json={"command": "fix"}).json["command"] == "fix"


@pytest.mark.parametrize(
    "body, words",
    [
        ({"command": "x", "content": "y"}, "title"),
        ({"title": "  ", "command": "x", "content": "y"}, "title must not be empty"),
        ({"title": "t" * 201, "command": "x", "content": "y"}, "longer than 200"),
        ({"title": 5, "command": "x", "content": "y"}, "title"),
        ({"title": "t", "content": "y"}, "command"),
        ({"title": "t", "command": "", "content": "y"}, "command must be"),
        ({"title": "t", "command": "two words", "content": "y"}, "command must be"),
        ({"title": "t", "command": "<b>x</b>", "content": "y"}, "command must be"),
        ({"title": "t", "command": "//x", "content": "y"}, "command must be"),
        ({"title": "t", "command": "a" * 33, "content": "y"}, "command must be"),
        ({"title": "t", "command": "ünï", "content": "y"}, "command must be"),
        ({"title": "t", "command": "x"}, "content"),
        ({"title": "t", "command": "x", "content": " \n "}, "content must not be empty"),
        ({"title": "t", "command": "x", "content": "y" * (MAX_CONTENT + 1)}, "longer than"),
        ({"title": "t", "command": "x", "content": "a\x00b"}, "NUL"),
        ({"title": "t", "command": "x", "content": " ".join(f"{{{{v{i}}}}}" for i in range(21))}, "variables"),
        ({"title": "t", "command": ["x"], "content": "y"}, "command"),
    ],
)
def test_bad_prompts_are_refused_with_a_reason_and_store_nothing(client, body, words):
    answer = client.post("/api/prompts", json=body)
    assert answer.status_code == 400 and words in answer.json["error"], answer.json
    assert client.get("/api/prompts").json["prompts"] == []


def test_a_bad_change_is_refused_and_changes_nothing(client):
    prompt = client.post("/api/prompts", json={"title": "T", "command": "t", "content": "c"}).json
    for body in ({}, {"command": "A B"}, {"title": ""}, {"content": ""}, {"title": "ok", "command": "no way"}):
        assert client.patch(f"/api/prompts/{prompt['id']}", json=body).status_code == 400, body
    assert client.get(f"/api/prompts/{prompt['id']}").json == prompt


def test_markup_in_a_title_is_stored_as_text(client):
    title = '<img src=x onerror="alert(1)"> & <b>bold</b>'
    prompt = client.post("/api/prompts", json={"title": title, "command": "x", "content": "<script>1</script>"}).json
    assert prompt["title"] == title and prompt["content"] == "<script>1</script>"  # the page shows them as text


def test_variables_are_the_named_placeholders_in_order():
    assert variables("{{b}} {{ a }} {{b}} {{not valid!}} {{_x-1}} {{}} {x}") == ["b", "a", "_x-1"]


def test_another_user_s_prompt_answers_404_and_stays_as_it_was(users):
    alice, bob = users
    prompt = alice.call("POST", "/api/prompts", {"title": "Mine", "command": "mine", "content": "secret"}).json
    assert bob.call("GET", "/api/prompts").json["prompts"] == []
    assert bob.call("GET", f"/api/prompts/{prompt['id']}").status_code == 404
    assert bob.call("PATCH", f"/api/prompts/{prompt['id']}", {"content": "pwned"}).status_code == 404
    assert bob.call("PATCH", f"/api/prompts/{prompt['id']}", {"command": "BAD INPUT"}).status_code == 404
    assert bob.call("DELETE", f"/api/prompts/{prompt['id']}").status_code == 404
    assert alice.call("GET", f"/api/prompts/{prompt['id']}").json == prompt
    # commands are unique per user only: Bob may use the same one
    assert bob.call("POST", "/api/prompts", {"title": "His", "command": "mine", "content": "x"}).status_code == 201
    assert [p["title"] for p in alice.call("GET", "/api/prompts").json["prompts"]] == ["Mine"]


def test_prompts_need_a_signed_in_user(users):
    alice, _ = users
    anonymous = alice.client.application.test_client()
    assert anonymous.get("/api/prompts").status_code == 401
