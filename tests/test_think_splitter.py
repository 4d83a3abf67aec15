"""The inline <think> splitter, fed every way a stream can cut the text."""

import pytest

from odysseus.llm.think_splitter import ThinkSplitter


def run(chunks, **kwargs):
    splitter = ThinkSplitter(**kwargs)
    pieces = []
    for chunk in chunks:
        pieces += splitter.feed(chunk)
    pieces += splitter.flush()
    thinking = "".join(t for t, is_thinking in pieces if is_thinking)
    content = "".join(t for t, is_thinking in pieces if not is_thinking)
    return thinking, content, pieces


TEXT = "<think>I should greet.</think>\n\nHello there"


@pytest.mark.parametrize("cut", range(1, len(TEXT)))
def test_any_single_cut_splits_the_same(cut):
    assert run([TEXT[:cut], TEXT[cut:]])[:2] == ("I should greet.", "Hello there")


def test_one_character_at_a_time():
    thinking, content, pieces = run(list(TEXT))
    assert (thinking, content) == ("I should greet.", "Hello there")
    assert all(piece for piece, _ in pieces)


def test_plain_text_passes_through_unchanged_and_promptly():
    splitter = ThinkSplitter()
    assert splitter.feed("Hello") == [("Hello", False)]
    assert splitter.feed(" <think> is a tag") == [(" <think> is a tag", False)]
    assert splitter.flush() == []


def test_leading_whitespace_then_tag():
    assert run(["  \n", "<thi", "nk>a</think>b"])[:2] == ("a", "b")


def test_prefix_that_is_not_a_tag_is_released():
    assert run(["<th", "ank you>"])[:2] == ("", "<thank you>")
    assert run(["<"])[:2] == ("", "<")


def test_unclosed_think_at_end_is_thinking():
    assert run(["<think>still going</th"])[:2] == ("still going</th", "")


def test_reply_that_starts_inside_the_reasoning():
    assert run(["reasoning here</thi", "nk>answer"], starts_thinking=True)[:2] == ("reasoning here", "answer")


def test_thinking_is_released_without_waiting_for_the_close_tag():
    splitter = ThinkSplitter()
    assert splitter.feed("<think>abc") == [("abc", True)]
    assert splitter.feed("def</") == [("def", True)]
    assert splitter.feed("think>x") == [("x", False)]
