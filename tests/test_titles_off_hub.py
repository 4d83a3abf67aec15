"""[issue 40] A title costs the streams nothing they can see: its one write goes to the run engine's
native writer (``DurableLog.write``), never to the request-path connection the hub uses, in both
title modes; and the writer's ``write`` is one transaction that rolls back whole on a failure."""

from __future__ import annotations

import sqlite3

import pytest
from apphelpers import close_app
from fakeproviders import FakeProvider, Reply, openai_text
from waiting import wait_for

from odysseus import create_app
from odysseus.llm.base import ProviderConfig

H = {"Origin": "http://localhost"}


@pytest.fixture
def model():
    server = FakeProvider(default=Reply(chunks=openai_text("**Trip** to Rome.\nextra")))
    yield server
    server.close()


def _app(tmp_path, model, mode):
    return create_app(
        {
            "DATA_DIR": str(tmp_path),
            "AUTH": "none",
            "TITLE_MODE": mode,
            "PROVIDERS": [ProviderConfig(name="m", kind="openai", base_url=model.url + "/v1", default_model="x")],
        }
    )


@pytest.mark.parametrize("mode, expected", [("model", "Trip to Rome"), ("first_line", "Plan my holiday")])
def test_the_title_update_never_runs_on_the_request_path_connection(tmp_path, model, mode, expected):
    app = _app(tmp_path, model, mode)
    hub_statements: list = []
    store = app.extensions["odysseus.store"]
    durable = app.extensions["odysseus.runs"].durable
    writes: list = []
    real_write = durable.write

    def counting_write(statements, timeout=None):
        writes.append([sql for sql, _ in statements])
        return real_write(statements, timeout)

    durable.write = counting_write
    store.locked.trace(hub_statements.append)
    try:
        response = app.test_client().post("/api/chat_stream", json={"message": "**Plan** my _holiday_"}, headers=H)
        assert response.status_code == 200
        response.get_data()
        sid = response.headers["X-Odysseus-Session-Id"]
        wait_for(lambda: store.sessions.get("local", sid)["title"] == expected, what="the new title")
    finally:
        store.locked.trace(None)
        close_app(app)
    assert writes == [["update sessions set title = ? where id = ? and owner = ? and title = ?"]]
    assert not [s for s in hub_statements if "update sessions set title" in s.lower()]
    assert any("from messages" in s for s in hub_statements)  # the look is a read on the hub's connection


def test_a_failed_write_rolls_back_every_statement_and_says_so(tmp_path, model):
    app = _app(tmp_path, model, "first_line")
    try:
        store = app.extensions["odysseus.store"]
        durable = app.extensions["odysseus.runs"].durable
        session = store.sessions.create("local", "Before")
        failures = durable.failures
        with pytest.raises(sqlite3.OperationalError):
            durable.write(
                [
                    ("update sessions set title = ? where id = ?", ["After", session["id"]]),
                    ("update no_such_table set x = 1", []),
                ],
                timeout=10,
            )
        assert store.sessions.get("local", session["id"])["title"] == "Before"
        assert durable.failures == failures + 1
        assert durable.write([("update sessions set title = ? where id = ?", ["After", session["id"]])]) == [1]
        assert store.sessions.get("local", session["id"])["title"] == "After"
    finally:
        close_app(app)


def test_the_title_stops_reading_once_it_has_its_first_line():
    from odysseus.chats.titles import MAX_TITLE, clean_title, title_is_complete

    assert not title_is_complete("Trip to")  # the first line may go on
    assert not title_is_complete("\n**\n  \nTrip to")  # blank and markup-only lines do not count
    assert title_is_complete("**Trip** to Rome.\n")  # a finished line is all the title uses
    assert clean_title("**Trip** to Rome.\n") == clean_title("**Trip** to Rome.\nand a long tail") == "Trip to Rome"
    going = "word " * (2 * MAX_TITLE // 5)
    assert title_is_complete(going) and len(clean_title(going)) <= MAX_TITLE  # a line past twice the cut


def test_a_model_title_reads_no_more_than_its_first_line(monkeypatch):
    from types import SimpleNamespace

    import odysseus.chats.titles as titles
    from odysseus.events import DELTA, Event

    read_past: list = []

    def stream(candidates, request, cancel):
        yield Event(DELTA, {"delta": "**Trip** to"})
        yield Event(DELTA, {"delta": " Rome\nand"})
        read_past.append(request.max_tokens)  # the title asked for more than it needed
        yield Event(DELTA, {"delta": " a long tail"})

    monkeypatch.setattr(titles, "stream_route", stream)
    assert titles.ask_model([SimpleNamespace(model="x")], "Plan my holiday", "A reply", 5) == "Trip to Rome"
    assert read_past == []
