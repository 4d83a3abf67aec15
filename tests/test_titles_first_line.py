"""Session titles with ``TITLE_MODE = "first_line"`` (issue 22): written in the finished run's own greenlet
with no thread, from one statement that says whether this was the session's first reply. Real turns
against a fake OpenAI-compatible server; the rules are the model mode's (first reply only, never over a
rename, blank replies do not count, owner-scoped)."""

from __future__ import annotations

import threading

import pytest
from apphelpers import close_app
from fakeproviders import FakeProvider, Reply, openai_text
from waiting import wait_for

from odysseus import create_app
from odysseus.chats.titles import first_reply_state
from odysseus.llm.base import ProviderConfig

H = {"Origin": "http://localhost"}


@pytest.fixture
def model():
    server = FakeProvider(default=Reply(chunks=openai_text("A reply")))
    yield server
    server.close()


@pytest.fixture
def app(tmp_path, model):
    application = create_app(
        {
            "DATA_DIR": str(tmp_path),
            "AUTH": "none",
            "TITLE_MODE": "first_line",
            "PROVIDERS": [ProviderConfig(name="m", kind="openai", base_url=model.url + "/v1", default_model="x")],
        }
    )
    yield application
    close_app(application)


def chat(app, message, **extra):
    """One turn to its end; the session id, once the run has settled."""
    client = app.test_client()
    response = client.post("/api/chat_stream", json={"message": message, **extra}, headers=H)
    assert response.status_code == 200, response.get_data(as_text=True)
    response.get_data()
    run = app.extensions["odysseus.runs"].runs[response.headers["X-Odysseus-Run-Id"]]
    assert run.settled.wait(10)
    return response.headers["X-Odysseus-Session-Id"]


def title(app, session_id):
    return app.extensions["odysseus.store"].sessions.get("local", session_id)["title"]


def test_the_first_reply_titles_the_session_in_the_run_without_a_thread(app, monkeypatch):
    started = []
    real_start = threading.Thread.start

    def counting_start(self):
        if self.name == "title":
            started.append(self.name)
        return real_start(self)

    monkeypatch.setattr(threading.Thread, "start", counting_start)
    # settled is set before run_finished is sent, and the title is written after it: wait for the
    # title itself, not for another receiver
    finished = []

    def seen(run, **_):
        finished.append(run.run_id)

    hooks = app.extensions["odysseus.runs"].hooks  # the app's engine's own hooks
    hooks.run_finished.connect(seen)
    try:
        sid = chat(app, "## **Plan** a _trip_\nsecond line")
        wait_for(lambda: title(app, sid) == "Plan a trip", what="the first line as the title")
        chat(app, "# Another thing entirely", session=sid)
        wait_for(lambda: len(finished) == 2, what="run_finished sent")
        writer = app.extensions["odysseus.titles"]
        assert writer.write_title("local", sid, "m/x", "again") is None  # not the first reply any more
        assert title(app, sid) == "Plan a trip"  # a second reply leaves it alone
    finally:
        hooks.run_finished.disconnect(seen)
    assert started == []


def test_a_renamed_session_and_another_users_session_are_left_alone(app):
    store = app.extensions["odysseus.store"]
    session = store.sessions.create("local", "My own name")
    store.messages.add("local", session["id"], "user", "**Bold** start")
    store.messages.add("local", session["id"], "assistant", "reply")
    writer = app.extensions["odysseus.titles"]
    assert writer.write_title("local", session["id"], "m/x", "reply") is None
    assert title(app, session["id"]) == "My own name"
    foreign = store.sessions.create("someone-else", "**Bold** start")
    store.messages.add("someone-else", foreign["id"], "user", "**Bold** start")
    store.messages.add("someone-else", foreign["id"], "assistant", "reply")
    assert first_reply_state(store, "local", foreign["id"]) is None
    assert writer.write_title("local", foreign["id"], "m/x", "reply") is None
    assert store.sessions.get("someone-else", foreign["id"])["title"] == "**Bold** start"


def test_blank_replies_do_not_count_and_a_second_reply_stops_titling(app):
    store = app.extensions["odysseus.store"]
    writer = app.extensions["odysseus.titles"]
    session = store.sessions.create("local", "`Deploy` notes")
    store.messages.add("local", session["id"], "user", "`Deploy` notes")
    store.messages.add("local", session["id"], "assistant", " \n\t ")  # blank: not a reply
    assert first_reply_state(store, "local", session["id"]) is None
    store.messages.add("local", session["id"], "assistant", "the real reply")
    assert first_reply_state(store, "local", session["id"]) == ("`Deploy` notes", "`Deploy` notes")
    assert writer.write_title("local", session["id"], "m/x", "the real reply") == "Deploy notes"
    store.sessions.rename("local", session["id"], "`Deploy` notes")  # back to the automatic title
    store.messages.add("local", session["id"], "assistant", "a second reply")
    assert writer.write_title("local", session["id"], "m/x", "a second reply") is None
    assert title(app, session["id"]) == "`Deploy` notes"


def test_a_follow_up_turn_asks_nothing_and_a_blank_first_reply_still_leaves_the_title_to_the_next(
    app, model, monkeypatch
):
    """[issue 22] A turn whose history already holds a non-blank reply cannot be the session's first:
    its end runs no title statement. A blank first reply does not count, so the next one titles."""
    import odysseus.chats.titles as titles

    looks = []
    real = titles.first_reply_state

    def counting(store, owner, session_id):
        looks.append(session_id)
        return real(store, owner, session_id)

    monkeypatch.setattr(titles, "first_reply_state", counting)
    finished = []

    def seen(run, **_):
        finished.append(run.follows_reply)

    hooks = app.extensions["odysseus.runs"].hooks  # the app's engine's own hooks
    hooks.run_finished.connect(seen)
    try:
        model.script(Reply(chunks=openai_text(" \n ")))  # a blank first reply
        sid = chat(app, "**Blank** first")
        chat(app, "again", session=sid)
        wait_for(lambda: title(app, sid) == "Blank first", what="the second turn's reply titles the session")
        assert finished == [False, False] and looks == [sid]  # the blank reply ended early; the second looked
        chat(app, "a follow-up", session=sid)
        wait_for(lambda: len(finished) == 3, what="run_finished sent")
        assert finished[2] is True and looks == [sid]  # no look for the follow-up
        assert title(app, sid) == "Blank first"
    finally:
        hooks.run_finished.disconnect(seen)
