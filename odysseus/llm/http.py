"""The HTTP layer every adapter shares: the streaming POST, timed streaming reads, cancel.

``Transport.open`` sends a provider's streaming POST on a plain pooled socket
(``direct_post``) when nothing of ``requests`` applies to the URL (no proxy, no client
certificate, no auth or hooks), and through ``requests`` otherwise; both give a stream with
the same API (``ProviderStream``) and both follow the invariants below.

Invariants:

- Lower-level failures (``requests``, ``urllib3``, ``socket``, bad JSON) become our
  ``ProviderError`` subclasses in ONE place, ``http_errors.provider_errors``; when the run was
  cancelled they become ``Cancelled`` instead, so a stop is never reported as a failure.
- Reads are timed per read: until the adapter reports its first output the socket
  timeout is what is left of the first-token deadline (counted from sending the
  request); afterwards it is the idle timeout between chunks.
- The connection a request uses is registered with the run's ``CancelToken`` as soon
  as the pool hands it out, so a stop shuts the socket down even while we are still
  waiting for response headers. ``shutdown`` (not ``close``) wakes a blocked reader
  under gevent and with plain threads alike, and the server sees the disconnect.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple, Union

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from ..cancel import Cancelled, CancelToken
from ..errors import (
    ProviderHTTPError,
    ProviderProtocolError,
)
from .base import ProviderConfig
from .direct_post import (
    DRAIN_SECONDS,
    READ_SIZE,
    REDIRECTS,
    DirectStream,
    DirectTarget,
    SocketPool,
    TimedReads,
    cookie_header,
    store_cookies,
)
from .env_session import EnvOnceSession
from .http_errors import SECRET_HEADERS, error_message, provider_errors, redact, retry_after
from .prepared_post import PLAN_LIMIT, PostPlan, plan_for
from .stream_reader import ChunkedDecoder, dechunked
from .text_repair import repair_value

POOL_SIZE = 64  # connections kept per provider host: 100 paced streams reuse most of theirs (10 discarded 90 per burst)
ERROR_BODY_LIMIT = 64 * 1024
_raw_decode = json.JSONDecoder().raw_decode


@dataclass(frozen=True)
class Timeouts:
    """Seconds: to connect, from request to first output, and between chunks after that."""

    connect: float = 10.0
    first_token: float = 120.0
    idle: float = 60.0

    @classmethod
    def of(cls, cfg: ProviderConfig, app_config: dict) -> "Timeouts":
        """App-wide CONNECT/FIRST_TOKEN/IDLE_TIMEOUT, overridden by the provider's options."""

        def pick(option: str, key: str, default: float) -> float:
            return float(cfg.options.get(option, app_config.get(key, default)))

        return cls(
            pick("connect_timeout", "CONNECT_TIMEOUT", 10.0),
            pick("first_token_timeout", "FIRST_TOKEN_TIMEOUT", 120.0),
            pick("idle_timeout", "IDLE_TIMEOUT", 60.0),
        )


# ---------------------------------------------------------------- connections and cancel

_local = threading.local()  # greenlet-local under gevent's monkey patch


def _register_connection(conn: Any) -> None:
    sink = getattr(_local, "sink", None)
    conn.odysseus_cancel = None  # a pooled connection must not keep an earlier request's token
    if sink is not None:
        sink(conn)


class _CancelAfterConnect:
    """A stop that came while connecting finds no socket to shut; connect() checks afterwards."""

    def connect(self):
        super().connect()
        token = getattr(self, "odysseus_cancel", None)
        if token is not None and token.cancelled:
            shutdown_socket(self.sock)


class _TrackedHTTPConnection(_CancelAfterConnect, HTTPConnection):
    pass


class _TrackedHTTPSConnection(_CancelAfterConnect, HTTPSConnection):
    pass


class _ReportsConnections:
    """A pool that reports each connection it hands out to the current request."""

    def _get_conn(self, timeout=None):
        conn = super()._get_conn(timeout)
        _register_connection(conn)
        return conn


class _TrackedHTTPPool(_ReportsConnections, HTTPConnectionPool):
    ConnectionCls = _TrackedHTTPConnection


class _TrackedHTTPSPool(_ReportsConnections, HTTPSConnectionPool):
    ConnectionCls = _TrackedHTTPSConnection


class _TrackedAdapter(HTTPAdapter):
    """An adapter whose pools report each connection they hand out to the current request."""

    def init_poolmanager(self, *args, **kwargs):
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _TrackedHTTPPool, "https": _TrackedHTTPSPool}

    def proxy_manager_for(self, *args, **kwargs):
        manager = super().proxy_manager_for(*args, **kwargs)
        manager.pool_classes_by_scheme = {"http": _TrackedHTTPPool, "https": _TrackedHTTPSPool}
        return manager


