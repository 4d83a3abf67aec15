"""A provider's streaming POST on a plain socket: HTTP/1.1 with no library layer per request (issue 22).

``requests`` (with urllib3 and http.client under it) took about a seventh of the worker's CPU
per turn start, sent every request in two writes (head, then body), and every body read went
through three buffered layers. For the common provider URL -- http or https, no proxy, no
client certificate -- ``Transport`` sends here the bytes ``PostPlan`` would send (the same
headers in the same order, cookies from the session's jar) in ONE write on a pooled keep-alive
socket, reads the response head itself and decodes the body (chunked, ``Content-Length`` or
until close; gzip and deflate) straight from ``recv``.

What stays with ``requests``: a URL a proxy applies to, a session with a client certificate (and,
as before, auth, params or hooks: ``prepared_post.plan_for``), any call with extra headers, and
the rest of a redirect (the direct response becomes the first entry of ``history`` and
``Session.resolve_redirects`` follows it, as ``Session.post`` would).

Invariants:

- a pooled socket the server closed while it was idle fails before the first byte of a
  response; the request is then sent again on another socket (the model never saw it), while a
  failure on a fresh socket is the provider's (``DirectTarget.exchange``);
- a socket goes back to the pool only after its response body was read to its end and the
  response did not ask to close (``DirectStream.reusable``);
- the caller registers the socket with the run's ``CancelToken`` before it connects
  (``on_socket``), and a stop that came during the connect shuts it down right after.
"""

from __future__ import annotations

import _socket
import http.client
import io
import ipaddress
import os
import socket
import ssl
import time
import zlib
from types import SimpleNamespace
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple
from urllib.parse import urlsplit

import requests
from requests.cookies import extract_cookies_to_jar, get_cookie_header
from requests.structures import CaseInsensitiveDict
from requests.utils import DEFAULT_CA_BUNDLE_PATH

from gevent import getcurrent

from ..cancel import CancelToken
from ..errors import ProviderTimeout
from .response_head import MAX_HEAD, Head, head_end, parse_head
from .stream_reader import ChunkedDecoder, dechunked

READ_SIZE = 65536
REDIRECTS = (301, 302, 303, 307, 308)
#: after the protocol's end marker, how long to wait for the body's end (as ``http.DRAIN_SECONDS``)
DRAIN_SECONDS = 0.25
DEFAULT_PORTS = {"http": 80, "https": 443}
_NO_BODY = (204, 304)


