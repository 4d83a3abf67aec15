"""Share links (issue 36, item 3): a chat's snapshot behind an unguessable link, over the API with two users."""

from __future__ import annotations

import re

import pytest
from twousers import fresh, two_users

TOKEN_PATH = re.compile(r"/s/[A-Za-z0-9_-]{32}")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """alice and bob, signed in to one app for the whole module."""
    yield from two_users(str(tmp_path_factory.mktemp("shares")))


@pytest.fixture
def pair(world):
    """The module's app and users, with no chats or shares left by an earlier test."""
    fresh(world[0])
    return world


def owner_id(app, username: str) -> str:
    db = app.extensions["odysseus.store"].db
    return db.execute("select id from users where username = ?", [username]).fetchone()[0]


def chat(app, caller, username: str, title: str, *messages, **metadata_of) -> str:
    """A session of ``username`` holding ``messages`` ((role, content) pairs, in order)."""
    store = app.extensions["odysseus.store"]
    sid = caller.session(title)
    owner = owner_id(app, username)
    for index, (role, content) in enumerate(messages):
        store.messages.add(owner, sid, role, content, metadata=metadata_of.get(f"m{index}"))
    return sid


def _share_count(app) -> int:
    return app.extensions["odysseus.store"].db.execute("select count(*) from shares").fetchone()[0]


def test_a_share_link_serves_the_snapshot_to_anyone_without_signing_in(pair):
    app, alice, _ = pair
    sid = chat(app, alice, "alice", "Trip plans", ("user", "Where to go?"), ("assistant", "Try **Rome**."))
    made = alice.post(f"/api/sessions/{sid}/share")
    assert made.status_code == 201
    share = made.json
    assert share["id"].startswith("sh_") and TOKEN_PATH.fullmatch(share["path"])
    assert share["url"] == "http://localhost" + share["path"]  # same origin
    assert (share["session_id"], share["title"], share["message_count"]) == (sid, "Trip plans", 2)

    stranger = app.test_client()  # no cookie, no token: password mode, signed out
    assert stranger.get(f"/api/sessions/{sid}").status_code == 401
    data = stranger.get(share["path"] + "?format=json")
    assert data.status_code == 200
    assert data.json["title"] == "Trip plans"
    assert data.json["messages"] == [
        {"role": "user", "content": "Where to go?"},
        {"role": "assistant", "content": "Try **Rome**."},
    ]
    page = stranger.get(share["path"])
    assert page.status_code == 200 and page.mimetype == "text/html"
    html = page.get_data(as_text=True)
    assert "Where to go?" in html and "Try **Rome**." in html and "js/share" in html
    for response in (data, page):
        assert response.headers["Cache-Control"] == "no-store"
        assert response.headers["Referrer-Policy"] == "no-referrer"
        assert "noindex" in response.headers["X-Robots-Tag"]
    # two shares of one chat are two links
    again = alice.post(f"/api/sessions/{sid}/share").json
    assert again["path"] != share["path"] and again["id"] != share["id"]


def test_the_snapshot_is_taken_when_sharing_not_later(pair):
    app, alice, _ = pair
    sid = chat(app, alice, "alice", "Before", ("user", "first question"), ("assistant", "first answer"))
    share = alice.post(f"/api/sessions/{sid}/share").json
    store = app.extensions["odysseus.store"]
    store.messages.add(owner_id(app, "alice"), sid, "user", "a later secret")
    alice.patch(f"/api/sessions/{sid}", {"title": "After"})
    snapshot = app.test_client().get(share["path"] + "?format=json").json
    assert snapshot["title"] == "Before"
    assert [m["content"] for m in snapshot["messages"]] == ["first question", "first answer"]
    assert "a later secret" not in app.test_client().get(share["path"]).get_data(as_text=True)


