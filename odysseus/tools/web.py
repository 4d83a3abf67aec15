"""Web tools: ``web_search`` (SearXNG JSON or DuckDuckGo HTML) and ``fetch_url``.

``fetch_url`` is the one tool the model can point anywhere, so it carries the SSRF
guard: every hop (the URL and each redirect) must resolve only to public addresses
unless ``FETCH_ALLOW_PRIVATE`` or ``FETCH_ALLOWED_NETWORKS`` say otherwise; the peer
actually connected to is checked again before the body is read (DNS may change
between the check and the connection). Size and time are capped. The search backend
is configured by the administrator and is trusted.
"""

from __future__ import annotations

import ipaddress
import socket
import time
from typing import List, Optional
from urllib.parse import parse_qs, urljoin, urlparse

import requests

from ..events import Event
from .html_text import extract_text, parse_ddg_results
from .registry import Tool, ToolContext, ToolError, ToolResult

USER_AGENT = "Odysseus/0.1 (self-hosted assistant)"
MAX_REDIRECTS = 5


# ------------------------------------------------------------------ SSRF guard
def _networks(config: dict) -> List[ipaddress._BaseNetwork]:
    raw = str(config.get("FETCH_ALLOWED_NETWORKS") or "")
    nets = []
    for part in raw.split(","):
        if part.strip():
            nets.append(ipaddress.ip_network(part.strip(), strict=False))
    return nets


def address_allowed(ip: str, config: dict) -> bool:
    """True when ``ip`` is public, or private but explicitly allowed by config."""
    addr = ipaddress.ip_address(ip.split("%", 1)[0])
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    if any(addr in net for net in _networks(config)):
        return True
    if config.get("FETCH_ALLOW_PRIVATE"):
        return True
    return addr.is_global and not (addr.is_multicast or addr.is_reserved)


