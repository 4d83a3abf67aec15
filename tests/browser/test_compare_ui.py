"""Compare mode in the page (issue #20): two panes streamed side by side, Stop cancels both at the
provider, and "Keep this" makes one reply the chat's (it survives a reload). Issue 35: nothing a
pane produced is lost: a reload mid-compare keeps the question and each pane's partial reply, saved
once, and every reply shows as an alternative (the `< i/n >` pager)."""

from __future__ import annotations

import time

import pytest
import requests
from browser_helpers import open_app, shot
from fakeproviders import FakeProvider, Reply, openai_text


@pytest.fixture
def models():
    """One OpenAI-compatible server listing m1 and m2; ``slow`` makes each reply take ~10 s."""

    def choose(record):
        name = record.body.get("model")
        pieces = [f"{name} says " if i == 0 else f"word{i} " for i in range(40 if server.slow else 3)]
        return Reply(chunks=openai_text(*pieces), delay=0.25 if server.slow else 0.0)

    server = FakeProvider(chooser=choose)
    server.slow = False
    server.get_json["/v1/models"] = {
        "object": "list",
        "data": [{"id": "m1", "object": "model"}, {"id": "m2", "object": "model"}],
    }
    yield server
    server.close()


@pytest.fixture
def url(server_factory, models):
    return server_factory(
        {"OPENAI_BASE_URL": models.url + "/v1", "OPENAI_API_KEY": "sk-test", "OPENAI_MODEL": "m1"}
    ).url


def chat_posts(models):
    return [p for p in models.posts if p.path.endswith("/chat/completions")]


def saved_replies(url, session):
    """The session's stored messages: the user messages' texts, and each reply (every alternative) by model."""
    rows = requests.get(f"{url}/api/sessions/{session}/messages", timeout=5).json()["messages"]
    replies = {}
    for row in rows:
        if row["role"] == "assistant":
            for reply_id in row["branch"]["ids"]:
                requests.put(f"{url}/api/sessions/{session}/branch", json={"message_id": reply_id}, timeout=5)
                shown = [
                    m
                    for m in requests.get(f"{url}/api/sessions/{session}/messages", timeout=5).json()["messages"]
                    if m["role"] == "assistant"
                ][0]
                replies[shown["metadata"]["compare_model"].split("/")[-1]] = shown
    return {"question": [r["content"] for r in rows if r["role"] == "user"], "replies": replies}


def start_compare(page, url, text):
    open_app(page, url)
    page.check("input[name=mode][value=compare]")
    page.wait_for_selector("#compare-picker input[type=checkbox]")
    boxes = page.locator("#compare-picker input[type=checkbox]")
    assert boxes.count() >= 2
    for index in range(boxes.count()):
        boxes.nth(index).set_checked(index < 2)
    page.fill("#input", text)
    page.press("#input", "Enter")


