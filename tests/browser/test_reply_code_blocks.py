"""Replies people want to look at (issue 35 item 3): mermaid fences draw as diagrams, html and svg fences
get a Preview in a sandboxed iframe that cannot reach the page's cookies, storage or API, and a diagram
carrying script or event-handler payloads renders inert."""

from __future__ import annotations

import pytest
from browser_helpers import open_app, shot
from fakeproviders import FakeProvider, Reply, openai_text

DIAGRAM = "```mermaid\ngraph TD\n  A[Start] --> B[Done]\n```\n"
HOSTILE = '```mermaid\ngraph TD\n  X["<img src=x onerror=window.pwned=1>"] --> Y\n  click X call alert(1)\n```\n'
BROKEN = "```mermaid\nthis is not a diagram ((\n```\n"
HTML = "```html\n<p id=hi>hello</p><script>document.getElementById('hi').textContent = 'ran';"
HTML += " try { window.top.stolen = document.cookie; } catch (e) {} </script>\n```\n"
SVG = '```svg\n<svg xmlns="http://www.w3.org/2000/svg" width="20" height="20">'
SVG += '<circle r="9" cx="10" cy="10"/></svg>\n```\n'


@pytest.fixture
def model():
    text = "A diagram:\n\n" + DIAGRAM + "\nA hostile one:\n\n" + HOSTILE + "\nA broken one:\n\n" + BROKEN
    text += "\nSome HTML:\n\n" + HTML + "\nAn SVG:\n\n" + SVG
    fake = FakeProvider(default=Reply(chunks=openai_text(*[text[i : i + 40] for i in range(0, len(text), 40)])))
    yield fake
    fake.close()


def test_diagrams_and_sandboxed_previews(server_factory, model, page):
    server = server_factory({"OPENAI_BASE_URL": model.url + "/v1", "OPENAI_API_KEY": "sk-t", "OPENAI_MODEL": "m"})
    open_app(page, server.url)
    page.evaluate("() => { document.cookie = 'probe=secret; path=/'; localStorage.setItem('probe', 'secret'); }")
    page.fill("#input", "draw")
    page.press("#input", "Enter")
    page.wait_for_selector(".msg.assistant[data-outcome='ok']", timeout=30000)
    reply = page.locator(".msg.assistant").last
    # the two valid diagrams are drawn (lazy mermaid), the broken one falls back to its source
    page.wait_for_function(
        "() => document.querySelectorAll('.msg.assistant .reply-diagram .mermaid-canvas[data-rendered]').length === 3",
        timeout=30000,
    )
    rendered = reply.locator(".reply-diagram .mermaid-canvas[data-rendered='true'] svg")
    assert rendered.count() == 2
    assert reply.locator(".reply-diagram .mermaid-canvas[data-rendered='false']").count() == 1
    assert page.evaluate("window.pwned") is None  # the onerror payload stayed inert
    assert reply.locator(".reply-diagram img, .reply-diagram script").count() == 0
    # html and svg previews: sandboxed without allow-same-origin, scripts run inside only
    buttons = reply.locator("button.preview-code")
    assert buttons.count() == 2
    buttons.first.click()
    frame_el = reply.locator("iframe.code-preview").first
    assert frame_el.get_attribute("sandbox") == "allow-scripts"
    frame = frame_el.element_handle().content_frame()
    frame.wait_for_function(
        "() => document.getElementById('hi') && document.getElementById('hi').textContent === 'ran'"
    )
    assert frame.evaluate("() => { try { return document.cookie; } catch (e) { return 'blocked'; } }") == "blocked"
    assert (
        frame.evaluate("() => { try { return localStorage.getItem('probe'); } catch (e) { return 'blocked'; } }")
        == "blocked"
    )
    assert (
        frame.evaluate("() => { try { return window.parent.document.title; } catch (e) { return 'blocked'; } }")
        == "blocked"
    )
    assert frame.evaluate("() => origin") == "null"  # an opaque origin: the API is another origin
    assert page.evaluate("window.stolen") is None
    buttons.nth(1).click()
    reply.locator("iframe.code-preview[title='SVG preview']").wait_for(timeout=5000)
    shot(page, "reply-diagrams-previews")
