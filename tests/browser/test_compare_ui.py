"""Compare mode in the page (issue #20): two panes streamed side by side, Stop cancels both at the
provider, and "Keep this" makes one reply the chat's (it survives a reload)."""

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
    # nothing was stored: no session exists
    assert requests.get(url + "/api/sessions", timeout=5).json()["sessions"] == []


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
