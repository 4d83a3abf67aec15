"""Issue 35 item 5, a page that loads fast, in real Chromium against real gunicorn: every static file
comes fingerprinted, gzip-compressed and immutable; a reload asks for no static file at all; KaTeX
and mermaid are fetched only when something on the page needs them. Numbers: bench/page_load.py."""

from __future__ import annotations

import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from bench.page_load import NetLog  # noqa: E402
from browser_helpers import open_app  # noqa: E402

FINGERPRINTED = re.compile(r"/static/.+\.[0-9a-f]{12}\.[a-z0-9]+$")


def _static(log):
    return [f for f in log.network() if "/static/" in f.url]


def test_static_files_are_fingerprinted_compressed_and_immutable(page, server):
    log = NetLog(page)
    open_app(page, server.url)
    page.wait_for_load_state("networkidle")
    fetched = _static(log)
    assert len(fetched) > 20  # the page's modules, its style sheet and the vendored libraries
    for fetch in fetched:
        assert FINGERPRINTED.search(fetch.url.split("?")[0]), fetch.url
        assert fetch.status == 200, fetch.url
        assert fetch.headers["cache-control"] == "public, max-age=31536000, immutable", fetch.url
        if fetch.url.endswith((".js", ".css")):
            assert fetch.headers.get("content-encoding") == "gzip", fetch.url
    assert sum(f.transferred for f in log.network()) <= 300 * 1024  # the first-load budget


def test_a_reload_makes_no_static_request(page, server):
    log = NetLog(page)
    open_app(page, server.url)
    page.wait_for_load_state("networkidle")
    assert _static(log)
    log.reset()
    page.reload()
    page.wait_for_selector("body[data-ready=true]")
    page.wait_for_load_state("networkidle")
    assert [f.url for f in log.network()]  # the page itself and its API calls still go out
    assert [f.url for f in _static(log)] == []
    # What the page fetched came from the cache: the modules ran, the page works.
    page.fill("#input", "hello after reload")
    page.click("#send")
    page.wait_for_selector(".msg.assistant[data-outcome=ok]", timeout=60000)


def test_katex_and_mermaid_load_only_when_needed(page, server):
    log = NetLog(page)
    open_app(page, server.url)
    page.wait_for_load_state("networkidle")
    first = [f.url for f in log.fetches.values()]
    assert not [u for u in first if "katex" in u or "mermaid" in u], first

    # A formula: shown as its source at once, rendered by KaTeX once it has loaded on demand.
    page.evaluate(
        """async () => {
            const { setMarkdown } = await import("/static/js/markdown.js");
            const box = document.createElement("div");
            box.id = "math-box";
            document.body.append(box);
            setMarkdown(box, "Euler: $e^{i\\\\pi} + 1 = 0$ and <img src=x onerror=alert(1)>");
        }"""
    )
    page.wait_for_selector("#math-box .katex")
    assert page.locator("#math-box .math-pending").count() == 0
    assert page.locator("#math-box img").count() == 0  # still sanitised
    katex = [f for f in _static(log) if "katex" in f.url]
    assert any(f.url.endswith(".js") for f in katex) and any(f.url.endswith(".css") for f in katex)
    assert all(FINGERPRINTED.search(f.url) for f in katex), [f.url for f in katex]
    assert not [f for f in _static(log) if "mermaid" in f.url]

    # A diagram: mermaid (megabytes) is fetched on the first one only, from its fingerprinted URL.
    page.evaluate(
        """async () => {
            const { loadMermaid } = await import("/static/js/exhibits.js");
            await loadMermaid();
        }"""
    )
    mermaid = [f for f in _static(log) if "mermaid" in f.url]
    assert len(mermaid) == 1 and FINGERPRINTED.search(mermaid[0].url), [f.url for f in mermaid]
    assert mermaid[0].headers.get("content-encoding") == "gzip"
