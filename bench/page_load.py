"""Benchmark 14: the page's load in headless Chromium: bytes, requests, time to a usable composer.

The real page from the real server (gunicorn), in Debian's chromium driven by Playwright. Measured
from Chromium's own network log (the DevTools protocol), so a file served from the browser cache
counts as no request and no bytes:

- the first load (empty cache): requests, bytes transferred (compressed, headers included), of which
  static files; the time from navigation until the composer is usable (``body[data-ready=true]``
  and an enabled message box);
- a reload: the same, where the target is no request at all for a static file;
- the first reply with math: what loading KaTeX on demand adds (the first load carries none of it);
- both loads again with a 50 ms round trip emulated by Chromium (loopback has none, so the number of
  sequential requests only shows here).

Targets (issue 35): first load <= 300 KB transferred, a reload with no static request.
``python -m bench.page_load [--rounds N]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
from dataclasses import dataclass, field
from typing import Any, Dict, List, Tuple

from .common import ROOT, table

FIRST_LOAD_TARGET = 300 * 1024
LATENCY_MS = 50  # the last two rows: Chromium's network emulation adds this to every request
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]
# Records when the page says it is ready, from inside the page (no polling delay in the number).
READY_PROBE = """
new MutationObserver((_, observer) => {
  if (document.body && document.body.dataset.ready === "true") {
    window.__composerReadyAt = performance.now();
    observer.disconnect();
  }
}).observe(document, { attributes: true, subtree: true, attributeFilter: ["data-ready"] });
"""


@dataclass
class Fetch:
    """One request as Chromium saw it."""

    url: str
    status: int = 0
    cached: bool = False  # served by the browser's cache: nothing went over the wire
    transferred: int = 0  # bytes on the wire (compressed body + headers)
    headers: Dict[str, str] = field(default_factory=dict)


class NetLog:
    """Chromium's network events for one page, through a DevTools session."""

    def __init__(self, page: Any, latency_ms: float = 0) -> None:
        self.fetches: Dict[str, Fetch] = {}
        session = page.context.new_cdp_session(page)
        session.send("Network.enable")
        if latency_ms:  # a round trip like a real network's (loopback has none)
            session.send(
                "Network.emulateNetworkConditions",
                {"offline": False, "latency": latency_ms, "downloadThroughput": -1, "uploadThroughput": -1},
            )
        session.on("Network.requestWillBeSent", self._sent)
        session.on("Network.requestServedFromCache", self._from_cache)
        session.on("Network.responseReceived", self._response)
        session.on("Network.loadingFinished", self._finished)

    def _sent(self, event: Dict[str, Any]) -> None:
        self.fetches.setdefault(event["requestId"], Fetch(event["request"]["url"]))

    def _from_cache(self, event: Dict[str, Any]) -> None:
        if event["requestId"] in self.fetches:
            self.fetches[event["requestId"]].cached = True

    def _response(self, event: Dict[str, Any]) -> None:
        fetch = self.fetches.get(event["requestId"])
        if fetch is None:
            return
        response = event["response"]
        fetch.status = int(response.get("status", 0))
        fetch.headers = {k.lower(): v for k, v in response.get("headers", {}).items()}
        if response.get("fromDiskCache") or response.get("fromMemoryCache") or response.get("fromPrefetchCache"):
            fetch.cached = True

    def _finished(self, event: Dict[str, Any]) -> None:
        fetch = self.fetches.get(event["requestId"])
        if fetch is not None and not fetch.cached:
            fetch.transferred = int(event.get("encodedDataLength", 0))

    def reset(self) -> None:
        """Forget what was seen so far (before a reload)."""
        self.fetches.clear()

    def network(self, static_only: bool = False) -> List[Fetch]:
        """Requests that went to the server (a 304 revalidation counts: it is a round trip)."""
        return [f for f in self.fetches.values() if not f.cached and (not static_only or "/static/" in f.url)]

    def transferred(self) -> int:
        """Bytes on the wire for every request seen."""
        return sum(f.transferred for f in self.fetches.values())


def ready_ms(page: Any) -> float:
    """Milliseconds from navigation until the composer was usable."""
    page.wait_for_selector("body[data-ready=true]")
    page.wait_for_function("() => window.__composerReadyAt !== undefined && !document.querySelector('#input').disabled")
    return float(page.evaluate("window.__composerReadyAt"))


