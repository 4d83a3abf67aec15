"""The calm layout (issue 35): a header of one row (title, model picker, one "⋯" menu), a composer
holding the message's tools and mode, the user's menu at the bottom of the sidebar, and a message box
of at least three lines across its whole column, at 390 px and with the document panel open."""

from __future__ import annotations

import pytest
from browser_helpers import open_app
from conversation import open_document, seed_conversation


def box(page, selector):
    return page.eval_on_selector(
        selector, "n => { const r = n.getBoundingClientRect(); return {x: r.x, y: r.y, w: r.width, h: r.height}; }"
    )


def line_height(page):
    return page.eval_on_selector("#input", "n => parseFloat(getComputedStyle(n).lineHeight)")


def test_the_header_is_one_row_at_390px(server, page_factory):
    sid = seed_conversation(server)
    page = page_factory(width=390, height=844)
    open_app(page, server.url, sid)
    header = box(page, ".topbar")
    # one row: every visible control of the header sits on the same line, and the row stays short
    tops = page.eval_on_selector_all(
        ".topbar > *",
        "ns => ns.filter(n => n.offsetParent !== null).map(n => {"
        " const r = n.getBoundingClientRect(); return [n.id || n.className, r.top, r.bottom]; })",
    )
    assert {name for name, _, _ in tops} >= {"open-sidebar", "session-title", "model", "chat-menu"}
    centres = [(top + bottom) / 2 for _, top, bottom in tops]
    assert max(centres) - min(centres) < 8, tops
    assert header["h"] <= 56, header
    assert header["w"] <= 390
    # nothing of the header spills past the screen's edge
    right = page.eval_on_selector_all(".topbar > *", "ns => Math.max(...ns.map(n => n.getBoundingClientRect().right))")
    assert right <= 390
    # the message box: three lines at least, the column's width
    composer = box(page, "#input")
    assert composer["h"] >= 3 * line_height(page)
    assert composer["w"] >= 390 - 2 * 24


@pytest.mark.parametrize("width", [1024, 1440])
def test_the_message_box_keeps_three_lines_and_its_column_with_the_document_open(server, page_factory, width):
    sid = seed_conversation(server)
    page = page_factory(width=width, height=768)
    open_app(page, server.url, sid)
    open_document(server, page, sid)
    main = box(page, ".main")
    composer = box(page, "#input")
    form = page.eval_on_selector(
        "#composer",
        "n => { const s = getComputedStyle(n); return parseFloat(s.paddingLeft) + parseFloat(s.paddingRight); }",
    )
    assert composer["h"] >= 3 * line_height(page), composer
    assert composer["w"] >= main["w"] - form - 2, (composer, main)  # the whole column, less the padding
    assert box(page, ".topbar")["h"] <= 56


def test_header_menu_holds_export_workflows_research_and_the_chats_actions(server, page):
    sid = seed_conversation(server)
    open_app(page, server.url, sid)
    # the header: title, model picker and the one menu; the rest is in the composer and the sidebar
    assert page.locator(".topbar select").count() == 1 and page.locator(".topbar button:visible").count() == 1
    for selector in ("#use-web", "#research-toggle", "input[name=mode][value=workflow]", "#attach", "#send"):
        assert page.locator(f"#composer {selector}").count() == 1, selector
    for selector in ("#open-settings", "#theme-toggle", "#memories-open", "#import-file"):
        assert page.locator(f".sidebar-foot {selector}").count() == 1, selector
    page.click("#chat-menu")
    page.wait_for_selector(".popup-menu .menu-rename")  # the menu opens once the chat is read
    labels = page.locator(".popup-menu[role=menu] [role^=menuitem]").all_inner_texts()
    for label in (
        "Rename…",
        "Pin",
        "Archive",
        "Share link",
        "Delete…",
        "Export .md",
        "Export .json",
        "Workflows…",
        "Research jobs",
    ):
        assert label in labels, (label, labels)
    # keyboard: the first item has focus, Escape closes and gives focus back to the button
    assert page.evaluate("document.activeElement.getAttribute('role')") == "menuitem"
    page.keyboard.press("Escape")
    assert page.locator(".popup-menu").count() == 0
    assert page.evaluate("document.activeElement.id") == "chat-menu"
    # Rename… from the header menu renames the chat (the title follows)
    page.once("dialog", lambda dialog: dialog.accept("Word counts"))
    page.click("#chat-menu")
    page.click(".popup-menu .menu-rename")
    page.wait_for_function("() => document.querySelector('#session-title').textContent === 'Word counts'")
    # a new chat's menu has no chat actions, only what applies to every chat
    page.click("#new-chat")
    page.click("#chat-menu")
    page.wait_for_selector(".popup-menu .menu-research-jobs")
    labels = page.locator(".popup-menu[role=menu] [role^=menuitem]").all_inner_texts()
    assert "Pin" not in labels and "Export .md" not in labels and "Research jobs" in labels


def test_workflow_mode_shows_the_workflow_picker(server, page):
    open_app(page, server.url)
    assert page.is_hidden("#workflow-picker")
    page.click(".mode-switch label:has(input[value=workflow])")
    assert page.is_visible("#workflow-picker") and page.is_visible("#manage-workflows")
    # without a workflow, a workflow turn is not sent: the user is told to pick one
    page.fill("#input", "Hello team")
    page.press("#input", "Enter")
    page.wait_for_selector("#toast:has-text('Pick a workflow')")
    assert page.locator(".msg.user").count() == 0 and page.input_value("#input") == "Hello team"
    page.click(".mode-switch label:has(input[value=chat])")
    assert page.is_hidden("#workflow-picker")
