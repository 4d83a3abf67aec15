"""A closed log is sealed once its run settles: compact in memory, and every read the same as before.

``RunLog.seal`` replaces a closed log's entries with ``SealedEntries`` (payload texts joined,
types, offsets). Whatever a reader asks (any cursor, any limit, newest first, the last type,
any projection's frames) must give what the unsealed log gave, byte for byte.
"""

from __future__ import annotations

import json

import pytest
from heldbytes import held_bytes_each

from odysseus.events import (
    CHAT_TERMINAL,
    CLOSE,
    DELTA,
    DONE,
    MESSAGE_SAVED,
    USAGE,
    Event,
    StoredDelta,
    StoredEvent,
    delta,
    usage,
)
from odysseus.runs.follow import encode, last_sent_seq
from odysseus.runs.run_log import LARGE_PAYLOAD, ByteBudget, LogFull, RunLog, SealedEntries
from odysseus.sse import agent_frame, chat_frame, research_frame

ODD = ["plain", "", "nul \x00 esc \x1b", 'quote " back \\', "line\nbreak", "\u2028", "caf\u00e9 \U0001f600", "\ud83d"]


def _events(base_text: str = "") -> list:
    events = [Event("run_started", {"run_id": "r_1"}), Event("start", {"task_id": "t", "model": "m/x"})]
    for text in ODD:
        events.append(delta(base_text + text))
        events.append(delta(text, thinking=True))
    events += [
        Event(DELTA, {"delta": "x", "extra": [1, 2]}),  # another shape: logged as a plain Event
        delta("big " * 700),  # a payload past LARGE_PAYLOAD: kept as its own string
        delta("after the big one"),
        usage(3, 4, cached=None),
        Event(MESSAGE_SAVED, {"message_id": 7, "role": "assistant"}),
        Event(CHAT_TERMINAL, {"status": "done", "content": "".join(ODD), "nested": {"a": [None, True, 1.5]}}),
        Event(DONE, {}),
        Event(CLOSE, {}),
    ]
    return events


def _filled(base: int = 0, events=None) -> RunLog:
    log = RunLog(max_events=10_000, max_bytes=1 << 24, base=base)
    for event in events or _events():
        log.append(event)
    return log


def _same(left, right) -> None:
    assert len(left) == len(right)
    for (event_a, payload_a), (event_b, payload_b) in zip(left, right, strict=True):
        assert payload_a == payload_b
        assert (event_a.type, event_a.seq) == (event_b.type, event_b.seq)
        assert event_a.data == event_b.data == json.loads(payload_a)
        assert (type(event_a) is StoredDelta) == (type(event_b) is StoredDelta)


@pytest.mark.parametrize("base", [0, 41])
def test_every_read_of_a_sealed_log_is_what_the_open_log_gave(base):
    log = _filled(base)
    before = {after: log.read_after(after) for after in range(base - 2, log.last_seq + 2)}
    limited = {after: log.read_after(after, limit=3) for after in range(base, log.last_seq + 1)}
    newest, last_type, size, nbytes = list(log.newest_first()), log.last_type, len(log), log.bytes
    assert log.seal()
    assert isinstance(log._entries, SealedEntries)
    for after, entries in before.items():
        _same(log.read_after(after), entries)
        _same(log.wait_after(after, timeout=0), entries)
    for after, entries in limited.items():
        _same(log.read_after(after, limit=3), entries)
    _same(list(log.newest_first()), newest)
    assert (log.last_type, len(log), log.bytes, log.last_seq) == (last_type, size, nbytes, base + size)


@pytest.mark.parametrize("projection", [chat_frame, agent_frame, research_frame])
def test_every_projection_frames_a_sealed_log_byte_identically(projection):
    log = _filled()
    frames = encode(log.read_after(0), projection)
    last = last_sent_seq(log.newest_first(), projection)
    log.seal()
    assert encode(log.read_after(0), projection) == frames
    assert last_sent_seq(log.newest_first(), projection) == last
    for after in range(log.last_seq + 1):  # a resume from any cursor: the same tail of the same frames
        assert encode(log.read_after(after), projection) == encode(_filled().read_after(after), projection)


