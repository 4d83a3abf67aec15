"""Web sources for a chat turn: ``use_web: true`` searches the web for the user's message.

The search uses the agent's configured ``web_search`` backend (SearXNG or DuckDuckGo); the top
``WEB_CONTEXT_PAGES`` results are fetched at once through the SSRF-guarded fetcher
(``odysseus.tools.web.fetch``: every hop's address checked, size and time capped) and their
readable text goes to the model as untrusted context, ``WEB_PAGE_CHARS`` per page and
``WEB_CONTEXT_CHARS`` in all. The turn announces ``web_sources`` (``[{url, title, snippet}]``)
before the first delta and keeps the rows in the reply's metadata. A failed search is a visible
notice and the reply still comes; a page that cannot be fetched is represented by its snippet.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict, List, Optional

from ..cancel import CancelToken
from ..errors import BadRequest
from ..events import WEB_SOURCES, Event
from ..tools.registry import ToolContext, ToolError
from ..tools.html_text import extract_text
from ..tools.web import fetch, readable, web_search
from . import ContextRequest, Injection, pipeline_of, untrusted_block
from .flags import defang

log = logging.getLogger(__name__)
SOURCE = "web"
QUERY_CHARS = 300


def off_hub(fn: Callable, *args: Any) -> Any:
    """Run CPU-bound ``fn`` in gevent's thread pool when gevent patched this process, else inline."""
    try:
        from gevent import get_hub
        from gevent.monkey import is_module_patched
    except ImportError:  # pragma: no cover - gevent is a dependency
        return fn(*args)
    if is_module_patched("threading"):
        return get_hub().threadpool.apply(fn, args)
    return fn(*args)


def search_enabled(config: dict) -> bool:
    """True when a web search backend is configured."""
    return str(config.get("WEB_SEARCH_BACKEND") or "").lower() in ("searxng", "duckduckgo")


def notice(message: str) -> Injection:
    """A visible notice instead of web sources, kept in the reply's metadata (``web_notice``) for history."""
    return Injection(SOURCE, notice=message, metadata={"web_notice": message})


class WebSource:
    """The context source for ``use_web`` (see the module docstring)."""

    name = SOURCE

    def __init__(self, config: dict):
        self.config = config

    def check(self, request: ContextRequest) -> Dict[str, Any]:
        """``use_web`` must be a boolean; asking for it with no search backend is refused."""
        if request.options.use_web and request.mode == "chat" and not search_enabled(self.config):
            raise BadRequest("web search is turned off on this server (WEB_SEARCH_BACKEND)")
        return {"use_web": True} if request.options.use_web and request.mode == "chat" else {}

    def gather(self, request: ContextRequest) -> List[Injection]:
        """Search, fetch the top pages, and inject their text (chat mode only)."""
        if request.mode != "chat" or not request.options.use_web:
            return []
        cancel = request.cancel or CancelToken()
        tool_ctx = ToolContext(
            owner=request.owner, session_id=request.session_id or "", cancel=cancel, config=dict(self.config)
        )
        query = " ".join(request.message.split())[:QUERY_CHARS]
        try:
            result = web_search({"query": query}, tool_ctx)
        except ToolError as exc:
            return [notice(f"Web search failed, so this reply does not use web sources: {exc}")]
        rows: List[dict] = next((e.data["data"] for e in result.events if e.type == WEB_SOURCES), [])
        if not rows:
            return [notice(f"Web search found nothing for {query[:80]!r}.")]
        texts = self._pages(rows[: max(0, int(self.config["WEB_CONTEXT_PAGES"]))], tool_ctx)
        cancel.raise_if_cancelled()
        budget = int(self.config["WEB_CONTEXT_CHARS"])
        blocks = []
        for index, row in enumerate(rows, 1):
            page = texts.get(row["url"]) or ""
            body = page[: int(self.config["WEB_PAGE_CHARS"])] if page else row["snippet"]
            block = f"[{index}] {row['title']}\nURL: {row['url']}\n{body}".strip()
            if budget - len(block) < 0:
                block = block[: max(0, budget)]
            budget -= len(block)
            if block:
                blocks.append(block)
            if budget <= 0:
                break
        text = untrusted_block(
            "web search",
            "Web search results for the user's message (cite the URLs you use):\n\n" + defang("\n\n".join(blocks)),
        )
        sources = [{"url": r["url"], "title": r["title"], "snippet": r["snippet"]} for r in rows]
        return [
            Injection(
                SOURCE,
                event=Event(WEB_SOURCES, {"data": sources}),
                text=text,
                score=0.5,
                metadata={"web_sources": sources},
            )
        ]

    def _pages(self, rows: List[dict], tool_ctx: ToolContext) -> Dict[str, str]:
        """url -> readable text of each page that could be fetched (at once, each within FETCH_TIMEOUT)."""
        if not rows:
            return {}

        def one(url: str) -> Optional[str]:
            try:
                final_url, response, body = fetch(url, tool_ctx)
                title, text = readable(response, body, extract=lambda html: off_hub(extract_text, html))
            except ToolError as exc:
                log.info("web source %s not used: %s", url, exc)
                return None
            return text

        with ThreadPoolExecutor(max_workers=len(rows)) as pool:
            texts = list(pool.map(one, [row["url"] for row in rows]))
        return {row["url"]: text for row, text in zip(rows, texts, strict=True) if text}


def init_app(app) -> None:
    """Add the web source to the app's context pipeline."""
    pipeline_of(app.extensions).add(WebSource(app.config))
