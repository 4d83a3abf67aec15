"""Organised chats and share links in the page (issue 36): date groups, pin, archive and restore, folders
(made, renamed, deleted; chats moved by the "⋯" menu and by drag and drop), and a share link opened in a
fresh signed-out browser with accounts on, then revoked from Settings."""

from __future__ import annotations

import os
import time

import requests
from browser_helpers import open_app, shot

from odysseus.store import Store

PASSWORD = "correct horse battery"


def api(server, method, path, **kw):
    response = requests.request(method, server.url + path, timeout=10, **kw)
    assert response.ok, response.text
    return response.json()


def session(server, sid):
    return api(server, "GET", f"/api/sessions/{sid}")


def age(server, sid, days):
    """Make a chat's last activity ``days`` ago (written to the server's database file)."""
    store = Store(os.path.join(server.data_dir, "odysseus.db"))
    try:
        with store.locked.tx() as db:
            db.execute("update sessions set updated_at = ? where id = ?", [time.time() - days * 86400, sid])
    finally:
        store.locked.db.conn.close()


def row(sid):
    return f".session[data-session-id='{sid}']"


def menu(page, sid, item):
    """Open the chat's "⋯" menu in the sidebar and pick ``item`` (a menu item's class)."""
    page.click(f"{row(sid)} .more")
    page.wait_for_selector(".popup-menu[role=menu]")
    page.click(f".popup-menu .{item}")
    page.wait_for_selector(".popup-menu", state="detached")


def test_pin_archive_folders_by_menu_and_drag(server, page):
    alpha, beta, gamma, old = (
        api(server, "POST", "/api/sessions", json={"title": t})["id"] for t in ("Alpha", "Beta", "Gamma", "Old one")
    )
    age(server, old, 40)
    open_app(page, server.url)
    # grouped by date: Today first, the old chat under its month
    titles = page.eval_on_selector_all("#session-list .group-title", "nodes => nodes.map(n => n.textContent)")
    assert titles[0] == "Today" and len(titles) == 2 and titles[1][-4:].isdigit(), titles
    assert page.locator(f".session-group[data-group=today] {row(alpha)}").count() == 1
    # the groups' edges, in the browser's time zone: calendar days, then months
    groups = page.evaluate("""async () => {
      const { groupByDate } = await import("/static/js/date_groups.js");
      const at = (m, d, h, y = 2026) => ({ updated_at: new Date(y, m, d, h).getTime() / 1000 });
      const sessions = [at(2, 10, 1), at(2, 9, 23), at(2, 9, 0), at(2, 8, 12), at(2, 3, 12), at(2, 1, 12),
                        at(1, 27, 12), at(11, 31, 12, 2025)];
      return groupByDate(sessions, new Date(2026, 2, 10, 9)).map((g) => [g.key, g.label, g.sessions.length]);
    }""")
    assert [(key, count) for key, _, count in groups] == [
        ("today", 1),
        ("yesterday", 2),
        ("week", 2),
        ("2026-03", 1),
        ("2026-02", 1),
        ("2025-12", 1),
    ]
    assert [label for _, label, _ in groups][:3] == ["Today", "Yesterday", "Previous 7 days"]
    assert "2025" in groups[-1][1]

    # pin with the menu, keyboard only: Enter opens it, arrows move, Enter picks
    page.focus(f"{row(alpha)} .more")
    page.keyboard.press("Enter")
    page.wait_for_selector(".popup-menu .menu-pin:focus")
    page.keyboard.press("Enter")
    page.wait_for_selector(f".session-group[data-group=pinned] {row(alpha)}")
    assert session(server, alpha)["pinned"] is True
    assert page.locator("#session-list .group-title").first.text_content() == "Pinned"

    # a folder whose name is markup: shown as text
    page.click("#new-folder")
    page.fill(".folder-new .rename-input", "<b>Work</b>")
    page.press(".folder-new .rename-input", "Enter")
    page.wait_for_selector(".folder .folder-toggle:has-text('<b>Work</b>')")
    assert page.locator(".folder .folder-toggle b").count() == 0
    folder = api(server, "GET", "/api/folders")["folders"][0]
    assert folder["name"] == "<b>Work</b>"
    in_folder = f".folder[data-folder-id='{folder['id']}'] .group-items"

    # move by the menu, and by drag and drop
    menu(page, beta, "menu-folder")
    page.wait_for_selector(f"{in_folder} {row(beta)}")
    page.drag_and_drop(row(gamma), f".folder[data-folder-id='{folder['id']}'] .folder-head")
    page.wait_for_selector(f"{in_folder} {row(gamma)}")
    assert session(server, gamma)["folder_id"] == folder["id"]
    assert page.inner_text(f".folder[data-folder-id='{folder['id']}'] .folder-count") == "2"
    # dragging a chat onto the dated list takes it out of its folder
    page.drag_and_drop(row(beta), row(old))
    page.wait_for_selector(f".session-group[data-group=today] {row(beta)}")
    assert session(server, beta)["folder_id"] is None
    shot(page, "36-organised-sidebar")

    # archive: gone from the list, shown in the Archived view, restored from there
    menu(page, gamma, "menu-archive")
    page.wait_for_selector(row(gamma), state="detached")
    assert session(server, gamma)["archived"] is True
    page.click("#archived-view")
    page.wait_for_selector(f"#session-list[data-view=archived] {row(gamma)}")
    assert page.locator("#session-list .session").count() == 1
    menu(page, gamma, "menu-restore")
    page.wait_for_selector(row(gamma), state="detached")
    page.click("#archived-view")
    page.wait_for_selector(f"#session-list[data-view=chats] {in_folder} {row(gamma)}")
    assert session(server, gamma)["archived"] is False

    # the folder renamed in place, then deleted: its chats stay
    page.click(f".folder[data-folder-id='{folder['id']}'] .folder-head .more")
    page.click(".popup-menu .menu-rename-folder")
    page.fill(".folder-head .rename-input", "Projects")
    page.press(".folder-head .rename-input", "Enter")
    page.wait_for_selector(".folder .folder-toggle:has-text('Projects')")
    page.click(f".folder[data-folder-id='{folder['id']}'] .folder-head .more")
    page.once("dialog", lambda dialog: dialog.accept())
    page.click(".popup-menu .menu-delete-folder")
    page.wait_for_selector(".folder", state="detached")
    page.wait_for_selector(f".session-group:not([data-group=pinned]) {row(gamma)}")
    assert api(server, "GET", "/api/folders")["folders"] == []
    assert {s["id"] for s in api(server, "GET", "/api/sessions")["sessions"]} == {alpha, beta, gamma, old}


