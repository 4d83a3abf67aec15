"""The SQL a chat turn start may cost (issue 22), pinned with ``set_trace_callback``.

A start runs on the request thread before the first byte: these tests count its statements
and commits on the request-path connection, and the whole turn's on every connection (the
run's own reads, the durable writer's group commit and final save). No statement may ask
``sqlite_master`` (sqlite-utils introspection: ``db["table"]``, ``rows_where``, ``insert``):
the hot path uses plain SQL. A start with 20,000 finished runs held in memory runs exactly
the same statements as with none, and never walks the held runs.
"""

from __future__ import annotations

import re
import threading
import time

import pytest
from apphelpers import close_app
from fakeproviders import FakeProvider, Reply, openai_text

from bench.turn_start import hold_finished_runs
from odysseus import create_app
from odysseus.llm.base import ProviderConfig

H = {"Origin": "http://localhost"}

#: the request thread's budget for one chat turn start (new session / existing session)
# +1 since the admin's provider connections: each start reads their version counter, so a
# provider added on another worker is used by the next turn here (odysseus/llm/provider_sync.py)
START_STATEMENTS = {"new": 11, "existing": 13}
START_WRITES = 4  # insert session (or not) + insert message + update session head + insert run
WRITER_COMMITS_PER_TURN = 3  # one final save; at most two group flushes besides on a loaded machine


@pytest.fixture
def model():
    server = FakeProvider(default=Reply(chunks=openai_text("hello ", "there")))
    yield server
    server.close()


@pytest.fixture
def traced(tmp_path, model):
    """An app whose request-path and writer connections record every statement, split by thread."""
    app = create_app(
        {
            "DATA_DIR": str(tmp_path),
            "AUTH": "none",
            "TITLE_MODE": "first_line",
            "EVENT_FLUSH_INTERVAL": 0.05,
            "EVICT_GRACE": 3600,
            "PROVIDERS": [ProviderConfig(name="m", kind="openai", base_url=model.url + "/v1", default_model="x")],
        }
    )
    engine, store = app.extensions["odysseus.runs"], app.extensions["odysseus.store"]
    main = threading.get_ident()
    log = {"request": [], "other": [], "writer": []}
    # installed once, before any turn: swapping a trace callback while another thread is inside a
    # statement would wait on that thread's connection mutex while holding the GIL it needs
    store.locked.trace(lambda sql: log["request" if threading.get_ident() == main else "other"].append(sql))
    engine.start_background()
    engine.durable._native.call(lambda: engine.durable._db().set_trace_callback(log["writer"].append))
    yield app, log
    engine.close()
    store.locked.trace(None)
    close_app(app)


def normalise(statements):
    """Top-level statements once each: trigger lines ``-- ...``, a statement's repeats, the FTS5 module's
    own reads (``'main'.'messages_fts_config'``, on a connection's first FTS write) and the busy timeout
    ``begin_immediate`` switches off and on around BEGIN (a connection setting: no page is read) dropped."""
    out = []
    for statement in statements:
        text = " ".join(statement.split()).lower()
        if text.startswith(("--", "pragma busy_timeout")) or "'main'." in text:
            continue
        if not out or out[-1] != text:
            out.append(text)
    return out


def shape(statement: str) -> str:
    """A statement with its literal values blanked (ids, times and text differ between turns)."""
    return re.sub(r"\b\d+(\.\d+)?\b", "?", re.sub(r"'(?:[^']|'')*'", "?", statement))


def introspection(statements):
    return [s for s in statements if "sqlite_master" in s or s.startswith(("pragma table_", "pragma index_"))]


def turn(app, log, session_id=None, client_message_id=None):
    """One chat turn: the request thread's statements until the response exists, then the turn's end."""
    client = app.test_client()
    engine = app.extensions["odysseus.runs"]
    # the router's periodic provider check (every 2 s on any request) is not the start's cost:
    # checked just now, only the start's own version read is traced whatever time has passed
    app.extensions["odysseus.router"].sync(force=True)
    log["request"].clear()
    body = {"message": "hi there"}
    if session_id:
        body["session"] = session_id
    if client_message_id:
        body["client_message_id"] = client_message_id
    response = client.post("/api/chat_stream", json=body, headers=H, buffered=False)
    start = normalise(log["request"])
    assert response.status_code == 200
    run = engine.runs[response.headers["X-Odysseus-Run-Id"]]
    text = b"".join(response.response)
    response.close()
    assert run.settled.wait(10) and b"there" in text
    return start, run


