"""Who is asking. Every request is resolved once, before its view, into ``flask.g``:

* ``Authorization: Bearer ody_...`` -> the token's owner (a bad or revoked token is 401,
  never a fall-back to the cookie);
* else the signed session cookie -> its user, if the user's ``session_version`` still
  matches (a password change or "sign out everywhere" bumps it);
* with ``AUTH = "none"`` -> the one implicit owner, for loopback host names only.

Views call ``current_owner()``; anything not on the public allow-list is refused with
401 (JSON) or, for a page, redirected to /login or /setup. Unsafe methods authorised by
the cookie (or by single-user mode) must come from our own origin: a matching
``Origin``/``Referer`` or the ``X-Odysseus-CSRF`` header carrying the session's token.
Bearer requests are exempt (browsers never attach them on their own).
"""

from __future__ import annotations

import hmac
import os
import secrets
from datetime import timedelta
from typing import Callable, Optional
from urllib.parse import urlsplit

from flask import Flask, current_app, g, has_app_context, jsonify, redirect, request, session, url_for
from flask.sessions import SecureCookieSessionInterface
from werkzeug.middleware.proxy_fix import ProxyFix

from ..bind import bind_host, is_loopback_host, single_user_refusal
from ..errors import Conflict, Forbidden, OdysseusError, RateLimited, Unauthorized

CSRF_HEADER = "X-Odysseus-CSRF"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
PUBLIC_ENDPOINTS = {"static", "meta.health"}
AUTH_MODES = ("password", "none")


def public(view: Callable) -> Callable:
    """Mark a view as reachable without signing in."""
    view.odysseus_public = True  # type: ignore[attr-defined]
    return view


class OdysseusSessionInterface(SecureCookieSessionInterface):
    """Flask's signed cookie, marked Secure whenever the request itself came over https."""

    _signing: Optional[tuple] = None  # (keys it was made with, serializer)

    def get_signing_serializer(self, app: Flask):
        """Flask's serializer, made once per key set instead of on every request ([issue 22]: every
        request opens the session; building the serializer was most of that when there is no cookie)."""
        keys = (app.secret_key, tuple(app.config.get("SECRET_KEY_FALLBACKS") or ()))
        made = self._signing
        if made is None or made[0] != keys:
            made = self._signing = (keys, super().get_signing_serializer(app))
        return made[1]

    def get_cookie_secure(self, app: Flask) -> bool:
        """Secure when configured so or when this request is https (via ProxyFix behind nginx)."""
        return bool(app.config.get("SESSION_COOKIE_SECURE")) or request.is_secure


def init_app(app: Flask) -> None:
    """Validate the auth mode, configure cookies and proxies, install the per-request resolver."""
    config = app.config
    mode = str(config.get("AUTH") or "password").strip().lower()
    if mode not in AUTH_MODES:
        raise OdysseusError(f"ODYSSEUS_AUTH must be one of {', '.join(AUTH_MODES)}, not {config.get('AUTH')!r}")
    config["AUTH"] = mode
    # gunicorn binds HOST (see gunicorn.conf.py, which checks its final bind list too).
    refusal = single_user_refusal(config, [os.environ["HOST"]] if os.environ.get("HOST") else [])
    if refusal:
        raise OdysseusError(refusal)
    config.update(
        SESSION_COOKIE_NAME="odysseus_session",
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Lax",
        # Re-sending an unchanged cookie on every response lets a request that was in flight
        # during sign-out set the old cookie again; send it only when the session changes.
        SESSION_REFRESH_EACH_REQUEST=False,
        PERMANENT_SESSION_LIFETIME=timedelta(days=float(config["SESSION_DAYS"])),
    )
    app.session_interface = OdysseusSessionInterface()
    if config.get("TRUST_PROXY"):
        # One proxy in front (nginx): take client address, scheme and host from its headers.
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=1, x_proto=1, x_host=1, x_port=1)  # type: ignore[method-assign]
    app.before_request(_resolve_caller)
    app.context_processor(lambda: {"csrf_token": csrf_token})

    @app.errorhandler(RateLimited)
    def _rate_limited(exc: RateLimited):
        from .openai_errors import is_v1, openai_error  # the /v1 API's errors have OpenAI's shape

        if is_v1():
            return openai_error(exc)
        response = jsonify({**exc.to_dict(), "retry_after": round(exc.retry_after, 1)})
        response.headers["Retry-After"] = str(int(exc.retry_after) + 1)
        return response, exc.status


# ---------------------------------------------------------------- what views call
def current_owner() -> str:
    """The owner id of the caller; Unauthorized when nobody is signed in."""
    owner = g.get("odysseus_owner") if has_app_context() else None
    if not owner:
        raise Unauthorized("sign in required")
    return owner


def current_user() -> dict:
    """The caller's account row (Unauthorized when signed out; Conflict in account-less single-user mode)."""
    user = g.get("odysseus_user") if has_app_context() else None
    if user is None:
        if g.get("odysseus_auth") == "none":
            raise Conflict("single-user mode has no account yet; create one with `odysseus create-user`")
        raise Unauthorized("sign in required")
    return user


def auth_method() -> Optional[str]:
    """How the caller was recognised: ``token``, ``cookie``, ``none`` (single-user) or None."""
    return g.get("odysseus_auth")


def csrf_token() -> Optional[str]:
    """The signed-in browser's CSRF token (for ``X-Odysseus-CSRF``), or None."""
    return session.get("csrf") if g.get("odysseus_auth") == "cookie" else None


