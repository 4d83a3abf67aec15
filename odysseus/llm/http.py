"""THE HTTP path to providers: a transport per provider, its streaming POST, small JSON fetches, cancel.

One client carries every provider request (issue 39): our own HTTP/1.1 over pooled keep-alive
sockets (``direct_post``), with proxies from the environment (``proxy_env``: forwarding for
http, a ``CONNECT`` tunnel for https, ``NO_PROXY``), TLS against certifi's bundle or the
configured CA bundle (``connect``), redirects and cookies (``redirects``), and the body read
straight from the socket (``body_stream``). The public surface is ``Transport`` (``open``,
``get_json``, ``fetch_json``, ``close``), ``Timeouts``, ``ProviderStream``, ``shutdown_socket``
and ``parse_json``.

Invariants:

- Lower-level failures (``socket``, ``ssl``, ``http.client``'s exceptions, bad JSON) become our
  ``ProviderError`` subclasses in ONE place, ``http_errors.provider_errors``; when the run was
  cancelled they become ``Cancelled`` instead, so a stop is never reported as a failure.
- Reads are timed per read: until the adapter reports its first output the socket timeout is
  what is left of the first-token deadline (counted from sending the request); afterwards it is
  the idle timeout between chunks.
- Every socket a request uses is registered with the run's ``CancelToken`` before it can block
  (connecting, the proxy tunnel, TLS, waiting for the head), so a stop shuts it down at once.
  ``shutdown`` (not ``close``) wakes a blocked reader under gevent and with plain threads alike,
  and the server sees the disconnect.
- A ``Transport``'s headers are fixed when it is made (a provider whose settings change gets a
  new adapter and transport), so each (method, URL)'s encoded head is made once and kept.
"""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from ..cancel import Cancelled, CancelToken
from ..errors import ProviderHTTPError, ProviderNetworkError, ProviderProtocolError
from .base import ProviderConfig
from .body_stream import ProviderStream, close_quietly
from .connect import ProxyRefused, Route, tls_context
from .direct_post import Destination, DirectTarget, InvalidRequest, SocketPool
from .http_errors import SECRET_HEADERS, error_message, provider_errors, redact, retry_after
from .proxy_env import NetworkEnv, UnsupportedProxy
from .redirects import MAX_REDIRECTS, Cookies, is_redirect, keeps_credentials, next_request
from .text_repair import repair_value

__all__ = ["ProviderStream", "Timeouts", "Transport", "parse_json", "shutdown_socket"]

POOL_SIZE = 64  # connections kept per provider host: 100 paced streams reuse most of theirs (10 discarded 90 per burst)
ERROR_BODY_LIMIT = 64 * 1024
JSON_BODY_LIMIT = 32 * 1024 * 1024  # a model listing is large (hundreds of models), never this large
#: distinct (method, URL) heads one transport keeps (a provider uses two or three)
TARGET_LIMIT = 16
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


def shutdown_socket(sock: Any) -> None:
    """Shut a socket down both ways (wakes a blocked reader; the peer sees EOF)."""
    if sock is None:
        return
    with contextlib.suppress(OSError, AttributeError, ValueError):
        # Bypass SSLSocket.shutdown, which drops its SSL object under a concurrent reader.
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


def encode_json(body: Any) -> bytes:
    """A request body as JSON bytes (ASCII-escaped, no NaN: what every provider parses)."""
    return json.dumps(body, allow_nan=False).encode("ascii")


