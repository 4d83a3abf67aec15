"""The ``Event`` value contract: construction, immutability, equality, numbering, copies and pickling.

``Event`` is a ``__slots__`` class (it was a frozen dataclass); everything code and the run log
relied on must hold: positional and keyword construction with defaults, no assignment, value
equality over all three fields, ``numbered`` sharing the payload, unhashable like a dict.
"""

from __future__ import annotations

import copy
import pickle

import pytest

from odysseus.events import DELTA, Event, delta, error, tool_call_delta


def test_positional_keyword_and_default_construction():
    assert Event("x").data == {} and Event("x").seq is None
    assert Event("x").data is not Event("x").data  # a fresh dict each time, as default_factory gave
    by_keyword = Event(type="usage", data={"data": {"input_tokens": 1}}, seq=7)
    assert (by_keyword.type, by_keyword.data, by_keyword.seq) == ("usage", {"data": {"input_tokens": 1}}, 7)
    assert Event("a", {"k": 1}, 3) == by_keyword.__class__("a", data={"k": 1}, seq=3)


def test_assignment_and_deletion_raise():
    event = delta("hi")
    for name in ("type", "data", "seq", "other"):
        with pytest.raises(AttributeError):
            setattr(event, name, 1)
    with pytest.raises(AttributeError):
        del event.seq
    assert not hasattr(event, "__dict__")  # no per-instance dict: what a held run keeps is three slots
    assert (event.type, event.data, event.seq) == (DELTA, {"delta": "hi"}, None)


def test_equality_is_over_all_three_fields_and_the_class():
    assert delta("a") == Event(DELTA, {"delta": "a"})
    assert delta("a") != delta("b")
    assert delta("a") != delta("a").numbered(1)
    assert delta("a").numbered(1) == delta("a").numbered(1)
    assert delta("a", thinking=True) != delta("a")
    assert delta("a") != (DELTA, {"delta": "a"}, None)  # not a tuple, whatever the fields
    assert delta("a") != "delta"
    assert [error("x", 500)] == [Event("error", {"error": "x", "status": 500})]


def test_numbered_shares_the_payload_and_leaves_the_original():
    event = tool_call_delta(0, "{", "call_1", "f")
    logged = event.numbered(42)
    assert logged.seq == 42 and event.seq is None
    assert logged.data is event.data and logged.type == event.type
    assert type(logged) is Event


def test_unhashable_like_the_frozen_dataclass_with_a_dict():
    with pytest.raises(TypeError):
        hash(delta("x"))


def test_repr_copy_deepcopy_and_pickle():
    event = Event("metrics", {"data": {"route": "p/m", "nested": [1, {"a": "\u00e9"}]}}, 9)
    assert repr(event) == "Event(type='metrics', data={'data': {'route': 'p/m', 'nested': [1, {'a': 'é'}]}}, seq=9)"
    assert copy.copy(event) is event
    deep = copy.deepcopy(event)
    assert deep == event and deep.data is not event.data and deep.data["data"] is not event.data["data"]
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        back = pickle.loads(pickle.dumps(event, protocol))
        assert back == event and type(back) is Event
