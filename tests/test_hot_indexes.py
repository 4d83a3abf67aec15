"""Indexes on the hot tables: none a turn pays for twice, and no read a turn or the purge makes scans a table.

A turn's start inserts a run row and its final save updates it: every index on ``runs`` is a
page each of them writes. The purge of durable events past the replay window runs on the
writer's thread every few seconds; a scan of every run there would hold up final saves for as
long as the table is big; a new chat's first send from the page (a ``client_message_id`` and no
session) looks its session up by owner and client id on the request path.
"""

from __future__ import annotations

import time

from apphelpers import insert_running_run

from odysseus.config import DEFAULTS
from odysseus.events import DELTA, Event
from odysseus.runs.durable import PURGE_DUE, DurableLog, read_events
from odysseus.runs.run_log import encode_payload
from odysseus.store import Store
from odysseus.store.migrations import MIGRATIONS, migrate

OWNER = "local"


def _indexes(db) -> set:
    return {r[0] for r in db.execute("select name from sqlite_master where type = 'index' and tbl_name = 'runs'")}


def test_no_index_repeats_another_s_leading_column(tmp_path):
    store = Store(str(tmp_path / "odysseus.db"))
    try:
        names = _indexes(store.locked.db.conn)
        assert "idx_runs_status_lease_until" in names
        assert "idx_runs_status" not in names  # the composite answers status = ? on its own
        plan = " ".join(
            str(r[3])
            for r in store.locked.db.conn.execute(
                "explain query plan select run_id from runs where status = ?", ["running"]
            )
        )
        assert "idx_runs_status_lease_until" in plan
    finally:
        store.close()


def test_the_purge_query_uses_its_index_and_never_scans_the_runs(tmp_path):
    store = Store(str(tmp_path / "odysseus.db"))
    try:
        plan = " ".join(str(r[3]) for r in store.locked.db.conn.execute("explain query plan " + PURGE_DUE, [0.0, 50]))
        assert "idx_runs_events_purged_finished_at" in plan and "SCAN runs" not in plan, plan
    finally:
        store.close()


def test_runs_from_before_durable_logs_are_found_by_the_purge_after_the_migration(tmp_path):
    path = str(tmp_path / "odysseus.db")
    store = Store(path)
    now = time.time()
    with store.locked.tx() as db:
        session_id, run_id = insert_running_run(db, OWNER, "w", now + 60)
        # as m005 left a run made before it: no events_purged
        db.execute(
            "update runs set status = 'done', finished_at = ?, events_purged = null where run_id = ?",
            [now - 3600, run_id],
        )
        db.execute("create index idx_runs_status on runs (status)")  # as before m150
        db.execute("delete from _migrations where name = 'm150_runs_index_upkeep'")
        migrate(store.locked.db)
    assert "m150_runs_index_upkeep" in [m.__name__ for m in MIGRATIONS]
    conn = store.locked.db.conn
    assert conn.execute("select events_purged from runs where run_id = ?", [run_id]).fetchone()[0] == 0
    assert "idx_runs_status" not in _indexes(conn)
    store.close()


def test_the_purge_deletes_only_runs_finished_past_the_window_once(tmp_path):
    path = str(tmp_path / "odysseus.db")
    store = Store(path)
    log = DurableLog(path, dict(DEFAULTS, EVENT_FLUSH_INTERVAL=3600.0, EVICT_GRACE=60), "w")
    try:
        now = time.time()
        with store.locked.tx() as db:
            runs = {name: insert_running_run(db, OWNER, "w", now + 60)[1] for name in ("old", "recent", "running")}
        for run_id in runs.values():
            event = Event(DELTA, {"delta": "x"}, 1)
            log.enqueue(run_id, (event, encode_payload(event.data)))
        log.flush()
        with store.locked.tx() as db:
            for name, finished in (("old", now - 120), ("recent", now - 10)):
                db.execute("update runs set status = 'done', finished_at = ? where run_id = ?", [finished, runs[name]])
        assert log.purge() == 1
        assert log.purge() == 0  # marked: never found again
        with store.locked.read() as db:
            kept = {name: len(read_events(db, run_id, 0)) for name, run_id in runs.items()}
            purged = dict(db.execute("select run_id, events_purged from runs").fetchall())
        assert kept == {"old": 0, "recent": 1, "running": 1}
        assert purged[runs["old"]] == 1 and purged[runs["recent"]] == 0 and purged[runs["running"]] == 0
    finally:
        log.close()
        store.close()


def test_a_send_without_a_session_finds_its_client_id_through_an_index(tmp_path):
    store = Store(str(tmp_path / "odysseus.db"))
    try:
        conn = store.locked.db.conn
        sql = (
            "select session_id from messages where owner = ? and client_message_id = ? and role = 'user'"
            " order by id desc limit 1"
        )
        plan = " ".join(str(r[3]) for r in conn.execute("explain query plan " + sql, ["local", "c1"]))
        assert "idx_messages_owner_client_message_id" in plan and "SCAN messages" not in plan, plan
        session = store.sessions.create(OWNER, "t")
        store.messages.add(OWNER, session["id"], "user", "hi", client_message_id="c1")
        store.messages.add(OWNER, session["id"], "assistant", "hello")
        assert store.messages.session_of_client_id(OWNER, "c1") == session["id"]
        assert store.messages.session_of_client_id("someone-else", "c1") is None
        assert store.messages.session_of_client_id(OWNER, "c2") is None
        # partial: only messages sent with a client id are in it
        assert (
            conn.execute(
                "select count(*) from messages indexed by idx_messages_owner_client_message_id"
                " where client_message_id is not null"
            ).fetchone()[0]
            == 1
        )
    finally:
        store.close()
