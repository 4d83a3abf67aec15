"""What the environment says about reaching providers, read once: proxies, ``NO_PROXY``, the CA bundle.

``NetworkEnv`` takes a snapshot of the variables when a provider's transport is made (a
provider's transport is made when its connection is configured) and never reads them again:
``HTTP_PROXY``/``HTTPS_PROXY``/``ALL_PROXY`` (lower case winning, as curl and ``urllib`` read
them), ``NO_PROXY`` (host suffixes, ``host:port``, ``*``, IP ranges in CIDR form) and
``REQUESTS_CA_BUNDLE``/``CURL_CA_BUNDLE`` (kept under those names: deployments already set them).
For each origin the proxy is decided once and cached. ``~/.netrc`` is not read: providers
authenticate with their API key header.

A proxy is an ``http://`` URL (a bare ``host:port`` means ``http://``), optionally with
``user:password@`` for ``Proxy-Authorization: Basic``. An ``http`` provider URL is sent to it in
absolute form; an ``https`` one goes through a ``CONNECT`` tunnel, TLS end to end with the provider.
Other proxy schemes (``https://`` proxies, SOCKS) are refused with a clear error when used.
"""

from __future__ import annotations

import base64
import ipaddress
import os
from dataclasses import dataclass
from typing import Dict, Optional
from urllib.parse import unquote, urlsplit
from urllib.request import getproxies_environment, proxy_bypass_environment  # type: ignore[attr-defined]  # in CPython, not in typeshed

#: distinct origins whose proxy decision is cached (providers have a handful)
CACHE_LIMIT = 256


class UnsupportedProxy(ValueError):
    """A proxy URL this client cannot use (a scheme other than ``http``, no host, a bad port)."""


@dataclass(frozen=True)
class Proxy:
    """An ``http://`` forward proxy: where to connect, and the ``Proxy-Authorization`` it wants (or None)."""

    host: str
    port: int
    authorization: Optional[str]

    @property
    def key(self) -> str:
        """The proxy's origin, for pool keys."""
        return f"http://{self.host}:{self.port}"

    @classmethod
    def parse(cls, url: str) -> "Proxy":
        """The proxy an environment value names; ``UnsupportedProxy`` when it is not a usable ``http`` proxy."""
        text = url.strip()
        if "://" not in text:
            text = "http://" + text  # what curl and requests make of "host:port"
        try:
            parts = urlsplit(text)
            port = parts.port
        except ValueError:
            raise UnsupportedProxy(f"bad proxy URL {_shown(text)}") from None
        if parts.scheme.lower() != "http":
            raise UnsupportedProxy(f"proxy scheme {parts.scheme!r} is not supported (use an http:// proxy)")
        if not parts.hostname:
            raise UnsupportedProxy(f"proxy URL without a host: {_shown(text)}")
        authorization = None
        if parts.username is not None:
            pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode("latin-1", "replace")
            authorization = "Basic " + base64.b64encode(pair).decode("ascii")
        return cls(parts.hostname, port or 80, authorization)


def _shown(url: str) -> str:
    """A proxy URL for an error message: without its credentials."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    return parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()


def bypasses(url: str, no_proxy: Optional[str]) -> bool:
    """True when ``no_proxy`` (the ``NO_PROXY`` value) says ``url`` goes direct."""
    if not no_proxy:
        return False
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = None
    if address is not None:
        for entry in (e.strip() for e in no_proxy.split(",")):
            if entry == host or ("/" in entry and _in_network(address, entry)):
                return True
    netloc = f"{host}:{parts.port}" if parts.port else host
    return bool(proxy_bypass_environment(netloc, {"no": no_proxy}))


def _in_network(address: "ipaddress._BaseAddress", entry: str) -> bool:
    try:
        return address in ipaddress.ip_network(entry, strict=False)
    except ValueError:  # not a range
        return False


class NetworkEnv:
    """The proxy and CA-bundle environment as it was when this object was made (see the module)."""

    def __init__(self) -> None:
        proxies = dict(getproxies_environment())  # lower case winning, as curl and urllib read them
        self.no_proxy: Optional[str] = proxies.pop("no", None)
        self.proxies: Dict[str, str] = proxies
        #: the CA file or directory for https providers; None: certifi's bundle
        self.ca_bundle: Optional[str] = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE") or None
        self._by_origin: Dict[str, Optional[str]] = {}

    def proxy_url(self, url: str) -> Optional[str]:
        """The proxy URL the environment gives for ``url`` (None: go direct)."""
        parts = urlsplit(url)
        origin = f"{parts.scheme}://{parts.netloc}".lower()
        if origin in self._by_origin:
            return self._by_origin[origin]
        found = None
        if self.proxies and not bypasses(url, self.no_proxy):
            scheme, host = parts.scheme.lower(), (parts.hostname or "")
            for key in (f"{scheme}://{host}", scheme, f"all://{host}", "all"):  # requests' order
                if self.proxies.get(key):
                    found = self.proxies[key]
                    break
        if len(self._by_origin) < CACHE_LIMIT:
            self._by_origin[origin] = found
        return found

    def proxy_for(self, url: str) -> Optional[Proxy]:
        """The proxy for ``url``, parsed (None: go direct); ``UnsupportedProxy`` for one this client cannot use."""
        found = self.proxy_url(url)
        return None if found is None else Proxy.parse(found)
