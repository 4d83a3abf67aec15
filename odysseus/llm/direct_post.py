"""One provider URL's requests on pooled keep-alive sockets: the request in ONE write, the head read here.

Issue 22 measured the provider request through ``requests`` (its adapter, urllib3's pool and
``http.client``) at about a seventh of the worker's CPU per turn start, sent in two writes (head,
then body), every body read through three buffered layers. Issue 39 made this client the only
path: ``bench/http_paths.py`` puts urllib3 2.x alone at about 7x this client's CPU per streamed
token and 4x per request, httpx higher still.

``DirectTarget`` is one (method, URL): the request line and headers encoded once, its ``Route``
(straight, or through a proxy: ``connect.py``) and the pool it takes sockets from. Per call only
``Content-Length``, the jar's ``Cookie`` (when it holds any) and the body are added.

The headers, in order: ``DEFAULT_HEADERS``, the transport's (the provider's key, configured extra
headers), ``Content-Type: application/json`` for a body, ``Content-Length``, ``Cookie``.

Invariants:

- a pooled socket the server closed while it was idle fails before the first byte of a
  response; the request is then sent again on another socket (the model never saw it), while a
  failure on a fresh socket is the provider's (``DirectTarget.exchange``);
- nothing is sent for a URL or a header that could not be sent as written (``InvalidRequest``:
  no scheme other than http(s), no line break in a header value);
- the caller registers every socket with the run's ``CancelToken`` before it can block
  (``on_socket``), and a stop that came during the connect shuts it down right after.
"""

from __future__ import annotations

import base64
import re
import time
from typing import Any, Callable, Dict, List, Optional, Tuple
from urllib.parse import quote, unquote, urlsplit

from gevent.monkey import get_original

from .. import __version__
from ..cancel import CancelToken
from .body_stream import close_quietly
from .connect import DEFAULT_PORTS, Route, host_header
from .response_head import Head, NothingBack, read_head

#: what every provider request says about its client, before the transport's own headers
DEFAULT_HEADERS: Tuple[Tuple[str, str], ...] = (
    ("User-Agent", f"odysseus/{__version__}"),
    ("Accept-Encoding", "gzip, deflate"),  # what body_stream decodes
    ("Accept", "*/*"),
    ("Connection", "keep-alive"),
)
_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # an HTTP token (RFC 9110)
_VALUE = re.compile(r"(\S[^\r\n]*)?")  # as requests checked it: no line break, no leading whitespace
_SAFE = "!#$%&'()*+,/:;=?@[]~"  # requests' requote_uri: reserved characters and % stay as written
_poll = get_original("select", "poll")  # the real poll: a zero-timeout check must not yield to the hub
_POLLIN = 1