def test_one_chat_turn_start_stays_within_its_sql_budget(traced):
    app, log = traced
    engine = app.extensions["odysseus.runs"]
    start, run = turn(app, log)  # a new session
    assert introspection(start) == [], start
    assert len(start) <= START_STATEMENTS["new"], start
    assert start.count("begin immediate") == 1 and start.count("commit") == 1, start
    assert len([s for s in start if s.startswith(("insert", "update", "delete"))]) == START_WRITES, start
    log["other"].clear()
    log["writer"].clear()
    again, second = turn(app, log, session_id=run.session_id)  # the next turn on that session
    assert introspection(again) == [], again
    assert len(again) <= START_STATEMENTS["existing"], again
    assert again.count("commit") == 1 and second.run_id != run.run_id
    engine.durable.flush()
    # the whole second turn: the run's own reads (history, context) and the writer's saves
    others, writer = normalise(log["other"]), normalise(log["writer"])
    assert introspection(others) == [] and introspection(writer) == [], (others, writer)
    assert others.count("commit") == 0, others  # the run writes nothing on the request-path connection
    assert 1 <= writer.count("commit") <= WRITER_COMMITS_PER_TURN, writer
    saved = [s for s in writer if s.startswith("insert into messages")]
    assert len(saved) == 1, writer  # the reply, saved once in the final transaction


class CountingRuns(dict):
    """``engine.runs`` that counts every walk over its runs."""

    walks = 0

    def values(self):
        CountingRuns.walks += 1
        return super().values()

    def items(self):
        CountingRuns.walks += 1
        return super().items()

    def __iter__(self):
        CountingRuns.walks += 1
        return super().__iter__()


def test_a_start_with_20000_finished_runs_held_costs_the_same_statements_as_with_none(traced):
    app, log = traced
    engine = app.extensions["odysseus.runs"]
    _, first = turn(app, log)
    without, _ = turn(app, log, session_id=first.session_id)
    hold_finished_runs(engine, 20_000)
    engine.runs = CountingRuns(engine.runs)
    CountingRuns.walks = 0
    began = time.process_time()
    held, run = turn(app, log, session_id=first.session_id)
    assert CountingRuns.walks == 0  # neither the start nor the run walked the held runs
    assert [shape(s) for s in held] == [shape(s) for s in without]
    engine.sweep()  # the janitor's pass: due evictions only, none of the 20,000 is due
    assert CountingRuns.walks == 0 and len(engine.runs) == 20_000 + 3
    assert time.process_time() - began < 5  # generous: a walk per start would still pass, the counter would not
    assert run.status == "done"


def test_a_send_with_a_client_message_id_costs_one_statement_more_and_a_retry_attaches(traced):
    """The page sends every message with a ``client_message_id``: the earlier run and the earlier user
    message with that id are looked up in one statement (``RunRepo.client_message_state``)."""
    app, log = traced
    store = app.extensions["odysseus.store"]
    _, first = turn(app, log)
    plain, _ = turn(app, log, session_id=first.session_id)
    sent, run = turn(app, log, session_id=first.session_id, client_message_id="c-1")
    assert introspection(sent) == [] and len(sent) == len(plain) + 1, (plain, sent)
    again = app.test_client().post(
        "/api/chat_stream",
        json={"message": "hi there", "session": first.session_id, "client_message_id": "c-1"},
        headers=H,
    )
    assert again.status_code == 200 and again.headers["X-Odysseus-Run-Id"] == run.run_id  # attached, not a new turn
    again.get_data()
    row, exists = store.runs.client_message_state("local", first.session_id, "c-1")
    assert row == store.runs.by_client_message("local", first.session_id, "c-1") and row["run_id"] == run.run_id
    assert exists and store.messages.by_client_id("local", first.session_id, "c-1") is not None
    assert store.runs.client_message_state("local", first.session_id, "c-2") == (None, False)
    assert store.runs.client_message_state("someone-else", first.session_id, "c-1") == (None, False)
