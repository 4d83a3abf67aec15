"""Organised chats (issue 36, item 1): folders, pinned and archived sessions, over the API with two users."""

from __future__ import annotations

import pytest
from apphelpers import close_app
from twousers import fresh, two_users

from odysseus import create_app


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """alice and bob, signed in to one app for the whole module."""
    yield from two_users(str(tmp_path_factory.mktemp("organise")))


@pytest.fixture
def pair(world):
    """The module's app and users, with no chats or folders left by an earlier test."""
    fresh(world[0])
    return world


def _counts(app) -> tuple:
    db = app.extensions["odysseus.store"].db
    folders = db.execute("select count(*) from folders").fetchone()[0]
    organised = db.execute("select id, title, folder_id, pinned, archived, updated_at from sessions order by id")
    return folders, organised.fetchall()


def test_sessions_carry_folder_pinned_and_archived(pair):
    _, alice, _ = pair
    sid = alice.session("plain")
    session = alice.get(f"/api/sessions/{sid}").json
    assert (session["folder_id"], session["pinned"], session["archived"]) == (None, False, False)
    listed = alice.get("/api/sessions").json["sessions"][0]
    assert (listed["folder_id"], listed["pinned"], listed["archived"]) == (None, False, False)


def test_folders_create_list_rename_delete_and_deleting_keeps_its_chats(pair):
    app, alice, _ = pair
    made = alice.post("/api/folders", {"name": "  Work  "})
    assert made.status_code == 201
    folder = made.json
    assert folder["name"] == "Work" and folder["id"].startswith("f_")
    other = alice.post("/api/folders", {"name": "archive of ideas"}).json
    first, second, loose = alice.session("one"), alice.session("two"), alice.session("loose")
    for sid in (first, second):
        moved = alice.patch(f"/api/sessions/{sid}", {"folder_id": folder["id"]})
        assert moved.status_code == 200 and moved.json["folder_id"] == folder["id"]
    listing = alice.get("/api/folders").json["folders"]
    assert [(f["name"], f["session_count"]) for f in listing] == [("archive of ideas", 0), ("Work", 2)]
    assert set(alice.listed(f"?folder_id={folder['id']}")) == {first, second}
    assert alice.listed("?folder_id=none") == [loose]
    assert set(alice.listed()) == {first, second, loose}  # no filter: every chat that is not archived

    renamed = alice.patch(f"/api/folders/{folder['id']}", {"name": "Work 2026"})
    assert renamed.status_code == 200 and renamed.json["name"] == "Work 2026"
    assert alice.patch(f"/api/folders/{other['id']}", {"name": "WORK 2026"}).status_code == 409  # any case
    assert alice.patch(f"/api/folders/{folder['id']}", {"name": "work 2026"}).status_code == 200  # its own name

    deleted = alice.delete(f"/api/folders/{folder['id']}")
    assert deleted.status_code == 200 and deleted.json == {"deleted": True, "sessions_moved": 2}
    assert set(alice.listed("?folder_id=none")) == {first, second, loose}
    assert alice.get(f"/api/sessions/{first}").json["folder_id"] is None
    assert alice.delete(f"/api/folders/{folder['id']}").status_code == 404
    assert alice.get(f"/api/sessions?folder_id={folder['id']}").status_code == 404
    assert _counts(app)[0] == 1


def test_moving_out_of_a_folder_with_null(pair):
    _, alice, _ = pair
    folder = alice.post("/api/folders", {"name": "Trips"}).json
    sid = alice.session("Rome")
    alice.patch(f"/api/sessions/{sid}", {"folder_id": folder["id"]})
    out = alice.patch(f"/api/sessions/{sid}", {"folder_id": None})
    assert out.status_code == 200 and out.json["folder_id"] is None
    assert alice.listed(f"?folder_id={folder['id']}") == []


def test_pin_and_archive_and_the_lists_they_make(pair):
    _, alice, _ = pair
    old, pinned, archived = alice.session("old"), alice.session("pinned"), alice.session("archived")
    before = alice.get(f"/api/sessions/{old}").json["updated_at"]
    assert alice.patch(f"/api/sessions/{pinned}", {"pinned": True}).json["pinned"] is True
    response = alice.patch(f"/api/sessions/{archived}", {"archived": True})
    assert response.json["archived"] is True
    assert alice.patch(f"/api/sessions/{old}", {"pinned": True}).status_code == 200
    assert alice.patch(f"/api/sessions/{old}", {"pinned": False}).json["pinned"] is False
    # organising leaves a chat's place in time alone (its date group does not change)
    assert alice.get(f"/api/sessions/{old}").json["updated_at"] == before

    assert archived not in alice.listed()
    assert alice.listed("?archived=true") == [archived]
    assert alice.listed("?pinned=true") == [pinned]
    assert alice.listed("?pinned=false") == [old]
    assert alice.listed("?archived=false") == alice.listed()

    restored = alice.patch(f"/api/sessions/{archived}", {"archived": False})
    assert restored.status_code == 200 and restored.json["archived"] is False
    assert archived in alice.listed() and alice.listed("?archived=true") == []