def shutdown_socket(sock: Any) -> None:
    """Shut a socket down both ways (wakes a blocked reader; the peer sees EOF)."""
    if sock is None:
        return
    with contextlib.suppress(OSError, AttributeError, ValueError):
        # Bypass SSLSocket.shutdown, which drops its SSL object under a concurrent reader.
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


def socket_of(response: requests.Response, conn: Any) -> Any:
    """The socket a response reads from.

    http.client drops ``conn.sock`` once the response says ``Connection: close``; the
    response still reads through its own file object, so look there first.
    """
    fp = getattr(getattr(response.raw, "_fp", None), "fp", None)
    sock = getattr(getattr(fp, "raw", None), "_sock", None)
    return sock if sock is not None else getattr(conn, "sock", None)


def new_session() -> requests.Session:
    """A requests session whose connections can be shut down by a CancelToken.

    [perfstart, issue 22] The proxy environment is read once here, not on every request
    (``env_session.EnvOnceSession``: ``trust_env`` off, proxies and ``NO_PROXY`` from a snapshot).
    """
    session = EnvOnceSession()
    adapter = _TrackedAdapter(max_retries=0, pool_maxsize=POOL_SIZE)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


class StreamResponse(TimedReads):
    """An open streaming response read through ``requests``: timed raw chunks, output marking, prompt close."""

    def __init__(
        self, response: requests.Response, sock: Any, timeouts: Timeouts, sent_at: float, unregister: Callable[[], None]
    ):
        super().__init__(timeouts, sent_at, unregister)
        self.response = response
        self.sock = sock
        self._decoder: Optional[ChunkedDecoder] = None  # set when chunks() decodes the body itself

    def _arm(self) -> None:
        if self.sock is not None:
            self.sock.settimeout(self.read_timeout())

    def _chunked_source(self) -> Optional[Any]:
        """The buffered socket file of a chunked, uncompressed body nothing has read yet; else None.

        Such a body is read in large raw reads and decoded here (``stream_reader.ChunkedDecoder``)
        instead of one ``http.client`` ``read1`` call per HTTP chunk (a provider sends one per
        event). Anything else (a ``Content-Length`` or close-delimited body, gzip, an older
        urllib3) takes the library path.
        """
        inner = getattr(self.response.raw, "_fp", None)
        if not isinstance(inner, http.client.HTTPResponse) or not inner.chunked or inner.chunk_left is not None:
            return None
        if (self.response.headers.get("Content-Encoding") or "identity").strip().lower() != "identity":
            return None
        fp = inner.fp
        return fp if fp is not None and hasattr(fp, "read1") else None

    def chunks(self) -> Iterator[bytes]:
        """Raw body bytes as they arrive (chunked or close-delimited alike)."""
        raw = self.response.raw
        fp = self._chunked_source() if self._decoder is None else None
        if fp is not None:
            yield from self._decoded(fp)
            return
        if not hasattr(raw, "read1"):  # urllib3 < 2
            self._arm()
            yield from self.response.iter_content(chunk_size=None)
            return
        while True:
            self._arm()
            data = raw.read1(READ_SIZE)
            if not data:
                return
            yield data

    def _decoded(self, fp: Any) -> Iterator[bytes]:
        """The chunked body from big reads of the socket file, until its last chunk."""
        self._decoder = ChunkedDecoder()

        def read() -> bytes:
            self._arm()
            return fp.read1(READ_SIZE)

        yield from dechunked(self._decoder, read)
        self._body_read()

    def _body_read(self) -> None:
        """The whole chunked body was decoded here: close http.client's side as it would at the end."""
        inner: Any = self.response.raw._fp  # http.client's response (checked in _chunked_source)
        with contextlib.suppress(Exception):
            inner.chunk_left = 0
            inner._close_conn()  # drops its file object; the socket stays with the pooled connection
        self.reusable = True

    def finish(self) -> None:
        """The reply ended normally: read to the end of the body (briefly) so the connection can be reused.

        Reusing the provider connection saves a TCP (and TLS) handshake on the next turn. A
        body that does not end within ``DRAIN_SECONDS`` is simply closed.
        """
        raw = self.response.raw
        if self._decoder is not None:
            self._drain_decoded()
            return
        if self.sock is None or not hasattr(raw, "read1"):
            return
        deadline = time.monotonic() + DRAIN_SECONDS
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return
                self.sock.settimeout(remaining)
                if not raw.read1(READ_SIZE):
                    break
        except Exception:  # noqa: BLE001 - any trouble here only means "do not reuse"
            return
        self.reusable = True

    def _drain_decoded(self) -> None:
        decoder = self._decoder
        if decoder is None or self.reusable:
            return
        if decoder.done:  # the last chunk came in the read that carried the end marker
            self._body_read()
            return
        if self.sock is None:
            return
        inner: Any = self.response.raw._fp
        fp = inner.fp
        deadline = time.monotonic() + DRAIN_SECONDS
        try:
            while not decoder.done:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or fp is None:
                    return
                self.sock.settimeout(remaining)
                data = fp.read1(READ_SIZE)
                if not data:
                    return  # closed by the server: not reusable
                decoder.feed(data)
        except Exception:  # noqa: BLE001 - any trouble here only means "do not reuse"
            return
        self._body_read()

    def close(self) -> None:
        """Forget the cancel callback; return a fully read connection to the pool, else close it."""
        self._unregister()
        with contextlib.suppress(Exception):
            if self.reusable:
                self.response.raw.release_conn()
            else:
                self.response.close()