def measure(browser: Any, url: str, latency_ms: float = 0) -> Dict[str, Any]:
    """One fresh browser context: first load, reload, then a formula that pulls in KaTeX."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.add_init_script("sessionStorage.setItem('odysseus-stream-checked', '1')")
    context.add_init_script(READY_PROBE)
    try:
        page = context.new_page()
        log = NetLog(page, latency_ms)
        page.goto(url + "/")
        first_ms = ready_ms(page)
        page.wait_for_load_state("networkidle")
        first = (
            len(log.network()),
            log.transferred(),
            len(log.network(True)),
            sum(f.transferred for f in log.network(True)),
        )
        log.reset()
        page.reload()
        reload_ms = ready_ms(page)
        page.wait_for_load_state("networkidle")
        again = (
            len(log.network()),
            log.transferred(),
            len(log.network(True)),
            sum(f.transferred for f in log.network(True)),
        )
        log.reset()
        page.evaluate(
            """async () => {
                const { setMarkdown } = await import("/static/js/markdown.js");
                const box = document.createElement("div");
                document.body.append(box);
                setMarkdown(box, "Euler: $e^{i\\\\pi} + 1 = 0$");
            }"""
        )
        page.wait_for_selector(".katex", state="attached")
        page.wait_for_load_state("networkidle")
        katex = (len(log.network(True)), sum(f.transferred for f in log.network(True)))
        return {"first": first, "first_ms": first_ms, "reload": again, "reload_ms": reload_ms, "katex": katex}
    finally:
        context.close()


def _kb(n: float) -> str:
    return f"{n / 1024:.0f} KB"


def run(quick: bool = False, rounds: int = 0) -> Tuple[str, Dict[str, bool]]:
    """Benchmark 14's Markdown and its targets."""
    from playwright.sync_api import sync_playwright

    from .common import app_server, model_server

    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    if not executable:
        raise RuntimeError("benchmark 14 needs Debian's chromium (apt-get install chromium)")
    if not os.path.exists(os.path.join(ROOT, "static", "vendor", ".installed")):
        raise RuntimeError("benchmark 14 needs the page's vendor libraries (make vendor)")
    rounds = rounds or (3 if quick else 7)
    samples: List[Dict[str, Any]] = []
    slow: List[Dict[str, Any]] = []
    with model_server() as model_port, app_server(model_port) as server, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            measure(browser, server.url)  # warm the server's compressed-file cache
            samples = [measure(browser, server.url) for _ in range(rounds)]
            slow = [measure(browser, server.url, LATENCY_MS) for _ in range(rounds)]
        finally:
            browser.close()
    last = samples[-1]
    first_ms = statistics.median(s["first_ms"] for s in samples)
    reload_ms = statistics.median(s["reload_ms"] for s in samples)
    rows = [
        [
            "first load",
            str(last["first"][0]),
            _kb(last["first"][1]),
            str(last["first"][2]),
            _kb(last["first"][3]),
            f"{first_ms:.0f} ms",
        ],
        [
            "reload",
            str(last["reload"][0]),
            _kb(last["reload"][1]),
            str(last["reload"][2]),
            _kb(last["reload"][3]),
            f"{reload_ms:.0f} ms",
        ],
        ["first formula (KaTeX on demand)", "", "", str(last["katex"][0]), _kb(last["katex"][1]), ""],
        [
            f"first load, {LATENCY_MS} ms round trip",
            "",
            "",
            "",
            "",
            f"{statistics.median(s['first_ms'] for s in slow):.0f} ms",
        ],
        [
            f"reload, {LATENCY_MS} ms round trip",
            "",
            "",
            "",
            "",
            f"{statistics.median(s['reload_ms'] for s in slow):.0f} ms",
        ],
    ]
    text = (
        f"Headless Chromium against gunicorn on loopback, a fresh browser profile per round, {rounds} rounds "
        "(times: median; requests and bytes: the last round, they do not vary). Bytes are as transferred "
        "(gzip bodies plus headers); the page itself (HTML) and its API calls are included in the totals.\n\n"
        + table(["load", "requests", "transferred", "static requests", "static transferred", "composer usable"], rows)
    )
    targets = {
        f"first load <= {_kb(FIRST_LOAD_TARGET)} transferred ({_kb(last['first'][1])})": last["first"][1]
        <= FIRST_LOAD_TARGET,
        f"reload makes no static request ({last['reload'][2]})": last["reload"][2] == 0,
    }
    return text, targets


def main() -> None:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=0)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    text, targets = run(quick=args.quick, rounds=args.rounds)
    print(text)
    for name, ok in targets.items():
        print(f"- {'met' if ok else 'NOT MET'}: {name}")


if __name__ == "__main__":
    main()
