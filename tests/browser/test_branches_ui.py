"""Branches in the page (issue #20): Regenerate, Retry, Edit and resend, and the `< 2/3 >` pager.

The model is a local OpenAI-compatible server that records each request: the tests check the
model was sent the selected branch only, and that the chosen alternative survives a reload.
"""

from __future__ import annotations

import pytest
from browser_helpers import open_app, shot
from fakeproviders import FakeProvider, Reply, openai_text


def send(page, text: str) -> None:
    page.fill("#input", text)
    page.press("#input", "Enter")


def turns(record) -> list:
    return [(m["role"], m["content"]) for m in record.body["messages"] if m["role"] != "system"]


@pytest.fixture
def model():
    """Answers "answer 1", "answer 2", ... ; the first reply fails when ``model.fail_first`` is set."""
    state = {"n": 0}

    def choose(record):
        state["n"] += 1
        if server.fail_first and state["n"] == 1:
            return Reply(status=500, body={"error": {"message": "the model fell over"}})
        return Reply(chunks=openai_text(f"answer {state['n']}"))

    server = FakeProvider(chooser=choose)
    server.fail_first = False
    yield server
    server.close()


@pytest.fixture
def app_url(server_factory, model):
    server = server_factory({"OPENAI_BASE_URL": model.url + "/v1", "OPENAI_API_KEY": "sk-test", "OPENAI_MODEL": "m"})
    return server.url


def wait_shown(page, expected, branched=False, timeout=40000):
    """Wait until the conversation on screen is ``expected``; ``branched``: as re-read after a new branch
    (the page shows the session again once a regenerate/resend ends, with its pager)."""
    got = page.wait_for_function(
        """([expected, branched]) => {
        const box = document.getElementById('messages');
        if (box.hasAttribute('aria-busy')) return false;
        if (branched && !box.querySelector('.branch-pager')) return false;
        const rows = [...box.querySelectorAll('.msg')];
        if (rows.some((n) => n.classList.contains('streaming'))) return false;
        const got = rows.map((n) => [n.classList.contains('user') ? 'user' : 'assistant',
            n.classList.contains('user') ? n.querySelector('.msg-body').textContent : (n.replyView || {}).text]);
        return JSON.stringify(got) === JSON.stringify(expected) && got;
    }""",
        arg=[[list(row) for row in expected], branched],
        timeout=timeout,
    ).json_value()
    assert got == [list(row) for row in expected]


def test_regenerate_keeps_alternatives_and_the_choice_survives_a_reload(app_url, model, page):
    page.set_default_timeout(40000)  # generous: the machine running the suite may be loaded
    open_app(page, app_url)
    send(page, "hello")
    wait_shown(page, [("user", "hello"), ("assistant", "answer 1")])
    page.click(".msg.assistant .regenerate")
    wait_shown(page, [("user", "hello"), ("assistant", "answer 2")], branched=True)
    assert turns(model.posts[-1]) == [("user", "hello")]  # the earlier reply is not sent
    reply = page.locator(".msg.assistant")
    assert reply.get_attribute("data-branch-count") == "2" and reply.get_attribute("data-branch-index") == "2"
    assert page.text_content(".msg.assistant .branch-index") == "2/2"
    assert page.is_disabled(".msg.assistant .branch-next")
    shot(page, "branches-regenerated")
    page.click(".msg.assistant .branch-prev")
    wait_shown(page, [("user", "hello"), ("assistant", "answer 1")], branched=True)
    page.wait_for_selector(".msg.assistant .branch-index:text-is('1/2')")
    page.reload()
    page.wait_for_selector("body[data-ready=true]")
    wait_shown(page, [("user", "hello"), ("assistant", "answer 1")])
    assert page.text_content(".msg.assistant .branch-index") == "1/2"
    # the next message continues the chosen branch, and only it reaches the model
    send(page, "more")
    wait_shown(page, [("user", "hello"), ("assistant", "answer 1"), ("user", "more"), ("assistant", "answer 3")])
    assert turns(model.posts[-1]) == [("user", "hello"), ("assistant", "answer 1"), ("user", "more")]


def test_edit_and_resend_sends_the_edited_branch_only(app_url, model, page):
    page.set_default_timeout(40000)
    open_app(page, app_url)
    send(page, "first")
    wait_shown(page, [("user", "first"), ("assistant", "answer 1")])
    send(page, "second")
    wait_shown(page, [("user", "first"), ("assistant", "answer 1"), ("user", "second"), ("assistant", "answer 2")])
    page.locator(".msg.user").nth(1).locator(".edit").click()
    page.fill(".edit-form textarea", "SECOND, edited")
    page.click(".edit-form .resend")
    wait_shown(
        page,
        [("user", "first"), ("assistant", "answer 1"), ("user", "SECOND, edited"), ("assistant", "answer 3")],
        branched=True,
    )
    assert turns(model.posts[-1]) == [("user", "first"), ("assistant", "answer 1"), ("user", "SECOND, edited")]
    edited = page.locator(".msg.user").nth(1)
    assert edited.locator(".branch-index").text_content() == "2/2"
    edited.locator(".branch-prev").click()
    wait_shown(
        page,
        [("user", "first"), ("assistant", "answer 1"), ("user", "second"), ("assistant", "answer 2")],
        branched=True,
    )
    page.reload()
    page.wait_for_selector("body[data-ready=true]")
    wait_shown(page, [("user", "first"), ("assistant", "answer 1"), ("user", "second"), ("assistant", "answer 2")])
    assert page.locator(".msg.user").nth(1).locator(".branch-index").text_content() == "1/2"


def test_a_failed_reply_offers_retry_and_keeps_the_failure_as_an_alternative(app_url, model, page):
    page.set_default_timeout(40000)
    model.fail_first = True
    open_app(page, app_url)
    send(page, "please")
    page.wait_for_selector(".msg.assistant[data-outcome=failed]")
    page.wait_for_selector(".msg.assistant .regenerate:text-is('Retry')")
    page.click(".msg.assistant .regenerate")
    wait_shown(page, [("user", "please"), ("assistant", "answer 2")], branched=True)
    page.wait_for_selector(".msg.assistant[data-outcome=ok]")
    assert page.text_content(".msg.assistant .regenerate") == "Regenerate"
    assert page.text_content(".msg.assistant .branch-index") == "2/2"
    assert [turns(p) for p in model.posts] == [[("user", "please")], [("user", "please")]]
