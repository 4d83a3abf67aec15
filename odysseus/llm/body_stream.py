"""An open provider response: its body read straight from the socket, timed, decoded, then pooled or closed.

The body (chunked, ``Content-Length`` or until the server closes; gzip and deflate) comes from
``recv`` in reads of up to ``READ_SIZE`` bytes: no buffered file layers. Under gevent, after a short
read the socket is most likely drained, so the reader parks until it is readable instead of calling
``recv`` for an EAGAIN first, and every wait of the idle phase rearms one libev timer kept for the
stream (``_wait_readable``).

Invariants:

- reads are timed per read: until the adapter reports its first output (``mark_output``) the timeout
  is what is left of the first-token deadline (counted from sending the request), afterwards the idle
  timeout between chunks;
- a socket goes back to the pool only after its response body was read to its end and the response
  did not ask to close (``reusable``); anything else is closed.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import time
import zlib
from typing import Any, Callable, Iterator, List, Optional

from gevent import get_hub, getcurrent
from gevent import socket as green_socket

from ..errors import ProviderTimeout
from .response_head import READ_SIZE, Head
from .stream_reader import ChunkedDecoder, dechunked

#: after the protocol's end marker, how long to wait for the body's end (then the socket is closed)
DRAIN_SECONDS = 0.25
_NO_BODY = (204, 304)


def close_quietly(sock: Any) -> None:
    """Close ``sock``, whatever state it is in."""
    try:
        sock.close()
    except OSError:
        pass


def _decompressor(encoding: str) -> Optional[Any]:
    """A streaming decoder for a Content-Encoding we ask for (gzip, deflate), None for identity."""
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


class ProviderStream:
    """An open response: status, reason, headers, then timed raw body chunks (decompressed), reuse, close."""

    def __init__(
        self,
        sock: Any,
        head: Head,
        rest: bytes,
        timeouts: Any,
        sent_at: float,
        release: Callable[[Any], None],
        unregister: Callable[[], None],
    ):
        self.timeouts = timeouts
        self.first_token_deadline = sent_at + timeouts.first_token
        self.output_started = False
        self.reusable = False  # read to its end, and the server keeps the connection: back to the pool
        self._unregister = unregister  # forgets the run's cancel callback for this socket
        self.sock = sock
        self.status_code = head.status
        self.reason = head.reason
        self.headers = head.headers
        self._release = release  # gives a fully read socket back to its pool
        #: the redirect statuses that led here (``Transport`` fills it in), oldest first
        self.history: List[int] = []
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
        waitable = isinstance(sock, green_socket.socket) and not isinstance(sock, ssl.SSLSocket)
        self._hub: Any = get_hub() if waitable else None  # None: recv does its own waiting
        self._readable: Any = None  # this stream's libev read watcher on the socket (made on first use)
        self._idle_timer: Any = None  # the libev timer every idle-phase wait rearms (made on first use)
        self._drained = False
        self._drain_until: Optional[float] = None  # set by finish: reads are bounded by the drain time

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
        takes a timer per wait. A stop shuts the socket down, which makes it readable: the wait ends
        and ``recv`` sees the end of the stream.
        """
        hub = self._hub
        if self._readable is None:
            self._readable = hub.loop.io(self.sock.fileno(), 1)  # 1: readable (libev's EV_READ)
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
            hub.wait(self._readable)
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
        if self._readable is not None:  # before the socket: libev must not watch a closed descriptor
            self._readable.close()
            self._readable = None
        sock, self.sock = self.sock, None
        if sock is None:
            return
        if self.reusable:
            self._release(sock)
        else:
            close_quietly(sock)


def _throw_read_timeout(reader: Any) -> None:
    """A read timer's expiry (run by the hub): the waiting greenlet gets what a timed-out recv raises."""
    reader.throw(socket.timeout("timed out"))
