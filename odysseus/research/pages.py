"""Searching and reading pages for a research job, through the agent's web tools.

Search goes to the configured backend (``tools.web``: SearXNG JSON or DuckDuckGo HTML). Pages
are fetched with the SSRF-guarded fetcher (every hop and every connection checked), their
text extracted in gevent's thread pool, and read by at most ``concurrent_reads`` workers at
once; results come back through a queue in the order they finish.
"""

from __future__ import annotations

import queue
import threading
from typing import Callable, Dict, Iterator, List, Tuple

from ..cancel import CancelToken
from ..tools.html_text import extract_text
from ..tools.registry import ToolContext, ToolError
from ..tools.web import fetch, web_search
from .model import offload


def search(query: str, config: dict, cancel: CancelToken, results: int) -> List[dict]:
    """Result rows ``{title, url, snippet}`` for ``query``; raises ToolError when the backend fails."""
    ctx = ToolContext(
        owner="",
        session_id="",
        cancel=cancel,
        config={**config, "WEB_SEARCH_RESULTS": max(results, int(config.get("WEB_SEARCH_RESULTS", 5)))},
    )
    found = web_search({"query": query}, ctx)
    rows = found.events[0].data["data"] if found.events else []
    return [r for r in rows if str(r.get("url", "")).startswith(("http://", "https://"))]


def backend_problem(config: dict) -> str:
    """Why research cannot search on this server, or '' when it can."""
    backend = str(config.get("WEB_SEARCH_BACKEND") or "").lower()
    if backend not in ("searxng", "duckduckgo"):
        return "research needs a web search backend (WEB_SEARCH_BACKEND is off)"
    if backend == "searxng" and not config.get("SEARXNG_URL"):
        return "research needs a web search backend (SEARXNG_URL is empty)"
    return ""


def _decode(body: bytes, response) -> str:
    return body.decode(response.encoding or "utf-8", "replace")


def read_text(url: str, config: dict, cancel: CancelToken) -> Tuple[str, str, str]:
    """(final url, title, readable text) of a page; raises ToolError (refused, HTTP error, not text)."""
    ctx = ToolContext(owner="", session_id="", cancel=cancel, config=config)
    final_url, response, body = fetch(url, ctx)
    if response.status_code >= 400:
        raise ToolError(f"the server answered HTTP {response.status_code}")
    ctype = response.headers.get("Content-Type", "").lower()
    text = _decode(body, response)
    if "html" in ctype or text.lstrip()[:15].lower().startswith(("<!doctype", "<html")):
        title, text = offload(extract_text, text)
        return final_url, title, text
    if ctype.startswith(("text/", "application/json", "application/xml")) or not ctype:
        return final_url, "", text
    raise ToolError(f"not a text page ({ctype or 'unknown type'})")


def read_concurrently(
    pages: List[dict], read: Callable[[dict], dict], workers: int, cancel: CancelToken
) -> "queue.Queue":
    """Start reading ``pages`` with at most ``workers`` at once; each result is put on the returned queue.

    ``read(page)`` must not raise (it returns its failure as a result). Workers stop taking
    pages once ``cancel`` is set; a page not taken is put back as ``{"page": ..., "skipped": True}``.
    """
    todo: "queue.Queue" = queue.Queue()
    for page in pages:
        todo.put(page)
    done: "queue.Queue" = queue.Queue()

    def work() -> None:
        while True:
            try:
                page = todo.get_nowait()
            except queue.Empty:
                return
            if cancel.cancelled:
                done.put({"page": page, "skipped": True})
                continue
            try:
                done.put(read(page))
            except BaseException as exc:  # noqa: BLE001 - a reader bug must not lose the page
                done.put({"page": page, "error": f"internal error ({type(exc).__name__})"})

    for index in range(max(1, min(workers, len(pages)))):
        threading.Thread(target=work, name=f"research-read-{index}", daemon=True).start()
    return done


def new_pages(rows: List[dict], seen: Dict[str, bool], limit: int) -> Iterator[dict]:
    """Rows whose URL was not tried before, at most ``limit``; marks them seen."""
    taken = 0
    for row in rows:
        url = row["url"].split("#", 1)[0]
        if taken >= limit:
            return
        if url in seen:
            continue
        seen[url] = True
        taken += 1
        yield {**row, "url": url}