def _peer_closed(sock: Any) -> bool:
    """True when an idle pooled socket has been closed by its server (or has unexpected bytes): do not reuse."""
    raw = getattr(sock, "_sock", sock)  # gevent's socket wraps the real one
    try:  # the C socket's recv: below gevent's wrapper and below TLS (a close_notify counts as closing)
        _socket.socket.recv(raw, 1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except BlockingIOError:
        return False  # nothing to read: still open
    except (OSError, TypeError, ValueError):
        return True
    return True  # EOF or stray bytes


def _literal_address(host: str, port: int) -> List[Tuple[Any, Any, int, str, Tuple[Any, ...]]]:
    """``getaddrinfo``'s answer for an IP literal, made here: under gevent a lookup is a trip to a thread."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return []  # a name: resolved on each new connection
    if "%" in host:
        return []  # a scoped IPv6 address: getaddrinfo knows its interface
    if address.version == 6:
        return [(socket.AF_INET6, socket.SOCK_STREAM, 0, "", (host, port, 0, 0))]
    return [(socket.AF_INET, socket.SOCK_STREAM, 0, "", (host, port))]


class DirectTarget:
    """One provider URL's direct POST: the request head made once, the TLS context, the keep-alive pool."""

    def __init__(self, plan: Any, pool: "SocketPool"):
        url = plan.url
        parts = urlsplit(url)
        self.plan = plan  # prepared_post.PostPlan: the body's encoding, and the redirects requests follows
        self.url = url
        self.scheme = parts.scheme
        self.host = parts.hostname or ""
        self.port = parts.port or DEFAULT_PORTS[self.scheme]
        self.key = f"{self.scheme}://{self.host}:{self.port}"
        target = parts.path or "/"
        if parts.query:
            target += "?" + parts.query
        host = f"[{self.host}]" if ":" in self.host else self.host  # an IPv6 literal
        host_header = host if self.port == DEFAULT_PORTS[self.scheme] else f"{host}:{self.port}"
        #: the plan's headers, in the order requests sends them; Content-Length is filled per call
        self.header_items: List[Tuple[str, str]] = list(plan.headers.items())
        self._start = f"POST {target} HTTP/1.1\r\nHost: {host_header}\r\n"
        self.pool = pool
        self._literal = _literal_address(self.host, self.port)
        self.context: Optional[ssl.SSLContext] = self._tls(plan.verify) if self.scheme == "https" else None

    @staticmethod
    def _tls(verify: Any) -> ssl.SSLContext:
        """The context ``requests`` would verify with: certifi's bundle, a CA file or directory, or none."""
        if verify is False:
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            return context
        where = DEFAULT_CA_BUNDLE_PATH if verify is True or verify is None else str(verify)
        if os.path.isdir(where):
            return ssl.create_default_context(capath=where)
        return ssl.create_default_context(cafile=where)

    def request_bytes(self, body: bytes, cookie: Optional[str]) -> bytes:
        """The whole request: line, headers (Content-Length filled in, Cookie when the jar has one), body."""
        lines = [self._start]
        for name, value in self.header_items:
            if name == "Content-Length":
                value = str(len(body))
            lines.append(f"{name}: {value}\r\n")
        if cookie:
            lines.append(f"Cookie: {cookie}\r\n")
        lines.append("\r\n")
        return "".join(lines).encode("latin-1") + body

    def connect(self, timeout: float, on_socket: Callable[[Any], None]) -> Any:
        """A new connection (TCP_NODELAY, TLS when https); ``on_socket`` sees the socket before it connects."""
        infos = self._literal or socket.getaddrinfo(self.host, self.port, 0, socket.SOCK_STREAM)
        error: Optional[BaseException] = None
        for family, kind, proto, _name, address in infos:
            sock = socket.socket(family, kind, proto)
            on_socket(sock)
            try:
                sock.settimeout(timeout)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.connect(address)
                on_socket(sock)  # again: a stop that came while connecting shuts it down now
                if self.context is not None:
                    sock = self.context.wrap_socket(sock, server_hostname=self.host)
                    on_socket(sock)
                return sock
            except socket.timeout:
                sock.close()
                raise ProviderTimeout("Connect timeout") from None
            except OSError as exc:
                sock.close()
                error = exc
        raise error or OSError(f"no address for {self.host}")

    def exchange(
        self, data: bytes, timeouts: Any, deadline: float, on_socket: Callable[[Any], None], cancel: CancelToken
    ) -> Tuple[Any, Head, bytes]:
        """Send ``data`` and read the response head: (socket, head, the body bytes read with it).

        A pooled socket that fails before any response byte is dropped and the next one (at last
        a fresh connection) is tried; a fresh connection's failure is raised.
        """
        while True:
            cancel.raise_if_cancelled()  # a stop shuts the socket down: that is no stale socket to retry
            sock = self.pool.take(self.key)
            reused = sock is not None
            if sock is None:
                sock = self.connect(timeouts.connect, on_socket)
            else:
                on_socket(sock)
            try:
                sock.settimeout(max(0.001, deadline - time.monotonic()))
                sock.sendall(data)
            except ConnectionError:  # reset or broken pipe while sending: a stale pooled socket
                _close(sock)
                if not reused:
                    raise
                continue
            except BaseException:
                _close(sock)
                raise
            try:
                head, rest = read_head(sock, deadline)
                return sock, head, rest
            except _NothingBack as exc:  # not one byte came back: the server closed it before reading
                _close(sock)
                if not reused:
                    raise exc.error from None
            except BaseException:  # some of a response came: whatever went wrong is the provider's
                _close(sock)
                raise


class _NothingBack(Exception):
    """The connection ended before the first byte of a response (a stale pooled socket, or a dead server)."""

    def __init__(self, error: BaseException):
        super().__init__(str(error))
        self.error = error


def read_head(sock: Any, deadline: float) -> Tuple[Head, bytes]:
    """Read until a final (non-1xx) response head is complete: (head, the bytes after it)."""
    buf = b""
    while True:
        end = head_end(buf)
        if end < 0:
            if len(buf) > MAX_HEAD:
                raise http.client.LineTooLong("response head")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ProviderTimeout("Read timeout")
            sock.settimeout(remaining)
            try:
                data = sock.recv(READ_SIZE)
            except ConnectionError as exc:
                if not buf:
                    raise _NothingBack(exc) from None
                raise
            if not data:
                if not buf:
                    raise _NothingBack(http.client.RemoteDisconnected("Remote end closed connection without response"))
                raise http.client.IncompleteRead(buf)
            buf += data
            continue
        head = parse_head(buf[:end])
        buf = buf[end:]
        if 100 <= head.status < 200 and head.status != 101:
            continue  # an interim response (100 Continue, 103 Early Hints): the real one follows
        return head, buf


def _close(sock: Any) -> None:
    try:
        sock.close()
    except OSError:
        pass


class SocketPool:
    """Idle keep-alive sockets per origin, newest first, at most ``size`` each."""

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
            _close(sock)
        return None

    def give(self, key: str, sock: Any) -> None:
        """Keep ``sock`` for the next request to ``key`` (closed when the pool is full or closed)."""
        idle = self.idle.setdefault(key, [])
        if self.closed or len(idle) >= self.size:
            _close(sock)
            return
        sock.settimeout(None)
        idle.append(sock)

    def close(self) -> None:
        """Close every idle socket; sockets given back later are closed too."""
        self.closed = True
        for idle in self.idle.values():
            for sock in idle:
                _close(sock)
        self.idle.clear()


def _decompressor(encoding: str) -> Optional[Any]:
    """A streaming decoder for a Content-Encoding ``requests`` asks for (gzip, deflate), None for identity."""
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return None
    if encoding in ("gzip", "x-gzip"):
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if encoding == "deflate":
        return _Deflate()
    raise http.client.HTTPException(f"unsupported Content-Encoding {encoding!r}")


class _Deflate:
    """``deflate`` as servers send it: zlib-wrapped, or (wrongly, but commonly) raw."""

    def __init__(self) -> None:
        self._obj: Any = zlib.decompressobj()
        self._first = True

    def decompress(self, data: bytes) -> bytes:
        if self._first and data:
            self._first = False
            try:
                return self._obj.decompress(data)
            except zlib.error:
                self._obj = zlib.decompressobj(-zlib.MAX_WBITS)
        return self._obj.decompress(data)


class TimedReads:
    """What both provider streams (this one and ``http.StreamResponse``) time their reads by: what is left of
    the first-token deadline until the adapter marks output, the idle timeout after that."""

    def __init__(self, timeouts: Any, sent_at: float, unregister: Callable[[], None]):
        self.timeouts = timeouts
        self.first_token_deadline = sent_at + timeouts.first_token
        self.output_started = False
        self.reusable = False
        self._unregister = unregister

    def mark_output(self) -> None:
        """The model produced output: from now on reads use the idle timeout."""
        self.output_started = True

    def read_timeout(self) -> float:
        """The timeout of the next read (ProviderTimeout once the first-token deadline has passed)."""
        if self.output_started:
            return self.timeouts.idle
        timeout = self.first_token_deadline - time.monotonic()
        if timeout <= 0:
            raise ProviderTimeout("Read timeout")  # keep-alive bytes, but no output in time
        return max(0.001, timeout)


class DirectStream(TimedReads):
    """An open direct response: status, reason, headers, then timed raw body chunks (``http.StreamResponse``'s API)."""

    def __init__(
        self,
        sock: Any,
        head: Head,
        rest: bytes,
        timeouts: Any,
        sent_at: float,
        target: DirectTarget,
        unregister: Callable[[], None],
    ):
        super().__init__(timeouts, sent_at, unregister)
        self.sock = sock
        self.status_code = head.status
        self.reason = head.reason
        self.headers = head.headers
        self._target = target
        self._rest = rest
        self._ended = False  # the body was read to its end
        connection = (head.headers.get("connection") or "").lower()
        self._keep = head.version == 11 and "close" not in connection
        self._decoder: Optional[ChunkedDecoder] = None
        self._left: Optional[int] = None
        if head.status in _NO_BODY:
            self._left = 0
        elif "chunked" in (head.headers.get("transfer-encoding") or "").lower():
            self._decoder = ChunkedDecoder()
        elif head.headers.get("content-length") is not None:
            try:
                self._left = int(head.headers["content-length"])
            except ValueError:
                raise http.client.HTTPException("bad Content-Length") from None
            if self._left < 0:
                raise http.client.HTTPException("bad Content-Length")
        else:
            self._keep = False  # the body ends when the server closes
        self._decompress = _decompressor(head.headers.get("content-encoding") or "")
        # gevent: after a short read the socket is most likely drained, so wait until it is readable
        # instead of calling recv for an EAGAIN first (TLS may hold decrypted bytes: plain sockets only)
        hub, event = getattr(sock, "hub", None), getattr(sock, "_read_event", None)
        waitable = hub is not None and event is not None and not isinstance(sock, ssl.SSLSocket)
        self._hub: Any = hub if waitable else None  # None: recv does its own waiting
        self._read_event: Any = event
        self._idle_timer: Any = None  # the libev timer every idle-phase wait rearms (made on first use)
        self._drained = False
        self._drain_until: Optional[float] = None  # set by finish: reads are bounded by the drain time

    def _recv(self) -> bytes:
        sock = self.sock
        if self._drain_until is not None:
            timeout = self._drain_until - time.monotonic()
            if timeout <= 0:
                raise ProviderTimeout("Read timeout")
        else:
            timeout = self.read_timeout()
        sock.settimeout(timeout)
        if self._drained and self._hub is not None:
            self._wait_readable(timeout)  # socket.timeout when nothing comes in time, like recv
        data = sock.recv(READ_SIZE)
        self._drained = len(data) < READ_SIZE
        return data

    def _wait_readable(self, timeout: float) -> None:
        """Park this greenlet until the socket is readable; ``socket.timeout`` after ``timeout`` s.

        [issue 22] gevent's own wait builds a ``Timeout`` (an exception object, a timer and a context
        manager) for each wait, and a paced reply waits once per token. Here every wait of the idle
        phase (after the first output, a constant timeout) rearms one libev timer kept for the
        stream, with the whole timeout from now; the first-token phase, whose deadline shrinks,
        takes a timer per wait. Cancelling works as before: closing the socket throws into the same
        ``hub.wait``.
        """
        hub = self._hub
        reuse = self.output_started and self._drain_until is None
        if reuse:
            if self._idle_timer is None:  # repeating: again() rearms it with the whole timeout from now
                self._idle_timer = hub.loop.timer(timeout, timeout)
            timer = self._idle_timer
            # not start(): libev keeps a stopped timer's *remaining* time, so a restart would count
            # every earlier wait against this one (update: no expiry measured on a stale clock)
            timer.again(_throw_read_timeout, getcurrent(), update=True)
        else:
            timer = hub.loop.timer(timeout)
            timer.start(_throw_read_timeout, getcurrent(), update=True)
        try:
            hub.wait(self._read_event)
        finally:
            timer.stop()
            if not reuse:
                timer.close()

    def _raw_body(self) -> Iterator[bytes]:
        """The body's bytes as they arrive, de-chunked, until its end (or the connection's)."""
        rest = [self._rest]
        self._rest = b""

        def read() -> bytes:  # what came with the head first, then the socket
            if rest[0]:
                data, rest[0] = rest[0], b""
                return data
            return self._recv()

        decoder, left = self._decoder, self._left
        if decoder is not None:
            yield from dechunked(decoder, read)
            self._ended = True
            return
        if left is not None:
            while left > 0:
                data = read()
                if not data:
                    raise http.client.IncompleteRead(b"", left)
                if len(data) > left:
                    data = data[:left]  # a server that sends more than it announced: the rest is not ours
                    self._keep = False
                left -= len(data)
                self._left = left
                yield data
            self._ended = True
            return
        while True:
            data = read()
            if not data:
                self._ended = True
                return
            yield data

    def chunks(self) -> Iterator[bytes]:
        """Raw body bytes as they arrive (decompressed when the server compressed them)."""
        decompress = self._decompress
        if decompress is None:
            yield from self._raw_body()
            return
        for data in self._raw_body():
            try:
                out = decompress.decompress(data)
            except zlib.error as exc:  # a malformed body: the adapter boundary reports a protocol error
                raise ValueError(f"undecodable compressed body ({exc})") from None
            if out:
                yield out

    def finish(self) -> None:
        """The reply ended normally: read to the end of the body (briefly) so the socket can be reused."""
        if self.sock is None:
            return
        if not self._ended:
            self._drain_until = time.monotonic() + DRAIN_SECONDS
            try:
                for _ in self._raw_body():
                    pass
            except Exception:  # noqa: BLE001 - any trouble here only means "do not reuse"
                return
        self.reusable = self._ended and self._keep

    def close(self) -> None:
        """Forget the cancel callback; give a fully read socket back to the pool, else close it."""
        self._unregister()
        if self._idle_timer is not None:
            self._idle_timer.close()
            self._idle_timer = None
        sock, self.sock = self.sock, None
        if sock is None:
            return
        if self.reusable:
            self._target.pool.give(self._target.key, sock)
        else:
            _close(sock)

    def as_requests_response(self, url: str, body: bytes) -> requests.Response:
        """This response as a ``requests.Response`` with its (bounded) body read: the start of a redirect chain."""
        response = requests.Response()
        response.status_code = self.status_code
        response.reason = self.reason
        response.headers = CaseInsensitiveDict(self.headers)
        response.url = url
        response._content = body
        response._content_consumed = True  # type: ignore[attr-defined]  # read above: nothing left on a socket
        response.encoding = None
        return response


def _throw_read_timeout(reader: Any) -> None:
    """A read timer's expiry (run by the hub): the waiting greenlet gets what a timed-out recv raises."""
    reader.throw(socket.timeout("timed out"))


def cookie_header(session: requests.Session, url: str, header_items: List[Tuple[str, str]]) -> Optional[str]:
    """The Cookie header the session's jar has for ``url`` (None when the jar is empty, the common case)."""
    if not len(session.cookies):
        return None
    probe = requests.PreparedRequest()
    probe.url, probe.headers = url, CaseInsensitiveDict(header_items)
    return get_cookie_header(session.cookies, probe)


def store_cookies(session: requests.Session, url: str, head: Head) -> None:
    """Keep the cookies a response sets in the session's jar, as ``requests`` would."""
    if "set-cookie" not in head.headers:
        return
    raw_lines = head.raw.split(b"\n", 1)[1] if b"\n" in head.raw else b""
    message = http.client.parse_headers(io.BytesIO(raw_lines))
    probe = requests.PreparedRequest()
    probe.url, probe.headers = url, CaseInsensitiveDict()
    # what extract_cookies_to_jar reads of a urllib3 response: its http.client response's headers
    extract_cookies_to_jar(session.cookies, probe, SimpleNamespace(_original_response=SimpleNamespace(msg=message)))
