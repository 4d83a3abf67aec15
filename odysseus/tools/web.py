"""Web tools: ``web_search`` (SearXNG JSON or DuckDuckGo HTML) and ``fetch_url``.

``fetch_url`` is the one tool the model can point anywhere, so it carries the SSRF
guard: every hop (the URL and each redirect) must resolve only to public addresses
unless ``FETCH_ALLOW_PRIVATE`` or ``FETCH_ALLOWED_NETWORKS`` say otherwise; the peer
of every connection is checked again right after connect, before the request is sent
(DNS may answer differently the second time). Size and total time are capped. The search backend
is configured by the administrator and is trusted.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from typing import Callable, List, Optional
from urllib.parse import parse_qs, urljoin, urlparse

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from ..events import WEB_SOURCES, Event
from ..llm.text_repair import repair_text, repair_value
from .html_text import extract_text, parse_ddg_results
from .registry import Tool, ToolContext, ToolError, ToolResult

USER_AGENT = "Odysseus/0.1 (self-hosted assistant)"
MAX_REDIRECTS = 5


# ------------------------------------------------------------------ SSRF guard
def _networks(config: dict) -> List[ipaddress._BaseNetwork]:
    raw = str(config.get("FETCH_ALLOWED_NETWORKS") or "")
    nets: List[ipaddress._BaseNetwork] = []
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
        ip = str(info[4][0])  # an IPv4/IPv6 sockaddr's host is a str
        if not address_allowed(ip, config):
            raise ToolError(f"refused: {parsed.hostname} resolves to a private or local address ({ip})")
    return url


class _Guard:
    """Checks the address of every connection fetch_url opens, and can cut them all off.

    The check runs right after connect and before anything is sent, on the socket's real
    peer, so DNS answering differently between ``check_url`` and the connection cannot
    reach a private address.
    """

    def __init__(self, config: dict):
        self.config = config
        self.sockets: List[socket.socket] = []
        self.refused: Optional[str] = None
        self.aborted: Optional[str] = None

    def connected(self, sock: socket.socket) -> None:
        peer = sock.getpeername()[0]
        if not address_allowed(peer, self.config):
            self.refused = peer
            sock.close()
            raise OSError(f"refused to connect to {peer}")
        self.sockets.append(sock)

    def abort(self, why: str) -> None:
        """Shut every socket down: a blocked read returns at once (time limit, cancel)."""
        self.aborted = self.aborted or why
        for sock in self.sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def guarded_session(guard: _Guard) -> requests.Session:
    """A requests session whose every new connection goes through ``guard.connected``."""

    def checked(base):
        class Checked(base):
            def _new_conn(self):
                sock = super()._new_conn()
                guard.connected(sock)
                return sock

        return Checked

    class Pool(HTTPConnectionPool):
        ConnectionCls = checked(HTTPConnection)

    class SecurePool(HTTPSConnectionPool):
        ConnectionCls = checked(HTTPSConnection)

    session = requests.Session()
    session.trust_env = False  # no proxies from the environment: they would bypass the address checks
    adapter = HTTPAdapter(max_retries=0)
    adapter.poolmanager.pool_classes_by_scheme = {"http": Pool, "https": SecurePool}
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


def _read_capped(response: requests.Response, limit: int, guard: _Guard, ctx: ToolContext) -> bytes:
    chunks, size = [], 0
    try:
        for chunk in response.iter_content(chunk_size=16384):
            chunks.append(chunk)
            size += len(chunk)
            if size >= limit:
                break
    except (requests.RequestException, OSError, AttributeError, ValueError):
        if not guard.aborted:
            raise ToolError("the connection failed while reading the page") from None
    if guard.aborted == "timeout":
        raise ToolError("the page took too long to download")
    ctx.cancel.raise_if_cancelled()
    return b"".join(chunks)[:limit]


def fetch(url: str, ctx: ToolContext, limit: Optional[int] = None, accept: str = "text/html,text/plain,*/*") -> tuple:
    """GET ``url`` following redirects by hand (each hop checked); return (final_url, response, body).

    The body is read up to ``limit`` bytes (``FETCH_MAX_BYTES`` by default) and cut there."""
    config = ctx.config
    timeout = float(config.get("FETCH_TIMEOUT", 15.0))
    limit = int(config.get("FETCH_MAX_BYTES", 2_000_000)) if limit is None else limit
    guard = _Guard(config)
    session = guarded_session(guard)
    timer = threading.Timer(timeout, guard.abort, args=("timeout",))
    timer.daemon = True
    timer.start()
    unregister = ctx.cancel.on_cancel(lambda: guard.abort("cancelled"))
    try:
        for _ in range(MAX_REDIRECTS + 1):
            check_url(url, config)
            try:
                response = session.get(
                    url,
                    stream=True,
                    allow_redirects=False,
                    timeout=(min(timeout, 10), timeout),
                    headers={"User-Agent": USER_AGENT, "Accept": accept},
                )
            except requests.RequestException as exc:
                if guard.refused:
                    raise ToolError(f"refused: connected to a private or local address ({guard.refused})") from None
                if guard.aborted == "timeout":
                    raise ToolError("the page took too long to download") from None
                raise ToolError(f"fetch failed: {type(exc).__name__}") from None
            if response.is_redirect:
                location = response.headers.get("Location", "")
                response.close()
                url = urljoin(url, location)
                continue
            body = _read_capped(response, limit, guard, ctx)
            response.close()
            return url, response, body
        raise ToolError("too many redirects")
    finally:
        timer.cancel()
        unregister()
        session.close()


def _decode(body: bytes, charset: Optional[str]) -> str:
    """A page's text in its declared charset (UTF-8 when unknown), never with a lone surrogate.

    A page may declare ``charset=utf-7`` or ``unicode_escape``: both decode to half pairs.
    """
    try:
        text = body.decode(charset or "utf-8", "replace")
    except LookupError:  # an unknown charset, or a codec that is not a text encoding
        text = body.decode("utf-8", "replace")
    return repair_text(text)


def readable(response: requests.Response, body: bytes, extract: Callable = extract_text) -> tuple:
    """(title, text) of a fetched page; ToolError for HTTP errors and non-text content.

    ``extract`` turns HTML into (title, text); callers on the gevent hub pass one that runs in a thread.
    """
    if response.status_code >= 400:
        raise ToolError(f"the server answered HTTP {response.status_code}")
    ctype = response.headers.get("Content-Type", "").lower()
    text = _decode(body, response.encoding)
    if "html" in ctype or text.lstrip()[:15].lower().startswith(("<!doctype", "<html")):
        return extract(text)
    if ctype.startswith(("text/", "application/json", "application/xml")) or not ctype:
        return "", text
    raise ToolError(f"not a text page ({ctype or 'unknown type'})")


def fetch_url(args: dict, ctx: ToolContext) -> ToolResult:
    """Fetch a page and return its readable text."""
    url = args.get("url")
    if not isinstance(url, str) or not url.strip():
        raise ToolError("url must be a non-empty string")
    final_url, response, body = fetch(url.strip(), ctx)
    title, text = readable(response, body)
    head = f"URL: {final_url}\n" + (f"Title: {title}\n" if title else "")
    return ToolResult(head + "\n" + text, meta={"url": final_url, "title": title, "bytes": len(body)})


# ------------------------------------------------------------------ search
def _search_searxng(query: str, ctx: ToolContext) -> List[dict]:
    base = str(ctx.config.get("SEARXNG_URL") or "").rstrip("/")
    if not base:
        raise ToolError("web search is not configured (SEARXNG_URL is empty)")
    response = requests.get(
        base + "/search",
        params={"q": query, "format": "json"},
        timeout=float(ctx.config.get("FETCH_TIMEOUT", 15.0)),
        headers={"User-Agent": USER_AGENT, "Accept": "application/json"},
    )
    if response.status_code != 200:
        raise ToolError(f"the search backend answered HTTP {response.status_code}")
    try:
        results = repair_value(response.json().get("results") or [])  # half a surrogate pair -> U+FFFD
    except (ValueError, RecursionError, AttributeError):
        raise ToolError("the search backend did not answer JSON (is format=json enabled?)") from None
    return [
        {"title": r.get("title") or r.get("url"), "url": r.get("url"), "snippet": r.get("content") or ""}
        for r in results
        if isinstance(r, dict) and r.get("url")
    ]


def _search_ddg(query: str, ctx: ToolContext) -> List[dict]:
    url = str(ctx.config.get("DUCKDUCKGO_URL") or "")
    response = requests.post(
        url, data={"q": query}, timeout=float(ctx.config.get("FETCH_TIMEOUT", 15.0)), headers={"User-Agent": USER_AGENT}
    )
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
    return ToolResult(text, events=[Event(WEB_SOURCES, {"data": rows})], meta={"results": len(rows)})


def web_tools(config: dict) -> List[Tool]:
    """``web_search`` (when a backend is configured) and ``fetch_url``."""
    tools = []
    if str(config.get("WEB_SEARCH_BACKEND") or "").lower() in ("searxng", "duckduckgo"):
        tools.append(
            Tool(
                "web_search",
                "Search the web. Returns titles, URLs and snippets.",
                {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
                web_search,
                describe=lambda a: str(a.get("query", "")),
            )
        )
    tools.append(
        Tool(
            "fetch_url",
            "Fetch a web page (http/https) and return its readable text.",
            {"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]},
            fetch_url,
            describe=lambda a: str(a.get("url", "")),
        )
    )
    return tools
