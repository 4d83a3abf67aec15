"""Packed durable rows on the real server: a long reply resumed from SQLite after a restart, at every kind of cursor.

The run is written while it streams (several flushes, each one packed row) and by its final
save; after a restart the memory log is gone, so every resume below is served by
``follow_durable`` from the packed rows: from the first, a middle and the last event of a
pack, across packs and at the end, with no gap and no duplicate.
"""

from __future__ import annotations

import os
import sqlite3

import pytest
from fakeproviders import FakeProvider, Reply, openai_text
from sseclient import open_stream, post_chat, text_of, types_of

#: 600 pieces of reply text, some hostile (quotes, newlines, NUL, non-BMP), one bigger than a pack's size cap
TEXTS = [f"w{i} " if i % 7 else f'"q{i}"\n\x00 \u2603\U0001f600 ' for i in range(600)]
TEXTS[300] = "\u00e9" * 70_000


@pytest.fixture
def model():
    with FakeProvider(default=Reply(chunks=openai_text(*TEXTS), delay=0.002)) as fake:
        yield fake


def _env(model):
    return {
        "OPENAI_BASE_URL": model.url + "/v1",
        "OPENAI_API_KEY": "sk-x",
        "OPENAI_MODEL": "m",
        "ODYSSEUS_EVENT_FLUSH_INTERVAL": "0.05",
        "ODYSSEUS_RUN_MAX_BYTES": str(64 * 1024 * 1024),
    }


def _rows(data_dir: str, run_id: str):
    conn = sqlite3.connect(os.path.join(data_dir, "odysseus.db"), timeout=5)
    try:
        return conn.execute("select seq, from_seq from run_events where run_id = ? order by seq", [run_id]).fetchall()
    finally:
        conn.close()


def _after(frames, cursor):
    """The frames a client holding ``cursor`` must get: those after the frame with that id (id-less ones too)."""
    out, seen = [], False
    for frame in frames:
        if frame["id"] is not None:
            seen = frame["id"] > cursor
        if seen:
            out.append(frame)
    return out


def test_a_long_reply_resumed_from_packed_rows_after_a_restart(server_factory, tmp_path, model):
    data_dir = str(tmp_path / "packs")
    server = server_factory(_env(model), data_dir=data_dir)
    stream = post_chat(server.url, "pack this reply", timeout=60)
    session_id, run_id = stream.headers["X-Odysseus-Session-Id"], stream.headers["X-Odysseus-Run-Id"]
    full = stream.events()
    assert text_of(full) == "".join(TEXTS) and types_of(full)[-1] == "[DONE]"
    ids = [f["id"] for f in full if f["id"] is not None]
    assert len(ids) > 600

    rows = _rows(data_dir, run_id)
    events = sum(seq - (first if first is not None else seq) + 1 for seq, first in rows)
    assert events >= ids[-1] - ids[0] + 1  # every sent id is durable (unsent lifecycle events too)
    assert len(rows) * 5 <= events, rows  # packed: far fewer rows than events
    packs = [(first, seq) for seq, first in rows if first is not None]
    assert len(packs) >= 2

    server.stop()
    again = server_factory(_env(model), data_dir=data_dir)  # nothing in memory: every resume reads SQLite
    cursors = {0, ids[0], ids[-2], ids[-1]}
    for first, last in packs:
        cursors |= {first - 1, first, (first + last) // 2, last - 1, last}
    for cursor in sorted(cursors):
        resumed = open_stream(
            "GET", f"{again.url}/api/chat/resume/{session_id}", headers={"Last-Event-ID": str(cursor)}, timeout=20
        )
        if cursor >= ids[-1]:  # at or past the last frame sent (ended_before reads the packed tail): 204
            assert resumed.status_code == 204, cursor
            continue
        assert resumed.status_code == 200, (cursor, resumed.status_code)
        assert resumed.events() == _after(full, cursor), cursor