class InvalidRequest(ValueError):
    """A URL or header that cannot be sent as written; ``kind`` says which (``URL`` or ``header``)."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def check_header(name: str, value: str) -> None:
    """``InvalidRequest`` unless ``name: value`` is one header line (no line break, no leading space, latin-1)."""
    if not isinstance(name, str) or not isinstance(value, str):
        raise InvalidRequest("header", f"{name!r} must be a string with a string value")
    if not _NAME.fullmatch(name) or not _VALUE.fullmatch(value):
        raise InvalidRequest("header", f"{name!r}: a name of token characters, a value without line breaks")
    try:
        (name + value).encode("latin-1")
    except UnicodeEncodeError:
        raise InvalidRequest("header", f"{name!r} has characters HTTP headers cannot carry") from None


class Destination:
    """A URL split into what a request needs: scheme, host (IDNA), port, request target, and its credentials."""

    def __init__(self, url: str):
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as exc:
            raise InvalidRequest("URL", f"{url!r}: {exc}") from None
        self.scheme = parts.scheme.lower()
        if self.scheme not in DEFAULT_PORTS:
            raise InvalidRequest("URL", f"{url!r}: only http and https URLs are supported")
        host = parts.hostname or ""
        if not host:
            raise InvalidRequest("URL", f"{url!r} has no host")
        if not host.isascii():
            try:
                host = host.encode("idna").decode("ascii")
            except UnicodeError:
                raise InvalidRequest("URL", f"{url!r}: the host is not a valid international name") from None
        self.host = host
        self.port = port or DEFAULT_PORTS[self.scheme]
        self.url = url
        target = quote(parts.path or "/", safe=_SAFE)
        if parts.query:
            target += "?" + quote(parts.query, safe=_SAFE)
        self.target = target  # origin form: path and query
        shown = host_header(host, self.port, self.scheme)
        self.absolute = f"{self.scheme}://{shown}{target}"  # absolute form, for a forwarding proxy
        self.host_header = shown
        #: ``user:password@`` in the URL becomes Basic authorization (as requests did)
        self.authorization: Optional[str] = None
        if parts.username is not None:
            pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode("latin-1", "replace")
            self.authorization = "Basic " + base64.b64encode(pair).decode("ascii")


class DirectTarget:
    """One (method, URL)'s requests: the head encoded once, the route its connections take, the pool."""

    def __init__(
        self, method: str, destination: Destination, headers: List[Tuple[str, str]], route: Route, pool: "SocketPool"
    ):
        self.method = method
        self.url = destination.url
        self.route = route
        self.pool = pool
        items = list(DEFAULT_HEADERS)
        for name, value in headers:  # the transport's headers replace a default of the same name in place
            check_header(name, value)
            at = next((i for i, (n, _) in enumerate(items) if n.lower() == name.lower()), None)
            if at is None:
                items.append((name, value))
            else:
                items[at] = (name, value)
        if destination.authorization:
            items = [(n, v) for n, v in items if n.lower() != "authorization"]
            items.append(("Authorization", destination.authorization))
        self.sends_body = method in ("POST", "PUT", "PATCH")
        if self.sends_body and not any(n.lower() == "content-type" for n, _ in items):
            items.append(("Content-Type", "application/json"))
        if route.forward and route.proxy is not None and route.proxy.authorization:
            items.append(("Proxy-Authorization", route.proxy.authorization))
        target = destination.absolute if route.forward else destination.target
        lines = [f"{method} {target} HTTP/1.1\r\n", f"Host: {destination.host_header}\r\n"]
        lines += [f"{name}: {value}\r\n" for name, value in items]
        #: the head up to Content-Length and Cookie, the ones that change per call
        self._head = "".join(lines).encode("latin-1")
        #: every header in the order sent, without Host (tests, and anyone asking what goes out)
        self.header_items = items

    def request_bytes(self, body: Optional[bytes], cookie: Optional[str]) -> bytes:
        """The whole request: the head made once, ``Content-Length`` (with a body), ``Cookie`` (when given), body."""
        parts = [self._head]
        if body is not None or self.sends_body:
            parts.append(b"Content-Length: %d\r\n" % len(body or b""))
        if cookie:
            check_header("Cookie", cookie)
            parts.append(f"Cookie: {cookie}\r\n".encode("latin-1"))
        parts.append(b"\r\n")
        if body:
            parts.append(body)
        return b"".join(parts)

    def release(self, sock: Any) -> None:
        """Keep a socket whose response was read to its end for this target's next request."""
        self.pool.give(self.route.key, sock)

    def exchange(
        self, data: bytes, timeouts: Any, deadline: float, on_socket: Callable[[Any], None], cancel: CancelToken
    ) -> Tuple[Any, Head, bytes]:
        """Send ``data`` and read the response head: (socket, head, the body bytes read with it).

        A pooled socket that fails before any response byte is dropped and the next one (at last
        a fresh connection) is tried; a fresh connection's failure is raised.
        """
        while True:
            cancel.raise_if_cancelled()  # a stop shuts the socket down: that is no stale socket to retry
            sock = self.pool.take(self.route.key)
            reused = sock is not None
            if sock is None:
                sock = self.route.connect(timeouts.connect, on_socket)
            else:
                on_socket(sock)
            try:
                sock.settimeout(max(0.001, deadline - time.monotonic()))
                sock.sendall(data)
            except ConnectionError:  # reset or broken pipe while sending: a stale pooled socket
                close_quietly(sock)
                if not reused:
                    raise
                continue
            except BaseException:
                close_quietly(sock)
                raise
            try:
                head, rest = read_head(sock, deadline)
                return sock, head, rest
            except NothingBack as exc:  # not one byte came back: the server closed it before reading
                close_quietly(sock)
                if not reused:
                    raise exc.error from None
            except BaseException:  # some of a response came: whatever went wrong is the provider's
                close_quietly(sock)
                raise


def _peer_closed(sock: Any) -> bool:
    """True when an idle pooled socket is readable: its server closed it (or sent stray bytes); do not reuse.

    A zero-timeout ``poll`` of the descriptor: below gevent's wrapper and below TLS, where a
    ``close_notify`` counts as readable too.
    """
    try:
        poller = _poll()
        poller.register(sock.fileno(), _POLLIN)
        return bool(poller.poll(0))
    except (OSError, ValueError):
        return True


class SocketPool:
    """Idle keep-alive sockets per route, newest first, at most ``size`` each."""

    def __init__(self, size: int):
        self.size = size
        self.idle: Dict[str, List[Any]] = {}
        self.closed = False

    def take(self, key: str) -> Optional[Any]:
        """An idle socket of ``key`` still open at the other end, else None."""
        idle = self.idle.get(key)
        while idle:
            try:
                sock = idle.pop()
            except IndexError:  # emptied by another thread between the test and the pop (plain threads)
                return None
            if not _peer_closed(sock):
                return sock
            close_quietly(sock)
        return None

    def give(self, key: str, sock: Any) -> None:
        """Keep ``sock`` for the next request to ``key`` (closed when the pool is full or closed)."""
        idle = self.idle.setdefault(key, [])
        if self.closed or len(idle) >= self.size:
            close_quietly(sock)
            return
        sock.settimeout(None)
        idle.append(sock)

    def close(self) -> None:
        """Close every idle socket; sockets given back later are closed too."""
        self.closed = True
        for idle in self.idle.values():
            for sock in idle:
                close_quietly(sock)
        self.idle.clear()