def check_url(url: str, config: dict) -> str:
    """Validate scheme and every resolved address of ``url``'s host; return the URL or raise ToolError."""
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ToolError("only http and https URLs with a host can be fetched")
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        infos = socket.getaddrinfo(parsed.hostname, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise ToolError(f"cannot resolve {parsed.hostname}: {exc}") from None
    for info in infos:
        ip = info[4][0]
        if not address_allowed(ip, config):
            raise ToolError(f"refused: {parsed.hostname} resolves to a private or local address ({ip})")
    return url


def _peer_ip(response: requests.Response) -> Optional[str]:
    """The IP address the response actually came from (best effort, urllib3 internals)."""
    try:
        sock = response.raw._connection.sock  # type: ignore[attr-defined]
        return sock.getpeername()[0]
    except Exception:
        return None


def _read_capped(response: requests.Response, limit: int, deadline: float, ctx: ToolContext) -> bytes:
    chunks, size = [], 0
    for chunk in response.iter_content(chunk_size=16384):
        ctx.cancel.raise_if_cancelled()
        if time.monotonic() > deadline:
            raise ToolError("the page took too long to download")
        chunks.append(chunk)
        size += len(chunk)
        if size >= limit:
            break
    return b"".join(chunks)[:limit]


def fetch(url: str, ctx: ToolContext) -> tuple:
    """GET ``url`` following redirects by hand (each hop checked); return (final_url, response, body)."""
    config = ctx.config
    timeout = float(config.get("FETCH_TIMEOUT", 15.0))
    limit = int(config.get("FETCH_MAX_BYTES", 2_000_000))
    deadline = time.monotonic() + timeout
    session = requests.Session()
    session.trust_env = False  # no proxies from the environment: they would bypass the address checks
    unregister = ctx.cancel.on_cancel(session.close)
    try:
        for _ in range(MAX_REDIRECTS + 1):
            check_url(url, config)
            try:
                response = session.get(url, stream=True, allow_redirects=False, timeout=(min(timeout, 10), timeout),
                                       headers={"User-Agent": USER_AGENT, "Accept": "text/html,text/plain,*/*"})
            except requests.RequestException as exc:
                raise ToolError(f"fetch failed: {type(exc).__name__}") from None
            peer = _peer_ip(response)
            if peer is not None and not address_allowed(peer, config):
                response.close()
                raise ToolError(f"refused: connected to a private or local address ({peer})")
            if response.is_redirect:
                location = response.headers.get("Location", "")
                response.close()
                url = urljoin(url, location)
                continue
            body = _read_capped(response, limit, deadline, ctx)
            response.close()
            return url, response, body
        raise ToolError("too many redirects")
    finally:
        unregister()
        session.close()


def fetch_url(args: dict, ctx: ToolContext) -> ToolResult:
    """Fetch a page and return its readable text."""
    url = args.get("url")
    if not isinstance(url, str) or not url.strip():
        raise ToolError("url must be a non-empty string")
    final_url, response, body = fetch(url.strip(), ctx)
    if response.status_code >= 400:
        raise ToolError(f"the server answered HTTP {response.status_code}")
    ctype = response.headers.get("Content-Type", "").lower()
    text = body.decode(response.encoding or "utf-8", "replace")
    if "html" in ctype or text.lstrip()[:15].lower().startswith(("<!doctype", "<html")):
        title, text = extract_text(text)
    elif ctype.startswith(("text/", "application/json", "application/xml")) or not ctype:
        title = ""
    else:
        raise ToolError(f"not a text page ({ctype or 'unknown type'})")
    head = f"URL: {final_url}\n" + (f"Title: {title}\n" if title else "")
    return ToolResult(head + "\n" + text, meta={"url": final_url, "title": title, "bytes": len(body)})


# ------------------------------------------------------------------ search
def _search_searxng(query: str, ctx: ToolContext) -> List[dict]:
    base = str(ctx.config.get("SEARXNG_URL") or "").rstrip("/")
    if not base:
        raise ToolError("web search is not configured (SEARXNG_URL is empty)")
    response = requests.get(base + "/search", params={"q": query, "format": "json"},
                            timeout=float(ctx.config.get("FETCH_TIMEOUT", 15.0)),
                            headers={"User-Agent": USER_AGENT, "Accept": "application/json"})
    if response.status_code != 200:
        raise ToolError(f"the search backend answered HTTP {response.status_code}")
    try:
        results = response.json().get("results") or []
    except ValueError:
        raise ToolError("the search backend did not answer JSON (is format=json enabled?)") from None
    return [{"title": r.get("title") or r.get("url"), "url": r.get("url"), "snippet": r.get("content") or ""}
            for r in results if isinstance(r, dict) and r.get("url")]


def _search_ddg(query: str, ctx: ToolContext) -> List[dict]:
    url = str(ctx.config.get("DUCKDUCKGO_URL") or "")
    response = requests.post(url, data={"q": query}, timeout=float(ctx.config.get("FETCH_TIMEOUT", 15.0)),
                             headers={"User-Agent": USER_AGENT})
    if response.status_code != 200:
        raise ToolError(f"the search backend answered HTTP {response.status_code}")
    results = []
    for item in parse_ddg_results(response.text):
        href = item["url"]
        if "uddg=" in href:  # DuckDuckGo wraps result links in a redirect
            href = parse_qs(urlparse(href).query).get("uddg", [href])[0]
        if href.startswith("//"):
            href = "https:" + href
        results.append({**item, "url": href})
    return results


def web_search(args: dict, ctx: ToolContext) -> ToolResult:
    """Search the web with the configured backend; results become a ``web_sources`` event."""
    query = args.get("query")
    if not isinstance(query, str) or not query.strip():
        raise ToolError("query must be a non-empty string")
    backend = str(ctx.config.get("WEB_SEARCH_BACKEND") or "").lower()
    try:
        if backend == "searxng":
            results = _search_searxng(query.strip(), ctx)
        elif backend == "duckduckgo":
            results = _search_ddg(query.strip(), ctx)
        else:
            raise ToolError("web search is turned off on this server")
    except requests.RequestException as exc:
        raise ToolError(f"the search backend could not be reached ({type(exc).__name__})") from None
    seen, rows = set(), []
    for r in results:
        if r["url"] in seen:
            continue
        seen.add(r["url"])
        rows.append({"title": (r["title"] or "")[:300], "url": r["url"], "snippet": (r["snippet"] or "")[:500]})
        if len(rows) >= int(ctx.config.get("WEB_SEARCH_RESULTS", 5)):
            break
    if not rows:
        return ToolResult(f"No results for {query!r}.", meta={"results": 0})
    text = "\n\n".join(f"[{i}] {r['title']}\n{r['url']}\n{r['snippet']}" for i, r in enumerate(rows, 1))
    return ToolResult(text, events=[Event("web_sources", {"data": rows})], meta={"results": len(rows)})


def web_tools(config: dict) -> List[Tool]:
    """``web_search`` (when a backend is configured) and ``fetch_url``."""
    tools = []
    if str(config.get("WEB_SEARCH_BACKEND") or "").lower() in ("searxng", "duckduckgo"):
        tools.append(Tool("web_search", "Search the web. Returns titles, URLs and snippets.",
                          {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
                          web_search, describe=lambda a: str(a.get("query", ""))))
    tools.append(Tool("fetch_url", "Fetch a web page (http/https) and return its readable text.",
                      {"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]},
                      fetch_url, describe=lambda a: str(a.get("url", ""))))
    return tools
