"""Browser fixtures: Debian's chromium driven by Playwright against the real gunicorn server.

Without chromium the browser tests are skipped locally with a reason, and fail under CI
(``CI`` set), where ``.ci/run`` installs it.
"""

from __future__ import annotations

import os
import shutil
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from browser_helpers import ROOT  # noqa: E402

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
# Slow enough to reload, cut or stop mid-reply; fast enough to keep the suite short.
TOKEN_DELAY = "0.05"


def _unavailable(reason: str):
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (required under CI)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def browser():
    """One headless chromium for the whole run."""
    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    if not executable:
        _unavailable("Debian's chromium is not installed (apt-get install chromium)")
    if not os.path.exists(os.path.join(ROOT, "static", "vendor", ".installed")):
        _unavailable("static/vendor is missing: run `make vendor` (npm ci) first")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright is not installed (pip install -e '.[test]')")
    with sync_playwright() as pw:
        instance = pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield instance
        instance.close()


@pytest.fixture
def server(server_factory):
    """A real server with the demo model paced for mid-stream actions."""
    return server_factory(
        {"ODYSSEUS_DEMO_TOKEN_DELAY": TOKEN_DELAY, "ODYSSEUS_HEARTBEAT_INTERVAL": "1", "ODYSSEUS_EVICT_GRACE": "30"}
    )


@pytest.fixture
def page_factory(browser):
    """New pages (desktop size by default) that fail the test on any page error."""
    contexts, errors = [], []

    def make(width=1200, height=800, stream_check=False, **options):
        context = browser.new_context(viewport={"width": width, "height": height}, **options)
        contexts.append(context)
        if not stream_check:
            # The page runs its streaming self-test once per browser session; other tests skip it so its
            # stream never mixes with theirs (tests/browser/test_page_features.py runs it).
            # (guarded: the script runs in every frame, sandboxed previews included, which have no storage)
            context.add_init_script("try { sessionStorage.setItem('odysseus-stream-checked', '1'); } catch (e) {}")
        page = context.new_page()
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.set_default_timeout(15000)
        return page

    yield make
    for context in contexts:
        context.close()
    assert not errors, f"errors in the page: {errors}"


@pytest.fixture
def page(page_factory):
    """A desktop-sized page."""
    return page_factory()
