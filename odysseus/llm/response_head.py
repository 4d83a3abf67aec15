"""A response's head (status line and headers): read from a socket up to the body, and parsed.

``read_head`` reads until a final head is complete (interim 1xx responses skipped); ``parse_head``
turns its bytes into a ``Head`` with the leniency of ``http.client`` (a bare LF ends a line, folded
lines continue the previous value, a line that is no header is ignored) and urllib3's joining of
repeated headers.
"""

from __future__ import annotations

import http.client
import re
import time
from typing import Any, Optional, Tuple

from ..errors import ProviderTimeout

#: the longest response head accepted (status line and headers), as http.client's limits allow
MAX_HEAD = 65536
#: the most bytes one read asks for (the body reads too)
READ_SIZE = 65536
_LINE_END = re.compile(r"\r?\n")


class Headers(dict):
    """Response headers by lower-case name (repeated headers joined with ``", "``, as urllib3 does)."""

    def get(self, name: str, default: Any = None) -> Any:
        """The header ``name`` (any case), else ``default``."""
        return dict.get(self, name.lower(), default)

    def __getitem__(self, name: str) -> str:
        return dict.__getitem__(self, name.lower())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and dict.__contains__(self, name.lower())


class Head:
    """A parsed response head: status, reason, headers, the HTTP version (10 or 11) and its raw bytes."""

    __slots__ = ("status", "reason", "headers", "version", "raw")

    def __init__(self, status: int, reason: str, headers: Headers, version: int, raw: bytes):
        self.status, self.reason, self.headers, self.version, self.raw = status, reason, headers, version, raw


def head_end(buf: bytes) -> int:
    """Where the body starts: just past the first blank line (CRLF or a lenient bare LF), or -1."""
    ends = [i + 4 for i in (buf.find(b"\r\n\r\n"),) if i >= 0] + [i + 2 for i in (buf.find(b"\n\n"),) if i >= 0]
    return min(ends) if ends else -1


def parse_head(raw: bytes) -> Head:
    """The status line and headers of ``raw`` (a whole head); BadStatusLine when it is not HTTP/1.x."""
    lines = _LINE_END.split(raw.decode("iso-8859-1"))
    status_line = lines[0]
    version, _, rest = status_line.partition(" ")
    code, _, reason = rest.strip().partition(" ")
    if version not in ("HTTP/1.1", "HTTP/1.0") or len(code) != 3 or not code.isdigit() or int(code) < 100:
        raise http.client.BadStatusLine(status_line[:200])
    headers = Headers()
    last: Optional[str] = None
    for line in lines[1:]:
        if not line:
            continue
        if line[0] in " \t" and last is not None:  # obsolete line folding: part of the previous value
            dict.__setitem__(headers, last, dict.__getitem__(headers, last) + " " + line.strip())
            continue
        name, sep, value = line.partition(":")
        if not sep:
            continue  # as http.client: a line that is no header is ignored
        last = name.strip().lower()
        value = value.strip()
        old = dict.get(headers, last)
        dict.__setitem__(headers, last, value if old is None else old + ", " + value)
    return Head(int(code), reason.strip(), headers, 11 if version == "HTTP/1.1" else 10, raw)


class NothingBack(Exception):
    """The connection ended before the first byte of a response (a stale pooled socket, or a dead server)."""

    def __init__(self, error: BaseException):
        super().__init__(str(error))
        self.error = error


def read_head(sock: Any, deadline: float) -> Tuple[Head, bytes]:
    """Read until a final (non-1xx) response head is complete: (head, the bytes after it).

    ``NothingBack`` when the connection ended or was reset before any byte; ``ProviderTimeout`` at
    ``deadline`` (``time.monotonic``).
    """
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
                    raise NothingBack(exc) from None
                raise
            if not data:
                if not buf:
                    raise NothingBack(http.client.RemoteDisconnected("Remote end closed connection without response"))
                raise http.client.IncompleteRead(buf)
            buf += data
            continue
        head = parse_head(buf[:end])
        buf = buf[end:]
        if 100 <= head.status < 200 and head.status != 101:
            continue  # an interim response (100 Continue, 103 Early Hints): the real one follows
        return head, buf
