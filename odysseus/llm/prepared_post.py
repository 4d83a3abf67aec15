"""A provider's streaming POST with the ``requests`` machinery that does not change done once (issue 22).

``Session.post`` per call builds a ``Request``, merges the session's headers, params, auth,
cookies and hooks into it, parses, IDNA-encodes and re-quotes the URL, merges the proxy and
TLS settings, then ``Session.send`` looks the adapter up, dispatches hooks and walks the
redirect generator: about as much CPU as the HTTP exchange itself. For one provider URL all
of that gives the same answer every time, so ``PostPlan`` asks ``requests`` once (the same
``prepare_request`` and ``merge_environment_settings`` calls ``Session.request`` makes) and
keeps the prepared URL, the merged headers, the adapter and the send settings; each call then
only encodes the body and calls the adapter with a fresh ``PreparedRequest``.

What stays exactly as ``Session.post(url, json=body, stream=True, timeout=...)`` does it:
the body bytes (``requests``' own JSON encoder, ``allow_nan=False``), the headers and their
order (session defaults, then the transport's, then ``Content-Type``/``Content-Length``),
proxies and ``NO_PROXY`` (``env_session.EnvOnceSession``'s snapshot, decided per origin),
the CA bundle, cookies (sent when the jar holds any, stored when a response sets some) and
redirects (followed by the session's own ``resolve_redirects``). ``plan_for`` returns None
(use ``Session.post``) for a session with auth, params or response hooks, which would make
the per-call result differ.

Invariant: a ``Transport``'s session and headers are not changed after it is made (a provider
whose settings change gets a new adapter and transport), so a plan never goes stale.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Dict, Optional

import requests
from requests.compat import json as complexjson  # type: ignore[attr-defined]  # what requests encodes with
from requests.cookies import RequestsCookieJar, extract_cookies_to_jar
from requests.hooks import default_hooks
from requests.sessions import preferred_clock
from requests.structures import CaseInsensitiveDict
from requests.utils import select_proxy

#: distinct URLs one transport keeps a plan for (a provider posts to one or two)
PLAN_LIMIT = 16


class PostPlan:
    """Everything about a streaming JSON POST to one URL that is the same on every call."""

    def __init__(self, session: requests.Session, url: str, headers: dict):
        probe = session.prepare_request(requests.Request("POST", url, headers=headers, json={}))
        self.session = session
        self.url: str = probe.url or url
        self.headers: CaseInsensitiveDict = probe.headers  # Content-Length is set per call
        self.headers.pop("Cookie", None)  # the jar's cookies are read per call
        self.adapter = session.get_adapter(url=self.url)
        settings = session.merge_environment_settings(self.url, {}, True, None, None)
        self.proxies = settings["proxies"]
        self.verify = settings["verify"]
        self.cert = settings["cert"]

    @property
    def direct(self) -> bool:
        """True when no proxy applies to the URL and no client certificate is sent: ``direct_post`` may send it."""
        no_proxy = select_proxy(self.url, self.proxies) is None
        return no_proxy and not self.cert and self.url.startswith(("http:", "https:"))

    @staticmethod
    def encode(body: Any) -> bytes:
        """The body bytes ``requests`` sends for ``json=body``."""
        data = complexjson.dumps(body, allow_nan=False)
        return data if isinstance(data, bytes) else data.encode("utf-8")

    def prepare(self, data: bytes) -> requests.PreparedRequest:
        """The request ``Session.post`` would send with ``data`` as its body (cookies from the jar)."""
        prep = requests.PreparedRequest()
        prep.method = "POST"
        prep.url = self.url
        prep.headers = self.headers.copy()
        prep.headers["Content-Length"] = str(len(data))
        prep.body = data
        prep.hooks = default_hooks()
        jar = self.session.cookies
        if len(jar):
            prep.prepare_cookies(jar)
        return prep

    def send_settings(self, timeout: Any) -> Dict[str, Any]:
        """The keyword arguments of the adapter's ``send`` (and of the redirects that follow)."""
        return {"stream": True, "timeout": timeout, "verify": self.verify, "cert": self.cert, "proxies": self.proxies}

    def post(self, body: Any, timeout: Any) -> requests.Response:
        """POST ``body`` as JSON, streaming, as ``Session.post`` would."""
        prep = self.prepare(self.encode(body))
        kwargs = self.send_settings(timeout)
        began = preferred_clock()
        response = self.adapter.send(prep, **kwargs)
        response.elapsed = timedelta(seconds=preferred_clock() - began)
        if "set-cookie" in response.raw.headers:
            extract_cookies_to_jar(self.session.cookies, prep, response.raw)
        return self.follow(response, prep, kwargs)

    def follow(
        self, response: requests.Response, prep: requests.PreparedRequest, kwargs: Dict[str, Any]
    ) -> requests.Response:
        """``response`` itself, or where its redirects lead (by the session's own ``resolve_redirects``)."""
        if response.is_redirect:
            if prep._cookies is None:  # type: ignore[attr-defined]  # prepare() leaves it unset when the jar is empty
                prep._cookies = RequestsCookieJar()  # type: ignore[attr-defined]  # resolve_redirects merges into it
            history = [response, *self.session.resolve_redirects(response, prep, **kwargs)]
            response = history.pop()
            response.history = history
        return response


def plan_for(plans: Dict[str, PostPlan], session: requests.Session, url: str, headers: dict) -> Optional[PostPlan]:
    """The cached plan for ``url`` (made on first use), or None when the session needs the full path."""
    plan = plans.get(url)
    if plan is None:
        if session.auth is not None or session.params or any(session.hooks.get("response") or ()):
            return None
        plan = PostPlan(session, url, headers)
        if len(plans) < PLAN_LIMIT:
            plans[url] = plan
    return plan