#: what ``Transport.open`` returns: a direct stream (llm/direct_post.py) or one read through ``requests``
ProviderStream = Union[StreamResponse, DirectStream]


class Transport:
    """A provider's HTTP client: one session, timeouts, and the streaming request."""

    def __init__(self, provider: str, timeouts: Timeouts, headers: Optional[dict] = None):
        self.provider = provider
        self.timeouts = timeouts
        self.headers = dict(headers or {})
        self.session = new_session()
        #: [startpath, issue 22] per URL, the POST's unchanging parts prepared once (llm/prepared_post.py)
        self._plans: Dict[str, PostPlan] = {}
        #: [issue 22] per URL, its direct POST (llm/direct_post.py), or None where requests must send it
        self._direct: Dict[str, Optional[DirectTarget]] = {}
        self._pool = SocketPool(POOL_SIZE)

    def close(self) -> None:
        """Close every idle connection (the session's and the direct pool's)."""
        self._pool.close()
        self.session.close()

    def _direct_target(self, url: str) -> Optional[DirectTarget]:
        if url in self._direct:
            return self._direct[url]
        plan = plan_for(self._plans, self.session, url, self.headers)
        target = None
        if plan is not None and plan.direct:
            target = DirectTarget(plan, self._pool)
        if len(self._direct) < PLAN_LIMIT:
            self._direct[url] = target
        return target

    def open(self, url: str, body: dict, cancel: CancelToken, headers: Optional[dict] = None) -> ProviderStream:
        """POST ``body`` as JSON and return the open stream; raise ProviderHTTPError on an error status."""
        redirected = None
        if headers is None:
            with provider_errors(self.provider, cancel):  # a URL or header requests refuses is the provider's error
                target = self._direct_target(url)
            if target is not None:
                direct = self._open_direct(target, body, cancel)
                if isinstance(direct, DirectStream):
                    return direct
                redirected = direct  # a redirect: requests follows it (and the stream it leads to is read there)
        holder: dict = {}
        unregister_box = [lambda: None]

        def sink(conn: Any) -> None:
            holder["conn"] = conn
            holder["reused"] = getattr(conn, "sock", None) is not None  # a pooled, already open connection
            if conn is not None:
                conn.odysseus_cancel = cancel
            unregister_box[0] = cancel.on_cancel(
                lambda: shutdown_socket(holder.get("sock") or getattr(conn, "sock", None))
            )

        cancel.raise_if_cancelled()
        sent_at = time.monotonic()
        _local.sink = sink
        try:
            with provider_errors(self.provider, cancel):
                for attempt in range(POOL_SIZE + 1):
                    try:
                        response = self._post(url, body, headers, redirected)
                        break
                    except requests.ConnectionError:
                        # A pooled connection the server closed while idle fails before any response
                        # byte: the request never reached the model. Drop it and try the next one; each
                        # failure discards one stale connection, so a fresh one comes at the latest
                        # once the pool is empty. A failure on a fresh connection is the provider's.
                        if not holder.get("reused") or cancel.cancelled or attempt == POOL_SIZE:
                            raise
                        unregister_box[0]()
                        holder.clear()
        except BaseException:
            unregister_box[0]()
            raise
        finally:
            _local.sink = None
        if cancel.cancelled:  # stopped while connecting, before the socket could be shut down
            with contextlib.suppress(Exception):
                response.close()
            unregister_box[0]()
            raise Cancelled(cancel.reason or "stopped")
        if "conn" not in holder:  # a connection the pool did not report: register it now
            sink(getattr(response.raw, "connection", None))
        holder["sock"] = socket_of(response, holder["conn"])
        stream = StreamResponse(response, holder["sock"], self.timeouts, sent_at, lambda: unregister_box[0]())
        if response.status_code >= 400:
            try:
                with provider_errors(self.provider, cancel):
                    raise self.http_error(response.status_code, response.reason, response.headers, stream)
            finally:
                stream.close()
        return stream

    def _open_direct(self, target: DirectTarget, body: dict, cancel: CancelToken) -> Any:
        """The direct POST (llm/direct_post.py): its open stream, or ``(redirect, body)`` for requests to follow."""
        cancel.raise_if_cancelled()
        box: List[Any] = [None]

        def on_socket(sock: Any) -> None:
            box[0] = sock
            if cancel.cancelled:  # stopped while connecting: nothing was there to shut down
                shutdown_socket(sock)

        unregister = cancel.on_cancel(lambda: shutdown_socket(box[0]))
        sent_at = time.monotonic()
        stream: Optional[DirectStream] = None
        sock: Any = None
        try:
            with provider_errors(self.provider, cancel):
                data = target.plan.encode(body)
                request = target.request_bytes(data, cookie_header(self.session, target.url, target.header_items))
                deadline = sent_at + self.timeouts.first_token
                sock, head, rest = target.exchange(request, self.timeouts, deadline, on_socket, cancel)
                stream = DirectStream(sock, head, rest, self.timeouts, sent_at, target, unregister)
                store_cookies(self.session, target.url, head)
                if cancel.cancelled:
                    raise Cancelled(cancel.reason or "stopped")
                if head.status in REDIRECTS and "location" in head.headers:
                    redirect_body = self._bounded_body(stream)
                    stream.finish()
                    stream.close()
                    return stream.as_requests_response(target.url, redirect_body), data
                if head.status >= 400:
                    raise self.http_error(head.status, head.reason, head.headers, stream)
                return stream
        except BaseException:
            if stream is not None:
                stream.close()
            else:
                unregister()
                if sock is not None:
                    sock.close()  # a head the stream could not take (a bad length or encoding)
            raise

    def _post(
        self, url: str, body: dict, headers: Optional[dict], redirected: Optional[Tuple[Any, bytes]] = None
    ) -> requests.Response:
        timeout = (self.timeouts.connect, self.timeouts.first_token)
        plan = plan_for(self._plans, self.session, url, self.headers) if headers is None else None
        if plan is not None and redirected is not None:
            shell, data = redirected
            shell.request = prep = plan.prepare(data)
            return plan.follow(shell, prep, plan.send_settings(timeout))
        if plan is not None:
            return plan.post(body, timeout)
        return self.session.post(
            url,
            json=body,
            headers={**self.headers, **(headers or {})},
            stream=True,
            timeout=timeout,
        )

    def redact(self, text: str) -> str:
        """``text`` without the credentials this transport sends (a server may echo a key it refused).

        Error paths only (providers: issue 20): the message reaches error events, logs and the admin screen.
        """
        for name, value in self.headers.items():
            if name.lower() in SECRET_HEADERS and isinstance(value, str) and value:
                text = redact(text, value.split(" ", 1)[1] if value.lower().startswith("bearer ") else value)
        return text

    @staticmethod
    def _bounded_body(stream: Any) -> bytes:
        """At most about ``ERROR_BODY_LIMIT`` bytes of a response body (an error's or a redirect's)."""
        body = b""
        with contextlib.suppress(Exception):
            for chunk in stream.chunks():
                body += chunk
                if len(body) > ERROR_BODY_LIMIT:
                    break
        return body

    def http_error(self, status: int, reason: Optional[str], headers: Any, stream: Any) -> ProviderHTTPError:
        """The provider's error status, message and Retry-After as a ProviderHTTPError."""
        body = self._bounded_body(stream)
        detail = self.redact(error_message(body) if body else (reason or ""))
        return ProviderHTTPError(
            f"Provider {self.provider} returned HTTP {status}: {detail}",
            status=status,
            retry_after=retry_after(headers),
            provider=self.provider,
        )

    def get_json(self, url: str, timeout: Optional[float] = None) -> Any:
        """GET a small JSON document (model listings), errors mapped."""
        with provider_errors(self.provider):
            response = self.session.get(
                url, headers=self.headers, timeout=(self.timeouts.connect, timeout or self.timeouts.idle)
            )
            if response.status_code >= 400:
                raise ProviderHTTPError(
                    f"Provider {self.provider} returned HTTP {response.status_code}: "
                    f"{self.redact(error_message(response.content))}",
                    status=response.status_code,
                    retry_after=retry_after(response.headers),
                    provider=self.provider,
                )
            return repair_value(response.json())


def parse_json(text: str, provider: str) -> Any:
    """One JSON chunk; a malformed one is a ProviderProtocolError naming the provider."""
    try:
        try:  # the scanner itself: json.loads adds two layers and two whitespace regexes per chunk
            value, end = _raw_decode(text)
        except ValueError:
            return json.loads(text)  # leading whitespace, or malformed: the full parser decides
        return value if end == len(text) else json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: nested thousands deep
        shown = text if len(text) <= 200 else text[:197] + "..."
        raise ProviderProtocolError(f"Malformed chunk from provider {provider}: {shown!r}", provider=provider) from None
