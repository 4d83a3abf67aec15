"""A requests session that reads the proxy environment once, when it is made.

With ``trust_env = True`` requests scans the environment on every request: the ``*_PROXY``
and ``NO_PROXY`` variables (``getproxies`` plus the bypass check, which briefly rewrites
``os.environ``), ``REQUESTS_CA_BUNDLE``/``CURL_CA_BUNDLE`` and ``~/.netrc`` (a file read).
``EnvOnceSession`` takes a snapshot of those variables at construction and then serves
with ``trust_env = False``: for each scheme and host the proxies are decided once from the
snapshot (``NO_PROXY`` honoured: host suffixes, ``host:port``, ``*``, IPv4 CIDR ranges)
and cached. Variables changed after the session was made are not seen (a provider's
session is made when its connection is configured). ``~/.netrc`` credentials are not used:
providers authenticate with their API key header.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Optional
from urllib.parse import urlsplit
from urllib.request import getproxies_environment, proxy_bypass_environment  # type: ignore[attr-defined]  # in CPython, not in typeshed

import requests
from requests.utils import address_in_network, is_ipv4_address, is_valid_cidr

#: distinct (scheme, host) origins whose proxy decision is cached (providers have a handful)
CACHE_LIMIT = 256


def bypasses(url: str, no_proxy: Optional[str]) -> bool:
    """True when ``no_proxy`` (the ``NO_PROXY`` value) says ``url`` goes direct."""
    if not no_proxy:
        return False
    parts = urlsplit(url)
    host = parts.hostname or ""
    if is_ipv4_address(host):
        for entry in (e.strip() for e in no_proxy.split(",")):
            if entry == host or (is_valid_cidr(entry) and address_in_network(host, entry)):
                return True
    netloc = f"{host}:{parts.port}" if parts.port else host
    return bool(proxy_bypass_environment(netloc, {"no": no_proxy}))


class EnvOnceSession(requests.Session):
    """``requests.Session`` with the proxy and CA-bundle environment resolved once (see the module)."""

    def __init__(self):
        super().__init__()
        self.trust_env = False
        proxies = dict(getproxies_environment())  # what requests' getproxies() reads, lower case winning
        self.no_proxy: Optional[str] = proxies.pop("no", None)
        self.env_proxies = proxies
        self.env_verify = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE") or None
        self._by_origin: Dict[str, Dict[str, str]] = {}

    def proxies_for(self, url: str) -> Dict[str, str]:
        """The environment's proxies for ``url`` (empty when none apply or ``NO_PROXY`` matches)."""
        parts = urlsplit(url)
        origin = f"{parts.scheme}://{parts.netloc}".lower()
        found = self._by_origin.get(origin)
        if found is None:
            found = {} if not self.env_proxies or bypasses(url, self.no_proxy) else dict(self.env_proxies)
            if len(self._by_origin) < CACHE_LIMIT:
                self._by_origin[origin] = found
        return found

    def merge_environment_settings(self, url: Any, proxies: Any, stream: Any, verify: Any, cert: Any) -> Any:
        """What ``trust_env`` would add, from the snapshot instead of the live environment."""
        merged = dict(proxies or {})
        for scheme, proxy in self.proxies_for(url).items():
            merged.setdefault(scheme, proxy)
        if (verify is True or verify is None) and self.env_verify:
            verify = self.env_verify
        return super().merge_environment_settings(url, merged, stream, verify, cert)