def test_revoking_and_listing_are_the_owners_only(pair):
    app, alice, bob = pair
    sid = chat(app, alice, "alice", "Private", ("user", "hello"), ("assistant", "hi"))
    share = alice.post(f"/api/sessions/{sid}/share").json
    listed = alice.get("/api/shares").json["shares"]
    assert [(s["id"], s["path"], s["session_id"], s["title"]) for s in listed] == [
        (share["id"], share["path"], sid, "Private")
    ]
    assert bob.get("/api/shares").json["shares"] == []
    assert bob.delete(f"/api/shares/{share['id']}").status_code == 404
    assert app.test_client().get(share["path"]).status_code == 200  # bob's try changed nothing
    assert bob.post(f"/api/sessions/{sid}/share").status_code == 404  # nor can he share her chat
    assert _share_count(app) == 1

    revoked = alice.delete(f"/api/shares/{share['id']}")
    assert revoked.status_code == 200 and revoked.json == {"deleted": True}
    assert alice.get("/api/shares").json["shares"] == []
    assert alice.delete(f"/api/shares/{share['id']}").status_code == 404
    stranger = app.test_client()
    gone = stranger.get(share["path"])
    assert gone.status_code == 404 and "hello" not in gone.get_data(as_text=True)
    assert stranger.get(share["path"] + "?format=json").status_code == 404


def test_a_deleted_chats_link_is_404(pair):
    app, alice, _ = pair
    sid = chat(app, alice, "alice", "Short-lived", ("user", "temporary words"))
    share = alice.post(f"/api/sessions/{sid}/share").json
    assert alice.delete(f"/api/sessions/{sid}").status_code == 200
    page = app.test_client().get(share["path"])
    assert page.status_code == 404 and "temporary words" not in page.get_data(as_text=True)
    assert app.test_client().get(share["path"] + "?format=json").status_code == 404
    assert alice.get("/api/shares").json["shares"] == [] and _share_count(app) == 0


def test_a_disabled_owners_links_answer_404(pair):
    app, alice, bob = pair
    sid = chat(app, bob, "bob", "Bob's", ("user", "bob's words"))
    share = bob.post(f"/api/sessions/{sid}/share").json
    bob_id = owner_id(app, "bob")
    assert alice.patch(f"/api/admin/users/{bob_id}", {"disabled": True}).status_code == 200
    try:
        assert app.test_client().get(share["path"] + "?format=json").status_code == 404
    finally:
        app.extensions["odysseus.store"].db.execute("update users set disabled_at = null where id = ?", [bob_id])
    assert app.test_client().get(share["path"] + "?format=json").status_code == 200


def test_the_snapshot_holds_the_conversation_and_nothing_else(pair):
    app, alice, _ = pair
    exhibit = {"id": "ex1", "title": "Costs", "elements": [{"type": "table", "columns": ["a"], "rows": [["1"]]}]}
    sid = chat(
        app,
        alice,
        "alice",
        "Agent work",
        ("user", "please check"),
        ("assistant", "Checked."),
        ("user", "Approve"),
        ("system", "summary of older messages"),
        ("assistant", "Here is the table."),
        ("assistant", ""),
        m1={
            "agent": {"tools": [{"name": "shell", "output": "TOOL-OUTPUT-SECRET"}]},
            "model_info": {"label": "MODEL-SECRET"},
            "memories_used": [{"text": "MEMORY-SECRET"}],
            "attachments": [{"id": "up_1", "name": "UPLOAD-SECRET.txt"}],
        },
        m2={"agent_action": {"tool_approval": {"approval_id": "ap_1", "decision": "approve"}}},
        m3={"compacted": True},
        m4={"exhibits": [exhibit]},
    )
    store = app.extensions["odysseus.store"]
    store.messages.add(owner_id(app, "alice"), sid, "assistant", "", thinking="THINKING-SECRET")
    other = chat(app, alice, "alice", "Another chat", ("user", "OTHER-CHAT-SECRET"))
    store.memories.add(owner_id(app, "alice"), {"text": "MEMORY-ROW-SECRET", "pinned": True})
    share = alice.post(f"/api/sessions/{sid}/share").json
    stranger = app.test_client()
    snapshot = stranger.get(share["path"] + "?format=json").json
    assert snapshot["messages"] == [
        {"role": "user", "content": "please check"},
        {"role": "assistant", "content": "Checked."},
        {"role": "assistant", "content": "Here is the table.", "exhibits": [exhibit]},
    ]
    assert set(snapshot) == {"title", "messages", "shared_at"}
    html = stranger.get(share["path"]).get_data(as_text=True)
    everything = html + str(snapshot)
    for secret in (
        "TOOL-OUTPUT-SECRET",
        "MODEL-SECRET",
        "MEMORY-SECRET",
        "UPLOAD-SECRET",
        "THINKING-SECRET",
        "OTHER-CHAT-SECRET",
        "MEMORY-ROW-SECRET",
        "summary of older messages",
        other,
        sid,
        owner_id(app, "alice"),
        "alice",
    ):
        assert secret not in everything, secret
    assert '"Costs"' in html  # the exhibit goes to the page, as JSON for share.js to render