def sign_in(user: dict) -> None:
    """Start a cookie session for ``user`` (a fresh CSRF token each time), held on the server as a sign-in."""
    sign_ins = current_app.extensions["odysseus.accounts"].store.sign_ins
    sign_ins.end(session.get("sid"))  # this browser's previous sign-in, if any
    lifetime = current_app.permanent_session_lifetime.total_seconds()
    session.clear()
    session.permanent = True
    sid = sign_ins.create(user["id"], lifetime)
    session.update(uid=user["id"], sv=user["session_version"], sid=sid, csrf=secrets.token_urlsafe(32))
    _set_caller(user, user["id"], "cookie")


def sign_out() -> None:
    """End this browser's session: its sign-in is deleted, so a copy of the cookie no longer works."""
    current_app.extensions["odysseus.accounts"].store.sign_ins.end(session.get("sid"))
    session.clear()


def current_sign_in() -> Optional[str]:
    """The id of this browser's sign-in (cookie callers), else None."""
    return session.get("sid") if g.get("odysseus_auth") == "cookie" else None


# ---------------------------------------------------------------- the resolver
def _set_caller(user: Optional[dict], owner: Optional[str], how: Optional[str]) -> None:
    g.odysseus_user, g.odysseus_owner, g.odysseus_auth = user, owner, how


def _is_public(endpoint: Optional[str]) -> bool:
    if endpoint is None:
        return True  # no such route: let it answer 404/405
    if endpoint in PUBLIC_ENDPOINTS:
        return True
    return bool(getattr(current_app.view_functions.get(endpoint), "odysseus_public", False))


def _resolve_caller():
    """before_request: identify the caller, refuse the unidentified and cross-site writes."""
    _set_caller(None, None, None)
    accounts = current_app.extensions["odysseus.accounts"]
    if current_app.config["AUTH"] == "none":
        _check_single_user_host()
        owner, user = accounts.implicit_caller()
        _set_caller(user, owner, "none")
    else:
        header = request.headers.get("Authorization", "")
        scheme, _, credential = header.partition(" ")
        if scheme.lower() == "bearer":
            user = accounts.user_for_token(credential.strip())
            if user is not None:
                _set_caller(user, user["id"], "token")
            elif not _is_public(request.endpoint):
                raise Unauthorized("invalid or revoked API token")
        elif session.get("uid"):
            user = accounts.store.users.get(session["uid"])
            if (
                user is not None
                and session.get("sv") == user["session_version"]
                and accounts.store.sign_ins.live(user["id"], session.get("sid"))  # not signed out since
            ):
                _set_caller(user, user["id"], "cookie")
            else:
                session.clear()  # signed out elsewhere or password changed: drop the stale cookie
    if g.odysseus_owner is None and not _is_public(request.endpoint):
        if request.method in ("GET", "HEAD") and not request.path.startswith("/api/"):
            page = "auth.setup_page" if accounts.setup_needed() else "auth.login_page"
            return redirect(url_for(page, next=request.full_path.rstrip("?")))
        raise Unauthorized("sign in required")
    _check_same_origin()
    return None


def _check_same_origin() -> None:
    """Refuse an unsafe request a foreign page could have made the browser send."""
    if request.method in SAFE_METHODS or g.odysseus_auth == "token":
        return
    sent = request.headers.get(CSRF_HEADER)
    expected = session.get("csrf")
    if sent and expected and hmac.compare_digest(sent.encode(), str(expected).encode()):
        return
    source = request.headers.get("Origin")
    if source is None:
        source = request.headers.get("Referer")
    if source is not None:
        if not _same_origin(source):
            raise Forbidden(_cross_site_reason(source))
        return
    if g.odysseus_auth == "cookie":
        raise Forbidden(f"cookie-authenticated writes need the {CSRF_HEADER} header (or an Origin header)")


def _netloc(value: str, scheme: str) -> str:
    value = value.lower()
    default = {"http": ":80", "https": ":443"}.get(scheme, "")
    return value[: -len(default)] if default and value.endswith(default) else value


def _same_origin(source: str) -> bool:
    """True when ``source`` (an Origin or Referer) is this server or an allowed origin."""
    parts = urlsplit(source.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return False  # "null", file:, extensions...
    origin = f"{parts.scheme}://{_netloc(parts.netloc, parts.scheme)}"
    allowed = {
        o.strip().rstrip("/").lower()
        for o in str(current_app.config.get("ALLOWED_ORIGINS") or "").split(",")
        if o.strip()
    }
    if origin in allowed:
        return True
    # Compare host:port only: behind a TLS-terminating proxy without TRUST_PROXY the scheme we see is http.
    return _netloc(parts.netloc, parts.scheme) == _netloc(request.host, parts.scheme)


def _cross_site_reason(source: str) -> str:
    """Why a write was refused; names the likely proxy mistake when only the port differs."""
    parts = urlsplit(source.strip())
    seen = request.host.lower()
    if parts.hostname and parts.port and seen == parts.hostname.lower():
        # The page was loaded from host:port, but the Host that reached us has no port: a proxy
        # dropped it (nginx `proxy_set_header Host $host`). Another port is another origin, so the
        # write stays refused; the message says how to fix the proxy.
        return (
            f"cross-site request refused: the page is at {parts.hostname}:{parts.port} but this server was "
            f"reached as {seen}; a reverse proxy must forward the port (nginx: proxy_set_header Host $http_host)"
        )
    return "cross-site request refused"


def _check_single_user_host() -> None:
    """In AUTH=none answer loopback host names only, so DNS rebinding cannot reach the owner's data."""
    config = current_app.config
    if config.get("AUTH_FORCE"):
        return
    host = bind_host(request.host or "").lower()
    allowed = {h.strip().lower() for h in str(config.get("ALLOWED_HOSTS") or "").split(",") if h.strip()}
    if not (is_loopback_host(host) or host in allowed):
        raise Forbidden("single-user mode answers loopback host names only (see ALLOWED_HOSTS)")
