"""The incremental string-field extractor: every split point, every escape, surrogate pairs, junk."""

from __future__ import annotations

import json
import random

import pytest

from odysseus.documents.partial_json import PartialFields

FIELDS = ("title", "language", "content")
TRICKY = {
    "title": 'Ode "to" \\ JSON \u00e9',
    "other": {"nested": ['a"b', {"content": "not me"}], "n": 3},
    "language": "python",
    "flag": True,
    "count": -12.5e3,
    "content": 'line 1\n\ttab "quoted" back\\slash /slash \u0001 \u2028 caf\u00e9 \U0001f600 \U00010437 end',
    "after": None,
}


def feed_all(text: str, pieces) -> PartialFields:
    reader = PartialFields(FIELDS)
    for piece in pieces:
        reader.feed(piece)
    return reader


def split_at(text: str, cuts) -> list:
    bounds = [0, *sorted(cuts), len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


@pytest.mark.parametrize("ensure_ascii", [True, False])
def test_every_single_split_point_gives_the_same_values(ensure_ascii):
    text = json.dumps(TRICKY, ensure_ascii=ensure_ascii)
    for cut in range(len(text) + 1):
        reader = feed_all(text, split_at(text, [cut]))
        assert not reader.broken
        for name in FIELDS:
            assert reader.value(name) == TRICKY[name], (cut, name)
            assert reader.done(name)


def test_one_character_at_a_time_and_random_splits():
    text = json.dumps(TRICKY)  # ascii: every non-ascii character is a \u escape, astral ones a pair
    assert "\\ud83d\\ude00" in text
    reader = feed_all(text, list(text))
    assert [reader.value(n) for n in FIELDS] == [TRICKY[n] for n in FIELDS]
    rng = random.Random(7)
    for _ in range(200):
        cuts = rng.sample(range(1, len(text)), rng.randint(1, 12))
        reader = feed_all(text, split_at(text, cuts))
        assert reader.value("content") == TRICKY["content"]


def test_partial_values_grow_as_text_arrives_and_never_show_half_an_escape():
    text = json.dumps({"title": "T", "content": "a\\nb\u00e9\U0001f600z"})
    seen = []
    reader = PartialFields(FIELDS)
    for ch in text:
        reader.feed(ch)
        if reader.started("content"):
            seen.append(reader.value("content"))
    target = "a\\nb\u00e9\U0001f600z"
    for value in seen:
        assert target.startswith(value)  # a prefix at every step: no stray backslash, no lone surrogate
    assert seen[-1] == target
    assert reader.done("title") and reader.value("title") == "T"


def test_title_known_before_content_finishes_and_unfinished_field_is_not_done():
    reader = PartialFields(FIELDS)
    reader.feed('{"title": "Plan", "language": "mark')
    assert reader.done("title") and reader.value("title") == "Plan"
    assert reader.started("language") and not reader.done("language") and reader.value("language") == "mark"
    assert not reader.started("content") and reader.value("content") is None


def test_keys_split_inside_and_escaped_keys():
    reader = feed_all('{"con\\u0074ent": "x"}', ['{"co', "n\\u00", '74ent"', ': "x"}'])
    assert reader.value("content") == "x"


def test_lone_surrogates_become_replacement_characters():
    reader = feed_all('{"content": "a\\ud83d b \\ude00 c\\ud83d"}', ['{"content": "a\\ud8', '3d b \\ude00 c\\ud83d"}'])
    assert reader.value("content") == "a\ufffd b \ufffd c\ufffd"


def test_only_top_level_keys_count():
    reader = feed_all(
        '{"x": {"content": "inner"}, "content": "outer"}', ['{"x": {"content": "in', 'ner"}, "content": "outer"}']
    )
    assert reader.value("content") == "outer"


@pytest.mark.parametrize(
    "junk", ["not json", "[1,2]", '{"content" "x"}', '{"content": "a\\q"}', '{"content": "\\uZZZZ"}']
)
def test_junk_stops_quietly(junk):
    reader = feed_all(junk, [junk])
    assert reader.broken or reader.value("content") in (None, "")


def test_a_megabyte_is_read_in_few_large_steps():
    content = ("x" * 1000 + "\\n") * 1000
    text = json.dumps({"title": "big", "content": content})
    reader = feed_all(text, [text[i : i + 4096] for i in range(0, len(text), 4096)])
    assert reader.value("content") == content