def test_compare_shows_two_panes_and_stop_cancels_both(url, models, page):
    models.slow = True
    start_compare(page, url, "race")
    page.wait_for_selector(".compare-set .compare-pane >> nth=1")
    deadline = time.monotonic() + 20
    while len(chat_posts(models)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    posts = chat_posts(models)
    assert sorted(p.body["model"] for p in posts) == ["m1", "m2"]
    page.wait_for_function("""() => [...document.querySelectorAll('.compare-pane')]
        .every((n) => n.replyView && n.replyView.text.includes('says'))""")
    assert page.get_attribute("#send", "data-state") == "stop"
    shot(page, "compare-streaming")
    page.click("#send")  # Stop
    page.wait_for_function("""() => [...document.querySelectorAll('.compare-pane')]
        .every((n) => n.dataset.outcome === 'stopped')""")
    deadline = time.monotonic() + 20
    while any(p.disconnected_at is None for p in posts) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(p.disconnected_at is not None for p in posts), "a provider stream was left running"
    assert all(not p.finished.is_set() or p.disconnected_at for p in posts)
    assert page.get_attribute("#send", "data-state") == "send"
    # what the panes produced is kept: the question once, each pane's partial reply once
    sessions = requests.get(url + "/api/sessions", timeout=5).json()["sessions"]
    assert len(sessions) == 1
    saved = saved_replies(url, sessions[0]["id"])
    assert saved["question"] == ["race"]
    assert sorted(saved["replies"]) == ["m1", "m2"]
    assert all(r["metadata"]["status"] == "stopped" and "says" in r["content"] for r in saved["replies"].values())


def test_keep_one_reply_makes_it_the_chats_reply(url, models, page):
    start_compare(page, url, "pick one")
    page.wait_for_function("""() => { const panes = [...document.querySelectorAll('.compare-pane')];
        return panes.length === 2 && panes.every((n) => n.dataset.outcome === 'ok'); }""")
    pane = page.locator(".compare-pane[data-model$='m2']")
    kept_text = pane.evaluate("(n) => n.replyView.text")
    assert kept_text.startswith("m2 says")
    pane.locator(".keep-reply").click()
    page.wait_for_function("() => /session=/.test(location.search) && !document.querySelector('.compare-set')")
    page.reload()
    page.wait_for_selector("body[data-ready=true]")
    page.wait_for_selector(".msg.assistant")
    texts = page.evaluate("""() => [...document.querySelectorAll('#messages .msg')].map((n) =>
        n.classList.contains('user') ? n.querySelector('.msg-body').textContent : n.replyView.text)""")
    assert texts == ["pick one", kept_text]
    assert "m2" in page.text_content(".msg.assistant .model-label")


def test_a_reload_mid_compare_keeps_the_question_and_each_partial_reply(url, models, page):
    models.slow = True
    start_compare(page, url, "keep everything")
    page.wait_for_function("""() => { const panes = [...document.querySelectorAll('.compare-pane')];
        return panes.length === 2 && panes.every((n) => n.replyView && n.replyView.text.includes('word3')); }""")
    page.wait_for_function("() => /session=/.test(location.search)")  # the question made the session
    session = page.evaluate("new URLSearchParams(location.search).get('session')")
    shown = page.evaluate("[...document.querySelectorAll('.compare-pane')].map((n) => n.replyView.text)")
    page.reload()
    page.wait_for_selector("body[data-ready=true]")
    page.wait_for_selector(".msg.assistant .branch-index")
    # The question is there once, and one reply with the pager over both panes' replies.
    assert page.locator("#messages .msg.user").count() == 1
    assert page.locator("#messages .msg.user .msg-body").inner_text() == "keep everything"
    assert page.locator(".msg.assistant .branch-index").inner_text() == "2/2"
    posts = chat_posts(models)
    deadline = time.monotonic() + 20
    while any(p.disconnected_at is None for p in posts) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(p.disconnected_at is not None for p in posts), "a pane's provider stream ran on after the reload"
    saved = saved_replies(url, session)
    assert saved["question"] == ["keep everything"]
    assert sorted(saved["replies"]) == ["m1", "m2"]  # saved once each
    for name, reply in saved["replies"].items():
        assert reply["metadata"]["status"] == "stopped"
        # at least what the pane showed before the reload, and not the whole 40-word reply
        assert any(reply["content"].startswith(text) for text in shown if text.startswith(name))
        assert "word39" not in reply["content"]
    # The pager walks through both replies, in the page.
    page.reload()
    page.wait_for_selector(".msg.assistant .branch-index")
    first = page.evaluate("document.querySelector('.msg.assistant').replyView.text")
    page.click(".msg.assistant .branch-prev")
    page.wait_for_selector(".msg.assistant .branch-index:text-is('1/2')")
    second = page.evaluate("document.querySelector('.msg.assistant').replyView.text")
    assert {first.split(" ")[0], second.split(" ")[0]} == {"m1", "m2"}
    shot(page, "compare-after-reload")


def test_after_a_comparison_ends_every_reply_is_an_alternative(url, models, page):
    start_compare(page, url, "all of them")
    page.wait_for_function("""() => { const panes = [...document.querySelectorAll('.compare-pane')];
        return panes.length === 2 && panes.every((n) => n.dataset.outcome === 'ok'); }""")
    texts = sorted(page.evaluate("[...document.querySelectorAll('.compare-pane')].map((n) => n.replyView.text)"))
    page.reload()
    page.wait_for_selector("body[data-ready=true]")
    page.wait_for_selector(".msg.assistant .branch-index:text-is('2/2')")
    seen = [page.evaluate("document.querySelector('.msg.assistant').replyView.text")]
    page.click(".msg.assistant .branch-prev")
    page.wait_for_selector(".msg.assistant .branch-index:text-is('1/2')")
    seen.append(page.evaluate("document.querySelector('.msg.assistant').replyView.text"))
    assert sorted(seen) == texts
    assert page.locator("#messages .msg.user").count() == 1


def test_a_refused_question_gives_the_text_back_and_starts_no_pane(url, models, page):
    open_app(page, url)
    page.route(
        "**/api/compare/start",
        lambda route: route.fulfill(status=404, content_type="application/json", body='{"error": "upload not found"}'),
    )
    start_compare(page, url, "refuse me")
    page.wait_for_function("() => document.querySelector('#input').value === 'refuse me'")
    page.wait_for_selector("#composer-note:has-text('upload not found')")
    page.wait_for_function(
        "() => !document.querySelector('.compare-set') && !document.querySelector('#messages .msg.user')"
    )
    assert chat_posts(models) == []  # no pane streamed
    assert page.get_attribute("#send", "data-state") == "send"
