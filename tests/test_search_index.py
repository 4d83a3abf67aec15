"""The message search index behind a watermark (m312, issue 40): turns write no index rows, and a search
never misses a message.

Invariant under test (store/search.py): every message with an id at most the watermark is in
``messages_fts`` with its current text, and no message past it is. FTS5's own ``integrity-check``
compares the index with the messages table, so it fails on any row missing, extra or stale.
"""

from __future__ import annotations

import random
import sqlite3
import time

import pytest
from apphelpers import insert_running_run
from sqlite_utils import Database

from odysseus.config import DEFAULTS
from odysseus.runs.durable import PURGE_DUE, DurableLog
from odysseus.store import Store
from odysseus.store.migrations import MIGRATIONS

OWNER = "local"


@pytest.fixture
def store(tmp_path):
    store = Store(str(tmp_path / "odysseus.db"))
    yield store
    store.close()


def _watermark(store: Store) -> int:
    with store.locked.read() as db:
        return db.execute("select indexed_through from messages_fts_state").fetchone()[0]


def _indexed_rows(store: Store) -> int:
    with store.locked.read() as db:
        return db.execute("select count(*) from messages_fts_docsize").fetchone()[0]


def _check_integrity(store: Store) -> None:
    """FTS5 against the messages table: raises on a row missing, extra or stale (only when caught up)."""
    with store.locked.tx() as db:
        db.execute("insert into messages_fts(messages_fts, rank) values ('integrity-check', 1)")


def _found(store: Store, word: str) -> set:
    return {hit["message_id"] for hit in store.search.search(OWNER, word, limit=1000)}


def test_a_message_is_not_indexed_by_its_write_and_is_found_by_the_next_search(store):
    session = store.sessions.create(OWNER, "t")
    before = _watermark(store)
    message = store.messages.add(OWNER, session["id"], "user", "the walrus sings")
    assert _indexed_rows(store) == 0 and _watermark(store) == before  # the write touched no index page
    assert _found(store, "walrus") == {message}
    assert _watermark(store) == message and _indexed_rows(store) == 1
    _check_integrity(store)


def test_edits_and_deletes_on_both_sides_of_the_watermark_and_a_reused_id_keep_the_index_exact(store):
    """A random mix of writes, searches and catch-ups, checked against the messages themselves."""
    rng = random.Random(40)
    session = store.sessions.create(OWNER, "t")["id"]
    words = ["apple", "pear", "plum", "fig", "kiwi", "lime"]
    texts = {}  # message id -> its text now
    for step in range(400):
        action = rng.random()
        if action < 0.4 or not texts:
            text = " ".join(rng.sample(words, 2))
            texts[store.messages.add(OWNER, session, "user", text)] = text
        elif action < 0.6:
            message_id = rng.choice(list(texts))
            texts[message_id] = " ".join(rng.sample(words, 2))
            with store.locked.tx() as db:
                db.execute("update messages set content = ? where id = ?", [texts[message_id], message_id])
        elif action < 0.7:
            # the newest message deleted: SQLite gives its id to the next insert (no AUTOINCREMENT)
            message_id = max(texts) if rng.random() < 0.5 else rng.choice(list(texts))
            with store.locked.tx() as db:
                db.execute("delete from messages where id = ?", [message_id])
            del texts[message_id]
        elif action < 0.85:
            store.search.catch_up(batch=rng.choice([1, 3, 50]))
        else:
            word = rng.choice(words)
            assert _found(store, word) == {i for i, text in texts.items() if word in text.split()}, step
            _check_integrity(store)
    store.search.catch_up()
    _check_integrity(store)
    for word in words:
        assert _found(store, word) == {i for i, text in texts.items() if word in text.split()}


def test_a_reused_id_under_the_watermark_is_indexed_by_its_own_write(store):
    session = store.sessions.create(OWNER, "t")["id"]
    store.messages.add(OWNER, session, "user", "first")
    newest = store.messages.add(OWNER, session, "user", "second")
    store.search.catch_up()
    with store.locked.tx() as db:
        db.execute("delete from messages where id = ?", [newest])
    again = store.messages.add(OWNER, session, "user", "third")
    assert again == newest and _watermark(store) == newest  # under the watermark: the trigger indexed it
    with store.locked.read() as db:
        hits = db.execute("select rowid from messages_fts where messages_fts match 'third'").fetchall()
    assert hits == [(again,)]
    _check_integrity(store)


def test_the_catch_up_goes_in_batches_and_stops_at_the_newest_message_it_saw(store):
    session = store.sessions.create(OWNER, "t")["id"]
    ids = [store.messages.add(OWNER, session, "user", f"word{i} common") for i in range(10)]
    transactions = []

    def write(statements):  # the writer's role: one transaction per call, its row counts
        transactions.append(len(statements))
        with store.locked.tx() as db:
            return [db.execute(sql, list(params)).rowcount for sql, params in statements]

    store.search.use_writer(write)
    assert store.search.catch_up(batch=3) == 10
    assert len(transactions) == 4 and _watermark(store) == ids[-1]  # 3 + 3 + 3 + 1
    assert store.search.catch_up(batch=3) == 0 and len(transactions) == 4  # nothing past it: no write at all
    later = store.messages.add(OWNER, session, "user", "later common")
    assert _found(store, "common") == set(ids) | {later}
    _check_integrity(store)