def test_archived_lists_page_with_the_same_cursor(pair):
    _, alice, _ = pair
    ids = [alice.session(f"chat {i}") for i in range(5)]
    for sid in ids:
        alice.patch(f"/api/sessions/{sid}", {"archived": True})
    first = alice.get("/api/sessions?archived=true&limit=3").json
    assert first["has_more"] is True
    rest = alice.get(f"/api/sessions?archived=true&limit=3&before={first['next_before']}").json
    assert rest["has_more"] is False
    assert [s["id"] for s in first["sessions"] + rest["sessions"]] == ids[::-1]


def test_one_patch_changes_several_fields_at_once(pair):
    _, alice, _ = pair
    folder = alice.post("/api/folders", {"name": "Both"}).json
    sid = alice.session("x")
    changed = alice.patch(
        f"/api/sessions/{sid}", {"title": "Renamed", "folder_id": folder["id"], "pinned": True, "archived": True}
    ).json
    assert (changed["title"], changed["folder_id"], changed["pinned"], changed["archived"]) == (
        "Renamed",
        folder["id"],
        True,
        True,
    )


def test_search_finds_archived_chats_and_says_so(tmp_path):
    app = create_app({"DATA_DIR": str(tmp_path), "PROVIDERS": [], "AUTH": "none", "DEMO_TOKEN_DELAY": 0.001})
    try:
        client = app.test_client()
        headers = {"Origin": "http://localhost"}
        store = app.extensions["odysseus.store"]
        sid = client.post("/api/sessions", json={"title": "Old trip"}, headers=headers).json["id"]
        store.messages.add("local", sid, "user", "The okapi lives in the forest")
        client.patch(f"/api/sessions/{sid}", json={"archived": True}, headers=headers)
        results = client.get("/api/search?q=okapi").json["results"]
        assert [(r["session_id"], r["archived"]) for r in results] == [(sid, True)]
    finally:
        close_app(app)


def test_another_users_folder_is_404_everywhere(pair):
    app, alice, bob = pair
    folder = alice.post("/api/folders", {"name": "Alice's"}).json
    alice_chat = alice.session("alice's chat")
    alice.patch(f"/api/sessions/{alice_chat}", {"folder_id": folder["id"]})
    bob_chat = bob.session("bob's chat")
    before = _counts(app)
    assert bob.get("/api/folders").json["folders"] == []
    assert bob.patch(f"/api/folders/{folder['id']}", {"name": "pwned"}).status_code == 404
    assert bob.delete(f"/api/folders/{folder['id']}").status_code == 404
    assert bob.get(f"/api/sessions?folder_id={folder['id']}").status_code == 404
    # moving his own chat into her folder, or organising her chat: 404, nothing stored
    assert bob.patch(f"/api/sessions/{bob_chat}", {"folder_id": folder["id"]}).status_code == 404
    for change in ({"pinned": True}, {"archived": True}, {"folder_id": None}, {"title": "pwned"}):
        assert bob.patch(f"/api/sessions/{alice_chat}", change).status_code == 404
    assert _counts(app) == before
    assert alice.get("/api/folders").json["folders"][0]["name"] == "Alice's"
    # the same name is free for another user
    assert bob.post("/api/folders", {"name": "Alice's"}).status_code == 201


@pytest.mark.parametrize(
    "body, fragment",
    [
        ({}, "name"),
        ({"name": ""}, "name"),
        ({"name": "   "}, "name"),
        ({"name": 42}, "string"),
        ({"name": None}, "string"),
        ({"name": ["a"]}, "string"),
        ({"name": "x" * 101}, "100"),
        ({"name": "two\nlines"}, "control"),
        ({"name": "nul\x00"}, "control"),
        ({"name": "bidi\u202eevil"}, "control"),
    ],
)
def test_bad_folder_names_are_400_and_store_nothing(pair, body, fragment):
    app, alice, _ = pair
    folder = alice.post("/api/folders", {"name": "Kept"}).json
    before = _counts(app)
    made = alice.post("/api/folders", body)
    assert made.status_code == 400 and fragment in made.json["error"]
    renamed = alice.patch(f"/api/folders/{folder['id']}", body)
    assert renamed.status_code == 400 and fragment in renamed.json["error"]
    assert _counts(app) == before