def test_sealed_events_keep_their_kind_and_decode_only_when_read():
    log = _filled()
    plain = log.read_after(0)
    log.seal()
    sealed = log.read_after(0)
    for (was, _), (now, payload) in zip(plain, sealed, strict=True):
        assert isinstance(now, StoredEvent) and now.payload is payload
        assert (type(now) is StoredDelta) == (type(was) is StoredDelta)
        assert now == was and now.data is not now.data  # decoded on each read, never cached
    assert sealed[-1][0].type == CLOSE and sealed[-1][0].seq == log.last_seq
    with pytest.raises(IndexError):
        log._entries[len(log)]
    assert log._entries[-1][0].seq == log.last_seq


def test_only_a_closed_log_is_sealed_and_only_once():
    log = RunLog(max_events=100, max_bytes=1 << 20)
    assert not log.seal()  # empty
    log.append(delta("a"))
    assert not log.seal()  # still open: appends may come
    assert type(log._entries) is list
    log.append(Event(CLOSE, {}))
    assert log.seal() and not log.seal()
    with pytest.raises(LogFull):
        log.append(Event(DONE, {}))  # a sealed log is closed: nothing more, lifecycle included
    assert len(log) == 2


def test_release_of_a_sealed_log_gives_back_its_bytes():
    budget = ByteBudget(1 << 20)
    log = RunLog(max_events=100, max_bytes=1 << 20, budget=budget)
    for event in _events():
        log.append(event)
    held = budget.used
    assert held == log.bytes > 0
    log.seal()
    assert budget.used == held  # the budget counts payload bytes, sealed or not
    assert log.release() == held and budget.used == 0
    assert log.read_after(0) == [] and log.wait_after(0, timeout=0) == [] and log.last_type is None


def test_a_sealed_log_holds_a_fraction_of_the_memory():
    def held_bytes(seal: bool) -> float:
        def build() -> RunLog:
            log = RunLog(max_events=10_000, max_bytes=1 << 24)
            log.append(Event("run_started", {"run_id": "r_1"}))
            for i in range(200):
                log.append(delta(f" token{i}"))
            log.append(usage(3, 200))
            log.append(Event(CHAT_TERMINAL, {"status": "done", "content": "x" * 1200}))
            log.append(Event(CLOSE, {}))
            if seal:
                log.seal()
            return log

        return held_bytes_each(build, 30)

    sealed, open_ = held_bytes(True), held_bytes(False)
    assert sealed < open_ * 0.4, (sealed, open_)  # three objects per event become one string's share


def test_a_log_whose_ids_do_not_run_from_its_base_is_not_sealed():
    log = RunLog(max_events=100, max_bytes=1 << 20)
    log.append(delta("a"))
    log.append(Event(CLOSE, {}))
    log._entries.insert(0, (Event(USAGE, {}, 99), "{}"))  # an impossible log: sealing must not renumber it
    assert not log.seal() and type(log._entries) is list


def test_a_large_payload_is_shared_by_every_read_and_a_small_one_is_copied_out():
    log = _filled()
    log.seal()
    first, again = log.read_after(0), log.read_after(0)
    large = [i for i, (_, payload) in enumerate(first) if len(payload) >= LARGE_PAYLOAD]
    assert large, "the fixture holds a large payload"
    for i in large:
        assert first[i][1] is again[i][1] and first[i][0].payload is first[i][1]
    small = next(i for i, (_, payload) in enumerate(first) if 5 < len(payload) < LARGE_PAYLOAD)
    assert first[small][1] == again[small][1] and first[small][1] is not again[small][1]


@pytest.mark.parametrize("max_chars", [1, 40, 200, 5000])
def test_a_follower_page_of_a_sealed_log_is_bounded_by_the_text_it_copies(max_chars):
    log = RunLog(max_events=10_000, max_bytes=1 << 24)
    for i in range(300):
        log.append(delta(f"t{i} "))
    log.append(delta("L" * 3000))
    log.append(Event(CLOSE, {}))
    every = log.read_after(0)
    log.seal()
    cursor, pages = 0, []
    while True:
        page = log.wait_after(cursor, timeout=0, limit=100, max_chars=max_chars)
        if not page:
            break
        assert 1 <= len(page) <= 100
        copied = sum(len(payload) for _, payload in page if len(payload) < LARGE_PAYLOAD)
        assert copied <= max_chars or len(page) == 1  # one entry always comes, however long
        pages.append(page)
        cursor = page[-1][0].seq
    _same([entry for page in pages for entry in page], every)  # in order, no gap, no duplicate
    assert log.wait_after(0, timeout=0, limit=100) == log.read_after(0, limit=100)  # no bound asked: the limit alone