def test_the_catch_up_runs_on_the_durable_writers_thread(tmp_path):
    path = str(tmp_path / "odysseus.db")
    store = Store(path)
    log = DurableLog(path, dict(DEFAULTS, EVENT_FLUSH_INTERVAL=3600.0), "w")
    try:
        store.search.use_writer(log.write)
        session = store.sessions.create(OWNER, "t")["id"]
        message = store.messages.add(OWNER, session, "assistant", "a reply about otters")
        assert _found(store, "otter") == {message}
        assert _watermark(store) == message
        _check_integrity(store)
    finally:
        log.close()
        store.close()


def test_a_database_from_before_the_watermark_keeps_its_index_and_its_edits(tmp_path):
    path = str(tmp_path / "odysseus.db")
    db = Database(sqlite3.connect(path, isolation_level=None))
    db.execute("BEGIN")
    db.table("_migrations").create({"name": str, "applied_at": str}, pk="name")
    for fn in MIGRATIONS[: MIGRATIONS.index(next(m for m in MIGRATIONS if m.__name__.startswith("m312")))]:
        fn(db)
        db.execute("insert into _migrations (name, applied_at) values (?, 'then')", [fn.__name__])
    now = time.time()
    db.execute(
        "insert into sessions (id, owner, title, created_at, updated_at) values ('s1', ?, 't', ?, ?)", [OWNER, now, now]
    )
    for text in ("old heron", "old crane", "old stork"):
        db.execute(
            "insert into messages (session_id, owner, role, content, created_at) values ('s1', ?, 'user', ?, ?)",
            [OWNER, text, now],
        )
    db.execute("COMMIT")
    db.conn.close()
    store = Store(path)  # runs m312
    try:
        assert _watermark(store) == 3 and _indexed_rows(store) == 3  # the old triggers' index, kept whole
        with store.locked.tx() as tx:
            tx.execute("update messages set content = 'old egret' where id = 2")  # under the watermark
            tx.execute("delete from messages where id = 3")
        _check_integrity(store)
        assert _found(store, "egret") == {2} and _found(store, "crane") == set() and _found(store, "stork") == set()
        assert _found(store, "old") == {1, 2}
    finally:
        store.close()


def test_no_message_index_is_written_for_a_reply_and_lookups_by_client_id_use_the_partial_one(store):
    conn = store.locked.db.conn
    names = {
        r[0] for r in conn.execute("select name from sqlite_master where type = 'index' and tbl_name = 'messages'")
    }
    assert "idx_messages_session_id_client_message_id" not in names
    sql = "select * from messages where session_id = ? and owner = ? and client_message_id = ?"
    plan = " ".join(str(r[3]) for r in conn.execute("explain query plan " + sql, ["s", OWNER, "c1"]))
    assert "idx_messages_owner_client_message_id" in plan, plan
    session = store.sessions.create(OWNER, "t")["id"]
    sent = store.messages.add(OWNER, session, "user", "hi", client_message_id="c1")
    store.messages.add(OWNER, session, "assistant", "hello")
    assert store.messages.by_client_id(OWNER, session, "c1")["id"] == sent
    assert store.messages.by_client_id("someone-else", session, "c1") is None


def test_a_running_run_has_no_purge_index_entry_and_a_finished_one_is_found_by_the_purge(store):
    conn = store.locked.db.conn
    plan = " ".join(str(r[3]) for r in conn.execute("explain query plan " + PURGE_DUE, [0.0, 50]))
    assert "idx_runs_events_purged_finished_at" in plan and "SCAN runs" not in plan, plan
    counted = (
        "select count(*) from runs indexed by idx_runs_events_purged_finished_at"
        " where events_purged = 0 and finished_at < ?"
    )
    with store.locked.tx() as db:
        _, run_id = insert_running_run(db, OWNER, "w", time.time() + 60)
    assert conn.execute(counted, [time.time() + 10]).fetchone()[0] == 0  # the start wrote no entry
    with store.locked.tx() as db:
        db.execute("update runs set status = 'done', finished_at = ? where run_id = ?", [time.time() - 5, run_id])
    assert conn.execute(PURGE_DUE, [time.time(), 50]).fetchall() == [(run_id,)]


def test_the_app_indexes_new_messages_in_the_janitors_upkeep_on_the_writers_thread(tmp_path):
    from apphelpers import close_app

    from odysseus import create_app

    app = create_app({"DATA_DIR": str(tmp_path), "AUTH": "none"})
    try:
        store, engine = app.extensions["odysseus.store"], app.extensions["odysseus.runs"]
        session = store.sessions.create(OWNER, "t")["id"]
        newest = store.messages.add(OWNER, session, "user", "a quiet heron")
        assert store.search._write == engine.durable.write  # the app hands the catch-up to its writer
        writes = []
        real_write = engine.durable.write
        engine.durable.write = lambda statements, timeout=None: writes.append(1) or real_write(statements, timeout)
        store.search.use_writer(engine.durable.write)
        for task in engine.maintenance:  # what the janitor runs every half lease
            task()
        assert _watermark(store) == newest and writes == [1]  # indexed, in one transaction of the writer
        _check_integrity(store)
    finally:
        close_app(app)