def test_folder_names_keep_markup_as_text_and_may_be_100_long(pair):
    _, alice, _ = pair
    markup = alice.post("/api/folders", {"name": "<img src=x onerror=alert(1)>"})
    assert markup.status_code == 201 and markup.json["name"] == "<img src=x onerror=alert(1)>"
    assert alice.post("/api/folders", {"name": "y" * 100}).status_code == 201
    assert alice.post("/api/folders", {"name": "<IMG src=x onerror=alert(1)>"}).status_code == 409


@pytest.mark.parametrize(
    "body, fragment",
    [
        ({}, "send title"),
        ({"unknown": 1}, "send title"),
        ({"pinned": "yes"}, "pinned"),
        ({"pinned": 1}, "pinned"),
        ({"pinned": None}, "pinned"),
        ({"archived": "maybe"}, "archived"),
        ({"folder_id": 7}, "folder_id"),
        ({"folder_id": ["f_x"]}, "folder_id"),
        ({"title": ""}, "title"),
        ({"title": "ok", "pinned": "nope"}, "pinned"),  # one bad field refuses the whole change
    ],
)
def test_bad_session_changes_are_400_and_store_nothing(pair, body, fragment):
    app, alice, _ = pair
    sid = alice.session("kept")
    before = _counts(app)
    response = alice.patch(f"/api/sessions/{sid}", body)
    assert response.status_code == 400 and fragment in response.json["error"]
    assert _counts(app) == before


def test_unknown_folder_in_a_change_is_404_and_stores_nothing(pair):
    app, alice, _ = pair
    sid = alice.session("kept")
    before = _counts(app)
    assert alice.patch(f"/api/sessions/{sid}", {"folder_id": "f_nope", "pinned": True}).status_code == 404
    assert _counts(app) == before


@pytest.mark.parametrize("query", ["?archived=yes", "?pinned=1", "?archived=TRUE"])
def test_bad_list_filters_are_400(pair, query):
    _, alice, _ = pair
    response = alice.get(f"/api/sessions{query}")
    assert response.status_code == 400 and "true or false" in response.json["error"]


def _export_doc(**session) -> dict:
    """A JSON export of one question and its answer, with ``session`` fields added."""
    return {
        "format": "odysseus.chat",
        "version": 1,
        "session": {"title": "Imported", **session},
        "messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}],
    }


def test_export_and_import_keep_pinned_archived_and_the_folder_by_name(pair):
    _, alice, bob = pair
    folder = alice.post("/api/folders", {"name": "Work"}).json
    sid = alice.session("organised")
    alice.patch(f"/api/sessions/{sid}", {"folder_id": folder["id"], "pinned": True, "archived": True})
    exported = alice.get(f"/api/sessions/{sid}/export?format=json").json["session"]
    assert (exported["folder"], exported["pinned"], exported["archived"]) == ("Work", True, True)
    plain = alice.get(f"/api/sessions/{alice.session('plain')}/export?format=json").json["session"]
    assert not {"folder", "pinned", "archived"} & set(plain)  # unset: left out, as before

    # alice's import lands in her "Work" (any case); bob has no such folder, so his import makes one
    mine = alice.post("/api/sessions/import", _export_doc(folder="WORK", pinned=True, archived=True))
    assert mine.status_code == 201, mine.json
    assert (mine.json["folder_id"], mine.json["pinned"], mine.json["archived"]) == (folder["id"], True, True)
    assert [f["name"] for f in alice.get("/api/folders").json["folders"]] == ["Work"]
    theirs = bob.post("/api/sessions/import", _export_doc(folder="Work", pinned=True))
    assert theirs.status_code == 201, theirs.json
    bobs = bob.get("/api/folders").json["folders"]
    assert [(f["name"], f["session_count"]) for f in bobs] == [("Work", 1)]
    assert bobs[0]["id"] != folder["id"] and theirs.json["folder_id"] == bobs[0]["id"]
    assert bob.listed("?pinned=true") == [theirs.json["id"]]


@pytest.mark.parametrize(
    "session, fragment",
    [
        ({"pinned": "yes"}, "session.pinned"),
        ({"archived": 1}, "session.archived"),
        ({"folder": ""}, "session.folder"),
        ({"folder": 7}, "session.folder"),
        ({"folder": "x" * 101}, "session.folder"),
        ({"folder": "two\nlines"}, "session.folder"),
    ],
)
def test_bad_organisation_in_an_import_is_400_and_stores_nothing(pair, session, fragment):
    app, alice, _ = pair
    before = _counts(app)
    answer = alice.post("/api/sessions/import", _export_doc(**session))
    assert answer.status_code == 400 and fragment in answer.json["error"], answer.json
    assert _counts(app) == before
