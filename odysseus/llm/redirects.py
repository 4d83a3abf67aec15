"""Between two responses: redirects followed, and the cookies a provider sets kept (as ``requests`` did).

A provider URL that answers a redirect (301, 302, 303, 307, 308 with a ``Location``) is followed
up to ``MAX_REDIRECTS`` times: 307 and 308 send the same method and body again; 303, 302, and 301
after a POST ask again with GET and no body (what browsers and ``requests`` do). The provider's
credentials (``Authorization``, ``x-api-key``, ``api-key``) go only where the redirect keeps the
origin (or upgrades http to https on the default ports): another host never sees the key.

``Cookies`` is a standard ``http.cookiejar`` jar per transport: a load balancer's sticky-session
cookie set by one response is sent with the next request it applies to.
"""

from __future__ import annotations

import http.client
import http.cookiejar
import io
import urllib.request
from typing import Optional, Tuple
from urllib.parse import urljoin, urlsplit

from .response_head import Head, Headers

REDIRECTS = (301, 302, 303, 307, 308)
#: redirects followed for one request before it fails (requests' limit)
MAX_REDIRECTS = 30
_DEFAULT_PORTS = {"http": 80, "https": 443}


def is_redirect(status: int, headers: Headers) -> bool:
    """True for a redirect status that says where to go."""
    return status in REDIRECTS and "location" in headers


def next_request(status: int, method: str, url: str, location: str) -> Tuple[str, str, bool]:
    """The request a redirect asks for: (method, absolute URL, whether the body is sent again)."""
    new_url = urljoin(url, location.strip())
    if status in (302, 303) and method != "HEAD":
        method = "GET"
    elif status == 301 and method == "POST":
        method = "GET"
    return method, new_url, status in (307, 308)


def keeps_credentials(old_url: str, new_url: str) -> bool:
    """True when a redirect from ``old_url`` to ``new_url`` may carry the provider's credentials."""
    old, new = urlsplit(old_url), urlsplit(new_url)
    if old.hostname != new.hostname:
        return False
    if old.scheme == "http" and old.port in (80, None) and new.scheme == "https" and new.port in (443, None):
        return True  # an upgrade to https on the same host
    default = (_DEFAULT_PORTS.get(old.scheme), None)
    if old.scheme == new.scheme and old.port in default and new.port in default:
        return True
    return old.scheme == new.scheme and old.port == new.port


class _Response:
    """What ``CookieJar.extract_cookies`` reads of a response: its headers as a message."""

    def __init__(self, head: Head):
        raw = head.raw.split(b"\n", 1)[1] if b"\n" in head.raw else b""
        self._message = http.client.parse_headers(io.BytesIO(raw))

    def info(self) -> http.client.HTTPMessage:
        """The response's headers (``Set-Cookie`` lines kept apart, as the jar needs them)."""
        return self._message


class Cookies:
    """The cookies providers set, sent back where they apply (``http.cookiejar`` rules)."""

    def __init__(self) -> None:
        self.jar = http.cookiejar.CookieJar()

    def header(self, url: str) -> Optional[str]:
        """The ``Cookie`` header for a request to ``url``; None when the jar has none (the common case)."""
        if not len(self.jar):
            return None
        request = urllib.request.Request(url)
        self.jar.add_cookie_header(request)
        return request.get_header("Cookie")

    def store(self, url: str, head: Head) -> None:
        """Keep the cookies a response to ``url`` sets."""
        if "set-cookie" not in head.headers and "set-cookie2" not in head.headers:
            return
        self.jar.extract_cookies(_Response(head), urllib.request.Request(url))  # type: ignore[arg-type]
