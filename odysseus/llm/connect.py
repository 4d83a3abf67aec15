"""New connections to a provider: straight to it, or through an HTTP proxy (forwarding or a CONNECT tunnel).

``Route`` is where one provider URL's connections go, decided once per URL: the origin, the
proxy (``proxy_env.NetworkEnv``) and how it is used, the pool key its idle sockets are kept
under, and the TLS context. ``Route.connect`` opens one connection: TCP (``TCP_NODELAY``; an IP
literal without a lookup, under gevent a lookup is a trip to a thread), then for an ``https``
provider behind a proxy the ``CONNECT`` exchange, then TLS with the provider's name checked.

Invariant: the caller's ``on_socket`` sees every socket before it can block (before the connect,
after it, after the tunnel and after TLS), so a stop shuts down whatever is in flight.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import ssl
import time
from typing import Any, Callable, List, Optional, Tuple

from ..errors import ProviderTimeout
from .proxy_env import Proxy
from .response_head import NothingBack, read_head

DEFAULT_PORTS = {"http": 80, "https": 443}


class ProxyRefused(OSError):
    """The proxy answered ``CONNECT`` with something other than 2xx (its status is in the message)."""


def tls_context(ca_bundle: Optional[str]) -> ssl.SSLContext:
    """A client context verifying against ``ca_bundle`` (a file or a directory), else certifi's bundle."""
    if ca_bundle is None:
        import certifi  # the bundle requests used: the same providers are trusted as before

        ca_bundle = certifi.where()
    if os.path.isdir(ca_bundle):
        context = ssl.create_default_context(capath=ca_bundle)
    else:
        context = ssl.create_default_context(cafile=ca_bundle)
    context.set_alpn_protocols(["http/1.1"])
    return context


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


def host_header(host: str, port: int, scheme: str) -> str:
    """``host[:port]`` as the ``Host`` header writes it (the port only when not the default); IPv6 in brackets."""
    shown = f"[{host}]" if ":" in host else host
    return shown if port == DEFAULT_PORTS[scheme] else f"{shown}:{port}"


class Route:
    """Where one origin's connections go: straight, forwarded by a proxy (``http``) or tunnelled (``https``)."""

    def __init__(self, scheme: str, host: str, port: int, proxy: Optional[Proxy], context: Optional[ssl.SSLContext]):
        self.scheme = scheme
        self.host = host
        self.port = port
        self.proxy = proxy
        self.context = context  # set for https
        #: an http request through a proxy names the absolute URL and carries the proxy's credentials
        self.forward = proxy is not None and scheme == "http"
        self.tunnel = proxy is not None and scheme == "https"
        origin = f"{scheme}://{host}:{port}"
        self.key = origin if proxy is None else f"{origin} via {proxy.key}"
        dial_host, dial_port = (host, port) if proxy is None else (proxy.host, proxy.port)
        self._dial = (dial_host, dial_port)
        self._literal = _literal_address(dial_host, dial_port)

    def connect(self, timeout: float, on_socket: Callable[[Any], None]) -> Any:
        """A new connection, ready for requests; ``on_socket`` sees each socket before it can block."""
        sock = self._tcp(timeout, on_socket)
        try:
            if self.tunnel:
                self._open_tunnel(sock, time.monotonic() + timeout)
            if self.context is not None:
                sock.settimeout(timeout)
                sock = self.context.wrap_socket(sock, server_hostname=self.host)
                on_socket(sock)
            return sock
        except socket.timeout:
            sock.close()
            raise ProviderTimeout("Connect timeout") from None
        except BaseException:
            sock.close()
            raise

    def _tcp(self, timeout: float, on_socket: Callable[[Any], None]) -> Any:
        host, port = self._dial
        infos = self._literal or socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)
        error: Optional[BaseException] = None
        for family, kind, proto, _name, address in infos:
            sock = socket.socket(family, kind, proto)
            on_socket(sock)
            try:
                sock.settimeout(timeout)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.connect(address)
                on_socket(sock)  # again: a stop that came while connecting shuts it down now
                return sock
            except socket.timeout:
                sock.close()
                raise ProviderTimeout("Connect timeout") from None
            except OSError as exc:
                sock.close()
                error = exc
        raise error or OSError(f"no address for {host}")

    def _open_tunnel(self, sock: Any, deadline: float) -> None:
        """``CONNECT host:port`` through the proxy; ``ProxyRefused`` unless it answers 2xx."""
        assert self.proxy is not None
        where = f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"
        lines = [f"CONNECT {where} HTTP/1.1\r\n", f"Host: {where}\r\n"]
        if self.proxy.authorization:
            lines.append(f"Proxy-Authorization: {self.proxy.authorization}\r\n")
        sock.settimeout(max(0.001, deadline - time.monotonic()))
        sock.sendall(("".join(lines) + "\r\n").encode("latin-1"))
        try:
            head, rest = read_head(sock, deadline)
        except NothingBack as exc:
            raise exc.error from None
        except ProviderTimeout:
            raise ProviderTimeout("Connect timeout") from None
        if not 200 <= head.status < 300:
            raise ProxyRefused(f"the proxy refused the tunnel to {where}: HTTP {head.status} {head.reason}".strip())
        if rest:  # nothing may come before our TLS hello: not a proxy we understand
            raise ProxyRefused(f"the proxy sent {len(rest)} unexpected bytes after its CONNECT answer")