class Transport:
    """A provider's HTTP client: its headers, timeouts, pool, proxy and TLS settings, cookies."""

    def __init__(self, provider: str, timeouts: Timeouts, headers: Optional[dict] = None):
        self.provider = provider
        self.timeouts = timeouts
        self.headers = dict(headers or {})
        #: [issue 22] the proxy and CA-bundle environment, read once here (never per request)
        self.network = NetworkEnv()
        self.cookies = Cookies()
        self._pool = SocketPool(POOL_SIZE)
        self._targets: Dict[Tuple[str, str], DirectTarget] = {}
        self._tls: Optional[ssl.SSLContext] = None

    def close(self) -> None:
        """Close every idle connection."""
        self._pool.close()

    def _target(self, method: str, url: str, credentials: bool = True) -> DirectTarget:
        """The (cached) target of ``method url``; without ``credentials`` one without the secret headers."""
        key = (method, url)
        target = self._targets.get(key) if credentials else None
        if target is not None:
            return target
        try:
            target = self._new_target(method, url, credentials)
        except InvalidRequest as exc:
            message = f"Invalid {exc.kind} for provider {self.provider}: {exc}"
            raise ProviderNetworkError(message, provider=self.provider) from None
        except UnsupportedProxy as exc:
            raise ProviderNetworkError(
                f"Proxy error for provider {self.provider}: {exc}", provider=self.provider
            ) from None
        if credentials and len(self._targets) < TARGET_LIMIT:
            self._targets[key] = target
        return target

    def _new_target(self, method: str, url: str, credentials: bool) -> DirectTarget:
        destination = Destination(url)
        proxy = self.network.proxy_for(url)
        context = None
        if destination.scheme == "https":
            if self._tls is None:
                self._tls = tls_context(self.network.ca_bundle)
            context = self._tls
        route = Route(destination.scheme, destination.host, destination.port, proxy, context)
        headers = [(n, v) for n, v in self.headers.items() if credentials or n.lower() not in SECRET_HEADERS]
        return DirectTarget(method, destination, headers, route, self._pool)

    def open(self, url: str, body: dict, cancel: CancelToken) -> ProviderStream:
        """POST ``body`` as JSON and return the open stream; raise ProviderHTTPError on an error status."""
        cancel.raise_if_cancelled()
        with provider_errors(self.provider, cancel):
            data = encode_json(body)
        return self._request("POST", url, data, cancel, self.timeouts)

    def _request(
        self, method: str, url: str, data: Optional[bytes], cancel: CancelToken, timeouts: Timeouts
    ) -> ProviderStream:
        """Send one request, follow its redirects; the open stream of the final answer (2xx or 3xx without Location)."""
        history: List[int] = []
        credentials = True
        while True:
            with provider_errors(self.provider, cancel):
                target = self._target(method, url, credentials)
            stream = self._send(target, data, cancel, timeouts)
            status = stream.status_code
            if is_redirect(status, stream.headers):
                try:
                    if len(history) >= MAX_REDIRECTS:
                        raise ProviderNetworkError(
                            f"Too many redirects from provider {self.provider} (more than {MAX_REDIRECTS})",
                            provider=self.provider,
                        )
                    self._bounded_body(stream)
                    stream.finish()
                finally:
                    stream.close()
                history.append(status)
                method, new_url, keep_body = next_request(status, method, url, stream.headers["location"])
                credentials = credentials and keeps_credentials(url, new_url)
                url, data = new_url, (data if keep_body else None)
                continue
            stream.history = history
            if status >= 400:
                try:
                    with provider_errors(self.provider, cancel):
                        raise self.http_error(status, stream.reason, stream.headers, stream)
                finally:
                    stream.close()
            return stream

    def _send(
        self, target: DirectTarget, data: Optional[bytes], cancel: CancelToken, timeouts: Timeouts
    ) -> ProviderStream:
        """One request on a pooled (or new) socket registered with ``cancel``: its open response."""
        cancel.raise_if_cancelled()
        box: List[Any] = [None]

        def on_socket(sock: Any) -> None:
            box[0] = sock
            if cancel.cancelled:  # stopped while connecting: nothing was there to shut down
                shutdown_socket(sock)

        unregister = cancel.on_cancel(lambda: shutdown_socket(box[0]))
        sent_at = time.monotonic()
        stream: Optional[ProviderStream] = None
        sock: Any = None
        try:
            with provider_errors(self.provider, cancel):
                request = target.request_bytes(data, self.cookies.header(target.url))
                deadline = sent_at + timeouts.first_token
                try:
                    sock, head, rest = target.exchange(request, timeouts, deadline, on_socket, cancel)
                except ProxyRefused as exc:
                    raise ProviderNetworkError(
                        f"Proxy error for provider {self.provider}: {exc}", provider=self.provider
                    ) from exc
                stream = ProviderStream(sock, head, rest, timeouts, sent_at, target.release, unregister)
                self.cookies.store(target.url, head)
                if cancel.cancelled:
                    raise Cancelled(cancel.reason or "stopped")
                return stream
        except BaseException:
            if stream is not None:
                stream.close()
            else:
                unregister()
                if sock is not None:
                    close_quietly(sock)  # a head the stream could not take (a bad length or encoding)
            raise

    def fetch_json(self, url: str, body: Optional[dict] = None, timeout: Optional[float] = None) -> Any:
        """GET ``url`` (POST ``body`` when given) and return its JSON document; errors mapped.

        For small documents (model listings, a model's details): ``timeout`` bounds the connect
        (at most the transport's) and each read; the body may be at most ``JSON_BODY_LIMIT`` bytes.
        """
        wait = timeout or self.timeouts.idle
        timeouts = Timeouts(min(self.timeouts.connect, wait), wait, wait)
        cancel = CancelToken()
        data = None
        if body is not None:
            with provider_errors(self.provider):
                data = encode_json(body)
        stream = self._request("POST" if body is not None else "GET", url, data, cancel, timeouts)
        try:
            with provider_errors(self.provider):
                stream.mark_output()  # from here each read waits at most ``wait``
                pieces, size = [], 0
                for piece in stream.chunks():
                    size += len(piece)
                    if size > JSON_BODY_LIMIT:
                        raise ProviderProtocolError(
                            f"Response from provider {self.provider} is larger than {JSON_BODY_LIMIT >> 20} MB",
                            provider=self.provider,
                        )
                    pieces.append(piece)
                stream.finish()
                return repair_value(json.loads(b"".join(pieces)))
        finally:
            stream.close()

    def get_json(self, url: str, timeout: Optional[float] = None) -> Any:
        """GET a small JSON document (model listings), errors mapped."""
        return self.fetch_json(url, None, timeout)

    def redact(self, text: str) -> str:
        """``text`` without the credentials this transport sends (a server may echo a key it refused).

        Error paths only (providers: issue 20): the message reaches error events, logs and the admin screen.
        """
        for name, value in self.headers.items():
            if name.lower() in SECRET_HEADERS and isinstance(value, str) and value:
                text = redact(text, value.split(" ", 1)[1] if value.lower().startswith("bearer ") else value)
        return text

    @staticmethod
    def _bounded_body(stream: ProviderStream) -> bytes:
        """At most about ``ERROR_BODY_LIMIT`` bytes of a response body (an error's or a redirect's)."""
        body = b""
        with contextlib.suppress(Exception):
            for chunk in stream.chunks():
                body += chunk
                if len(body) > ERROR_BODY_LIMIT:
                    break
        return body

    def http_error(self, status: int, reason: Optional[str], headers: Any, stream: ProviderStream) -> ProviderHTTPError:
        """The provider's error status, message and Retry-After as a ProviderHTTPError."""
        body = self._bounded_body(stream)
        detail = self.redact(error_message(body) if body else (reason or ""))
        return ProviderHTTPError(
            f"Provider {self.provider} returned HTTP {status}: {detail}",
            status=status,
            retry_after=retry_after(headers),
            provider=self.provider,
        )


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
