"""A long session in the page: older messages load on scroll-up with the view kept in place; the sidebar pages."""

from __future__ import annotations

import os

import requests
from browser_helpers import open_app, shot

from odysseus.store import Store
from odysseus.store.messages import insert_message

LONG = 1200
SHOWN = "document.querySelectorAll('#messages .msg').length"


def _write(server, fill) -> None:
    """Run ``fill(db)`` in one transaction on the server's database file (fast bulk inserts)."""
    store = Store(os.path.join(server.data_dir, "odysseus.db"))
    try:
        with store.locked.tx() as db:
            fill(db)
    finally:
        store.locked.db.conn.close()


def _long_session(server, count=LONG) -> str:
    session_id = requests.post(server.url + "/api/sessions", json={"title": "long one"}, timeout=10).json()["id"]

    def fill(db):
        for i in range(count):
            insert_message(db, "local", session_id, "user" if i % 2 == 0 else "assistant", f"message number {i}")

    _write(server, fill)
    return session_id


def _texts(page):
    return page.eval_on_selector_all("#messages .msg .msg-body", "nodes => nodes.map(n => n.innerText.trim())")


def test_scrolling_up_loads_older_messages_and_keeps_the_view(server, page):
    session_id = _long_session(server)
    open_app(page, server.url, session_id)
    page.wait_for_function(f"{SHOWN} === 200")
    assert _texts(page)[-1] == f"message number {LONG - 1}"
    assert page.get_attribute("#messages", "data-history-more") == "true"
    # the newest message is in view at the bottom
    assert (
        page.evaluate(
            "(() => { const b = document.getElementById('messages');"
            " return b.scrollHeight - b.scrollTop - b.clientHeight; })()"
        )
        < 150
    )

    for loaded in (400, 600):
        # pick the oldest message shown and remember where it is on screen, then scroll to the top
        first = page.locator("#messages .msg").first
        first_text = first.locator(".msg-body").inner_text().strip()
        page.evaluate("document.getElementById('messages').scrollTop = 0")
        page.wait_for_function(f"{SHOWN} === {loaded}")
        page.wait_for_function("!document.querySelector('.history-more')?.disabled")
        # the message that was at the top is still where it was (the page grew above it)
        top = page.evaluate(
            """(text) => {
            const box = document.getElementById('messages');
            const node = [...box.querySelectorAll('.msg')]
                .find(n => n.querySelector('.msg-body').innerText.trim() === text);
            return node.getBoundingClientRect().top - box.getBoundingClientRect().top;
        }""",
            first_text,
        )
        assert -5 < top < 200, top
        assert page.evaluate("document.getElementById('messages').scrollTop") > 1000

    texts = _texts(page)
    assert texts == [f"message number {i}" for i in range(LONG - 600, LONG)]  # in order, no gap, no duplicate
    shot(page, "history-paging-scrolled-up")

    # the button loads the rest without scrolling (keyboard users); at the start it goes away.
    # Focus it without scrolling: a click scrolls it into view, which is a scroll-up that loads a page
    # by itself, so the button could be gone by the time the click lands.
    idle = "!document.querySelector('.history-more') || !document.querySelector('.history-more').disabled"
    for _ in range(20):
        page.wait_for_function(idle)
        if page.get_attribute("#messages", "data-history-more") != "true":
            break
        page.evaluate("document.querySelector('.history-more').focus({preventScroll: true})")
        page.keyboard.press("Enter")
    assert page.get_attribute("#messages", "data-history-more") == "false"
    assert page.locator(".history-more").is_hidden()
    assert _texts(page) == [f"message number {i}" for i in range(LONG)]


def test_switching_sessions_while_older_messages_load_drops_them(server, page):
    long_id = _long_session(server)
    short_id = _long_session(server, 4)
    open_app(page, server.url, long_id)
    page.wait_for_function(f"{SHOWN} === 200")
    held = []
    page.route(lambda url: "before=" in url, lambda route: held.append(route))  # hold it until the switch is done
    page.evaluate("document.getElementById('messages').scrollTop = 0")
    for _ in range(200):
        if held:
            break
        page.wait_for_timeout(50)
    assert held, "scrolling up did not ask for older messages"
    page.click(f".session[data-session-id='{short_id}'] .open")
    page.wait_for_function(f"{SHOWN} === 4")
    for route in held:
        route.continue_()
    page.wait_for_timeout(1000)
    assert _texts(page) == [f"message number {i}" for i in range(4)]
    assert page.get_attribute("#messages", "data-history-more") == "false"


def test_sidebar_loads_more_sessions_on_scroll(server, page):
    _write(
        server,
        lambda db: db["sessions"].insert_all(
            {
                "id": f"s_page{i:04d}",
                "owner": "local",
                "title": f"chat {i:04d}",
                "created_at": 1000.0 + i,
                "updated_at": 1000.0 + i,
            }
            for i in range(230)
        ),
    )
    open_app(page, server.url)
    rows = "document.querySelectorAll('#session-list .session').length"
    page.wait_for_function(f"{rows} === 100")
    assert page.get_attribute("#session-list", "data-has-more") == "true"
    page.evaluate(
        "(() => { const nav = document.getElementById('session-list').parentElement;"
        " nav.scrollTop = nav.scrollHeight; })()"
    )
    page.wait_for_function(f"{rows} === 200")
    page.click(".sessions-more")
    page.wait_for_function(f"{rows} === 230")
    assert page.get_attribute("#session-list", "data-has-more") == "false"
    titles = page.eval_on_selector_all("#session-list .session .open", "nodes => nodes.map(n => n.title)")
    assert titles == [f"chat {i:04d}" for i in range(229, -1, -1)]
    # a reload of the list (a new chat) keeps every page that was shown
    page.fill("#input", "hello")
    page.press("#input", "Enter")
    page.wait_for_selector(".msg.assistant[data-outcome=ok]", timeout=30000)
    page.wait_for_function(f"{rows} === 231")
