"""Where the server listens, and the refusal to serve single-user mode beyond loopback."""

from __future__ import annotations

import ipaddress
from typing import Iterable, Optional

LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"}


def is_loopback_host(host: str) -> bool:
    """True for loopback names and addresses (127.0.0.0/8, ::1, localhost, *.localhost)."""
    host = (host or "").strip().strip("[]").lower()
    if not host:
        return False  # an empty host binds every interface
    if host in LOOPBACK_NAMES or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bind_host(bind: str) -> str:
    """The host part of a gunicorn bind string (``host:port``, ``[::1]:port``, ``unix:...``)."""
    bind = bind.strip()
    if bind.startswith(("unix:", "fd://")):
        return bind  # not a loopback address: a socket file is usually published by a proxy
    if bind.startswith("["):
        return bind[1 : bind.index("]")] if "]" in bind else bind
    if bind.count(":") == 1:
        return bind.split(":", 1)[0]
    return bind  # a bare host, or a bare IPv6 address


def single_user_refusal(config: dict, hosts: Iterable[str]) -> Optional[str]:
    """Why the server must not start (AUTH=none on a non-loopback bind), or None when it may."""
    if str(config.get("AUTH", "password")).lower() != "none" or config.get("AUTH_FORCE"):
        return None
    public = [h for h in hosts if not is_loopback_host(h)]
    if not public:
        return None
    return (
        f"refusing to start: ODYSSEUS_AUTH=none serves everyone without sign-in, but the server would "
        f"listen on {', '.join(public)}, which is not a loopback address. Bind to 127.0.0.1 (HOST=127.0.0.1), "
        f"or use ODYSSEUS_AUTH=password, or set ODYSSEUS_AUTH_FORCE=1 if you really mean it."
    )
