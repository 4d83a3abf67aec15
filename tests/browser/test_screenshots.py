"""Screenshots of the chat page with a real conversation (markdown, code, a table, a tool card) at
390, 1024 and 1440 px in light and dark, and at 1024 with the document panel open, written to
docs/screenshots/ for a reviewer to look at (viewport shots, kept small)."""

from __future__ import annotations

import os

import pytest
from browser_helpers import ROOT, open_app
from conversation import open_document, seed_conversation, set_theme

OUT = os.path.join(ROOT, "docs", "screenshots")


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_chat_page_screenshots(server, page_factory, theme):
    sid = seed_conversation(server)
    os.makedirs(OUT, exist_ok=True)
    written = []
    for width, height in ((390, 844), (1440, 900), (1024, 768)):  # 1024 last: it opens the document
        page = page_factory(width=width, height=height)
        open_app(page, server.url, sid)
        set_theme(page, theme)
        page.wait_for_selector(".msg.assistant .tool-row")
        page.wait_for_selector(".msg.assistant pre code .hljs-keyword")
        path = os.path.join(OUT, f"chat-{width}-{theme}.png")
        page.screenshot(path=path)
        written.append(path)
        if width == 1024:
            open_document(server, page, sid)
            path = os.path.join(OUT, f"chat-{width}-document-{theme}.png")
            page.screenshot(path=path)
            written.append(path)
        page.context.close()
    for path in written:
        assert os.path.getsize(path) > 10_000, path  # a real picture, not an empty page