def sign_in(server, context):
    """Set the server up with alice and give ``context`` her session cookie."""
    setup = requests.post(server.url + "/api/auth/setup", json={"username": "alice", "password": PASSWORD}, timeout=10)
    assert setup.status_code == 201, setup.text
    context.add_cookies([{"name": c.name, "value": c.value, "url": server.url} for c in setup.cookies])


def test_share_link_opens_signed_out_and_stops_when_revoked(server_factory, page_factory):
    server = server_factory(env={"ODYSSEUS_AUTH": "password", "ODYSSEUS_DEMO_TOKEN_DELAY": "0.005"})
    page = page_factory()
    sign_in(server, page.context)
    open_app(page, server.url)
    page.fill("#input", "Share this <img src=x onerror=alert(1)> please")
    page.press("#input", "Enter")
    page.wait_for_selector(".msg.assistant[data-outcome=ok]", timeout=20000)

    # a reply with an html block and exhibits (as an agent writes them), straight into the database
    sid = page.url.split("session=")[1]
    owner = page.evaluate("fetch('/api/auth/status').then(r => r.json())")["user"]["id"]
    exhibits = [
        {
            "id": "t1",
            "title": "Costs",
            "elements": [{"type": "table", "columns": ["item", "eur"], "rows": [["bed", "90"]]}],
        },
        {"id": "c1", "elements": [{"type": "choice", "prompt": "Which?", "options": ["Rome", "Oslo"]}]},
    ]
    store = Store(os.path.join(server.data_dir, "odysseus.db"))
    try:
        html = "```html\n<p id=x>static</p><script>document.getElementById('x').textContent = 'ran'</script>\n```"
        store.messages.add(owner, sid, "assistant", "A preview:\n\n" + html, metadata={"exhibits": exhibits})
    finally:
        store.locked.db.conn.close()

    # the header's "⋯" menu: Share link
    page.click("#chat-menu")
    page.click(".popup-menu .menu-share")
    page.wait_for_selector("#toast:has-text('/s/')")
    url = page.inner_text("#toast").split(": ", 1)[1].strip()
    assert url.startswith(server.url + "/s/") and len(url.rsplit("/", 1)[1]) == 32
    # a later message is not in the snapshot
    page.fill("#input", "A later message, after sharing")
    page.press("#input", "Enter")
    page.wait_for_function("document.querySelectorAll('.msg.assistant[data-outcome=ok]').length === 2", timeout=20000)

    viewer = page_factory()  # a fresh context: no cookie, signed out
    assert viewer.context.cookies() == []
    viewer.goto(url)
    viewer.wait_for_selector("body[data-ready=true]")
    assert viewer.url == url  # not sent to /login
    assert viewer.inner_text("#share-title").startswith("Share this <img")
    assert viewer.locator(".msg.user").count() == 1 and viewer.locator(".msg.assistant").count() == 2
    assert "<img src=x onerror=alert(1)>" in viewer.inner_text(".msg.user")
    assert viewer.locator(".share img").count() == 0  # markup stays text
    assert viewer.locator(".msg.assistant .markdown strong").count() >= 1  # the reply's markdown, rendered
    assert viewer.locator(".msg.assistant pre code .hljs-keyword").count() >= 1  # and its code highlighted
    assert "A later message" not in viewer.content()
    # exhibits rendered (choices cannot be sent from here), html previews run in their sandbox
    assert viewer.inner_text(".exhibit-table tbody") == "bed\t90"
    assert viewer.locator(".choice-option").count() == 2 and viewer.locator(".choice-option:disabled").count() == 2
    viewer.click(".preview-code")
    assert viewer.frame_locator(".code-preview").locator("#x").inner_text() == "ran"
    for hidden in ("#session-list", "#input", "#open-settings"):  # nothing of the owner's page
        assert viewer.locator(hidden).count() == 0
    assert viewer.evaluate("fetch('/api/sessions').then(r => r.status)") == 401
    shot(viewer, "37-shared-chat")

    # Settings lists the link; Revoke stops it at once
    page.click("#open-settings")
    page.wait_for_selector("#settings-shares .share-row")
    assert page.locator("#settings-shares .share-row").count() == 1
    page.click("#settings-shares .revoke-share")
    page.wait_for_selector("#settings-shares td:has-text('No shared links.')")
    response = viewer.goto(url)
    assert response.status == 404
    assert "not shared" in viewer.inner_text("h1")
    assert "Share this" not in viewer.content()