def test_only_the_selected_branch_is_shared(pair):
    app, alice, _ = pair
    sid = chat(app, alice, "alice", "Branches", ("user", "question"), ("assistant", "first answer"))
    store = app.extensions["odysseus.store"]
    owner = owner_id(app, "alice")
    messages = store.messages.page(owner, sid)[0]
    with store.locked.tx() as db:  # a second answer to the same question, then select the first again
        db.execute(
            "insert into messages (session_id, owner, role, content, metadata, parent_id, created_at)"
            " values (?, ?, 'assistant', 'second answer', '{}', ?, 0)",
            [sid, owner, messages[0]["id"]],
        )
        db.execute("update sessions set branch_head = ? where id = ?", [messages[1]["id"], sid])
    share = alice.post(f"/api/sessions/{sid}/share").json
    contents = [m["content"] for m in app.test_client().get(share["path"] + "?format=json").json["messages"]]
    assert contents == ["question", "first answer"]


def test_markup_in_a_shared_chat_stays_text(pair):
    app, alice, _ = pair
    evil = "<img src=x onerror=alert(1)><script>alert(2)</script>"
    card = {"id": "e", "title": f"</script>{evil}", "elements": [{"type": "choice", "options": [evil]}]}
    sid = chat(
        app,
        alice,
        "alice",
        f"Title {evil}",
        ("user", f"question {evil}"),
        ("assistant", f"answer {evil}"),
        m1={"exhibits": [card]},
    )
    share = alice.post(f"/api/sessions/{sid}/share").json
    html = app.test_client().get(share["path"]).get_data(as_text=True)
    assert "<img src=x" not in html and "<script>alert" not in html
    assert html.count("&lt;img src=x onerror=alert(1)&gt;") >= 3  # the title twice (<title>, <h1>), each message
    exhibits = html.split('id="share-exhibits">')[1].split("</script>")[0]
    assert "<" not in exhibits and "\\u003c/script\\u003e" in exhibits  # the JSON cannot close its script element


def test_sharing_needs_something_to_share_and_bad_input_is_refused(pair):
    app, alice, _ = pair
    empty = alice.session("Empty")
    response = alice.post(f"/api/sessions/{empty}/share")
    assert response.status_code == 400 and "no messages" in response.json["error"]
    assert alice.post("/api/sessions/s_nope/share").status_code == 404
    assert _share_count(app) == 0
    sid = chat(app, alice, "alice", "Some", ("user", "words"))
    share = alice.post(f"/api/sessions/{sid}/share").json
    stranger = app.test_client()
    bad = stranger.get(share["path"] + "?format=xml")
    assert bad.status_code == 400 and "format" in bad.json["error"]
    for path in ("/s/short", "/s/" + "A" * 32, "/s/" + share["path"][3:-1] + "!", "/s/" + "a" * 200):
        assert stranger.get(path + "?format=json").status_code == 404
    assert stranger.post(f"/api/sessions/{sid}/share").status_code == 401
    assert stranger.get("/api/shares").status_code == 401
    assert stranger.delete(f"/api/shares/{share['id']}").status_code == 401


def test_tokens_are_unguessable():
    from odysseus.store.shares import new_token

    tokens = {new_token() for _ in range(200)}
    assert len(tokens) == 200 and all(re.fullmatch(r"[A-Za-z0-9_-]{32}", t) for t in tokens)
