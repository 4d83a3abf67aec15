"""The newest page of a session's branch reads only that page's steps of the message tree (issue 22).

A turn start builds the model's context from ``MessageRepo.recent``; it used to walk the branch
all the way back to the root, so a start on a long session cost more with every message. The
work SQLite does (its virtual-machine steps, counted with a progress handler) must not grow with
the session's length, and the rows must be exactly what the full walk selects, on branched trees
too (regenerated replies, a moved branch head, a deleted message, another user's session).
"""

from __future__ import annotations

import random

import pytest

from odysseus.store import Store
from odysseus.store.messages import insert_message


@pytest.fixture
def store(tmp_path):
    store = Store(str(tmp_path / "odysseus.db"))
    yield store
    store.close()


def fill(store: Store, owner: str, session_id: str, count: int) -> list:
    with store.locked.tx() as db:
        return [
            insert_message(db, owner, session_id, "user" if i % 2 == 0 else "assistant", f"m{i}") for i in range(count)
        ]


def reference(store: Store, owner: str, session_id: str, limit: int):
    """The selected branch's newest ``limit`` messages, walked in Python from the head to the root."""
    with store.locked.read() as db:
        head = db.execute(
            "select coalesce(branch_head, (select max(id) from messages where session_id = ?)) from sessions"
            " where id = ?",
            [session_id, session_id],
        ).fetchone()[0]
        rows = {r[0]: r for r in db.execute("select id, parent_id, session_id, owner from messages").fetchall()}
    path, node = [], head
    while node is not None and node in rows:
        path.append(node)
        parent = rows[node][1]
        node = parent if parent is not None and parent < node else None
    mine = [i for i in path if rows[i][2] == session_id and rows[i][3] == owner]
    return sorted(mine[: limit + 1])[-limit:] if mine else [], len(mine) > limit


def steps(store: Store, fn) -> int:
    """SQLite virtual-machine steps (in units of 100) ``fn`` costs on the request-path connection."""
    counted = [0]

    def tick():
        counted[0] += 1
        return 0

    conn = store.locked.db.conn
    conn.set_progress_handler(tick, 100)
    try:
        fn()
    finally:
        conn.set_progress_handler(None, 100)
    return counted[0]


def test_the_newest_page_costs_the_same_on_a_short_and_a_long_session(store):
    short, long_ = store.sessions.create("u"), store.sessions.create("u")
    fill(store, "u", short["id"], 40)
    fill(store, "u", long_["id"], 6000)
    cost_short = steps(store, lambda: store.messages.recent("u", short["id"], 20))
    cost_long = steps(store, lambda: store.messages.recent("u", long_["id"], 20))
    assert [m["content"] for m in store.messages.recent("u", long_["id"], 3)] == ["m5997", "m5998", "m5999"]
    # the full walk would visit 6000 rows (about 150 times the short one's); a bounded walk visits 21
    assert cost_long <= 2 * cost_short + 20, (cost_short, cost_long)


@pytest.mark.parametrize("seed", range(6))
def test_the_bounded_page_selects_what_the_full_walk_selects(store, seed):
    rng = random.Random(seed)
    session = store.sessions.create("u")
    other = store.sessions.create("someone-else")
    fill(store, "someone-else", other["id"], 5)
    ids = fill(store, "u", session["id"], 30)
    with store.locked.tx() as db:
        for _ in range(40):  # alternatives: a message whose parent is an older message of the session
            parent = rng.choice(ids)
            db.execute("update sessions set branch_head = ? where id = ?", [parent, session["id"]])
            ids.append(insert_message(db, "u", session["id"], rng.choice(["user", "assistant"]), "alt"))
        db.execute("update sessions set branch_head = ? where id = ?", [rng.choice(ids), session["id"]])
    store.messages.delete("u", rng.choice(ids[1:-1]))  # children move up to its parent
    for limit in (1, 2, 5, 13, 200):
        rows = store.messages.recent("u", session["id"], limit)
        expected, more = reference(store, "u", session["id"], limit)
        assert [m["id"] for m in rows] == expected
        page, has_more = store.messages.page("u", session["id"], None, limit)
        assert [m["id"] for m in page] == expected and has_more == more
    assert store.messages.recent("someone-else", session["id"], 10) == []
