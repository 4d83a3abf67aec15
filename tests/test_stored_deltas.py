"""A logged text delta is kept in one form (its payload text): same values, same frames, less memory.

``RunLog.append`` numbers a ``{"delta": s}`` / ``{"delta": s, "thinking": true}`` event into an
``events.StoredDelta``; everything a reader sees must be what the plain ``Event`` gave.
"""

from __future__ import annotations

import json

import pytest
from heldbytes import held_bytes_each

from odysseus.events import DELTA, Event, StoredDelta, delta
from odysseus.runs.run_log import RunLog, encode_payload
from odysseus.sse import agent_frame, chat_frame, research_frame

ODD_TEXTS = [
    "plain",
    "",
    "nul \x00 bell \x07 esc \x1b",
    'quote " backslash \\ slash /',
    "line\nbreak\r\ntab\t",
    "\u2028\u2029 separators",
    "caf\u00e9 \u20ac \U0001f600",
    ',"thinking":true}',  # looks like the thinking marker, inside the string
    "true}",
    "\ud83d lone",  # a lone surrogate (a provider never lets one through; a scripted turn could)
]


def _log() -> RunLog:
    return RunLog(max_events=10_000, max_bytes=1 << 24)


@pytest.mark.parametrize("text", ODD_TEXTS)
@pytest.mark.parametrize("thinking", [False, True])
def test_a_logged_text_delta_is_stored_and_equal_to_the_event(text, thinking):
    event = delta(text, thinking=thinking)
    logged, payload = _log().append(event)
    assert type(logged) is StoredDelta and logged.payload is payload
    assert payload == encode_payload(event.data) == json.dumps(event.data, ensure_ascii=False, separators=(",", ":"))
    assert logged == event.numbered(1) and event.numbered(1) == logged
    assert logged.data == event.data and logged.data is not logged.data  # decoded on each read, never cached
    assert (logged.type, logged.seq) == (DELTA, 1)
    assert logged.numbered(7) == event.numbered(7) and type(logged.numbered(7)) is Event
    with pytest.raises(AttributeError):
        logged.payload = "{}"  # type: ignore[misc]


@pytest.mark.parametrize("text", ODD_TEXTS)
@pytest.mark.parametrize("thinking", [False, True])
def test_every_projection_frames_a_stored_delta_byte_identically(text, thinking):
    event = delta(text, thinking=thinking)
    logged, payload = _log().append(event)
    plain = event.numbered(logged.seq)
    for projection in (chat_frame, agent_frame, research_frame):
        assert projection(logged, payload) == projection(plain, payload), projection.__name__
        assert projection(logged, payload) == projection(plain), projection.__name__  # without the payload too


def test_other_shapes_stay_plain_events():
    log = _log()
    shapes = [
        Event(DELTA, {"delta": "x", "thinking": False}),
        Event(DELTA, {"thinking": True, "delta": "x"}),  # another key order: the general encoder's text
        Event(DELTA, {"delta": 3}),
        Event(DELTA, {"delta": "x", "extra": 1}),
        Event("usage", {"delta": "x"}),
    ]
    for event in shapes:
        logged, payload = log.append(event)
        assert type(logged) is Event and logged.data is event.data
        assert payload == json.dumps(event.data, ensure_ascii=False, separators=(",", ":"))


def test_a_held_delta_entry_is_smaller_in_its_stored_form():
    def held_bytes(make) -> float:
        """Bytes per held entry: logs of 20 entries each."""

        def build() -> RunLog:
            log = _log()
            for i in range(20):
                log.append(make(f" token{i}"))
            return log

        return held_bytes_each(build, 50) / 20

    stored = held_bytes(delta)
    full = held_bytes(lambda text: Event(DELTA, {"delta": text, "n": 1}))  # another shape: kept as an Event
    assert stored < full - 150, (stored, full)  # the dict and the second copy of the text are gone
