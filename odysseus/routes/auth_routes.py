"""Accounts over HTTP: set-up, sign-in/out, password change, API tokens, admin, and the two pages."""

from __future__ import annotations

from flask import Blueprint, current_app, g, jsonify, redirect, render_template, request, url_for

from ..errors import BadRequest, Forbidden
from ..store.tokens import public_token
from ..store.users import public_user
from .auth import CSRF_HEADER, auth_method, csrf_token, current_sign_in, current_user, public, sign_in, sign_out
from .params import body
from .safe_next import local_target

bp = Blueprint("auth", __name__)


def _accounts():
    return current_app.extensions["odysseus.accounts"]


def _address() -> str:
    return request.remote_addr or "?"


def _signed_in(user: dict, status: int = 200):
    """The JSON answer after a sign-in: who, and the CSRF token the page must send."""
    return jsonify({"user": public_user(user), "csrf_token": csrf_token(), "csrf_header": CSRF_HEADER}), status


def _require_admin() -> dict:
    user = current_user()
    if not user["is_admin"]:
        raise Forbidden("only an admin may do this")
    return user


def _safe_next() -> str:
    """The local path to return to after signing in (never another site; see safe_next.py)."""
    return local_target(request.args.get("next"))


@bp.get("/api/auth/status")
@public
def status():
    """The auth mode, whether set-up is needed, who is signed in, and the CSRF token."""
    accounts = _accounts()
    user = g.get("odysseus_user")
    return jsonify(
        {
            "mode": current_app.config["AUTH"],
            "setup_required": accounts.setup_needed(),
            "signed_in": g.get("odysseus_owner") is not None,
            "via": auth_method(),
            "user": public_user(user) if user else None,
            "signup_allowed": accounts.signup_allowed(),
            "csrf_token": csrf_token(),
            "csrf_header": CSRF_HEADER,
        }
    )


@bp.post("/api/auth/setup")
@public
def setup():
    """Create the first (admin) account and sign it in; 409 once any account exists."""
    data = body()
    user = _accounts().setup(data.get("username"), data.get("password"))
    sign_in(user)
    return _signed_in(user, 201)


@bp.post("/api/auth/login")
@public
def login():
    """Sign in with username and password (slowed down after repeated failures)."""
    data = body()
    user = _accounts().authenticate(data.get("username"), data.get("password"), _address())
    sign_in(user)
    return _signed_in(user)


@bp.post("/api/auth/signup")
@public
def signup():
    """Create an ordinary account, only while the admin allows sign-up."""
    accounts = _accounts()
    if not accounts.signup_allowed():
        raise Forbidden("sign-up is off; ask the admin for an account")
    data = body()
    user = accounts.create_user(data.get("username"), data.get("password"))
    sign_in(user)
    return _signed_in(user, 201)


@bp.post("/api/auth/logout")
@public
def logout():
    """End this browser's session; ``{"everywhere": true}`` ends every session of the account."""
    data = body()
    if data.get("everywhere") is True and auth_method() == "cookie":
        _accounts().store.users.bump_session_version(current_user()["id"])
        _accounts().store.sign_ins.end_all(current_user()["id"])
    sign_out()
    return jsonify({"signed_out": True})


@bp.post("/api/auth/password")
def change_password():
    """Change the caller's password: every other browser session of the account ends, and its API tokens
    are revoked unless ``keep_tokens: true`` (the answer's ``tokens_revoked`` says how many were)."""
    user = current_user()
    data = body()
    keep_tokens = data.get("keep_tokens", False)
    if not isinstance(keep_tokens, bool):
        raise BadRequest("keep_tokens must be true or false")
    store = _accounts().store
    version = _accounts().change_password(user, data.get("current_password"), data.get("new_password"), _address())
    store.sign_ins.end_all(user["id"], keep=current_sign_in())
    revoked = 0 if keep_tokens else store.tokens.revoke_all(user["id"])
    if auth_method() == "cookie":
        sign_in(dict(user, session_version=version))  # keep this browser signed in
    return jsonify({"changed": True, "csrf_token": csrf_token(), "tokens_revoked": revoked})


@bp.get("/api/auth/tokens")
def list_tokens():
    """The caller's live API tokens (never the secrets)."""
    return jsonify({"tokens": _accounts().store.tokens.list(current_user()["id"])})


@bp.post("/api/auth/tokens")
def create_token():
    """Create an API token; the secret is in this response only."""
    user = current_user()
    if auth_method() == "token":
        raise Forbidden("create API tokens from a signed-in session, not with another token")
    token, row = _accounts().create_token(user["id"], body().get("name"))
    return jsonify({**public_token(row), "token": token}), 201


@bp.delete("/api/auth/tokens/<token_id>")
def revoke_token(token_id: str):
    """Revoke one of the caller's tokens (404 for anybody else's)."""
    return jsonify(_accounts().store.tokens.revoke(current_user()["id"], token_id))


@bp.get("/api/auth/users")
def list_users():
    """Every account (admin only)."""
    _require_admin()
    return jsonify({"users": _accounts().store.users.list()})


@bp.post("/api/auth/users")
def create_user():
    """Create an account (admin only); ``is_admin`` makes another admin."""
    _require_admin()
    data = body()
    user = _accounts().create_user(data.get("username"), data.get("password"), is_admin=data.get("is_admin") is True)
    return jsonify(public_user(user)), 201


@bp.get("/api/auth/settings")
def get_settings():
    """Instance settings (admin only)."""
    _require_admin()
    return jsonify({"allow_signup": _accounts().signup_allowed()})


@bp.post("/api/auth/settings")
def update_settings():
    """Change instance settings (admin only): ``{"allow_signup": true|false}``."""
    _require_admin()
    data = body()
    if "allow_signup" in data:
        if not isinstance(data["allow_signup"], bool):
            raise BadRequest("allow_signup must be true or false")
        _accounts().set_signup_allowed(data["allow_signup"])
    return jsonify({"allow_signup": _accounts().signup_allowed()})


@bp.get("/login")
@public
def login_page():
    """The sign-in page (or set-up while no account exists)."""
    if current_app.config["AUTH"] == "none":
        return redirect(_safe_next())
    accounts = _accounts()
    if accounts.setup_needed():
        return redirect(url_for("auth.setup_page"))
    if g.get("odysseus_owner"):
        return redirect(_safe_next())  # already signed in
    return render_template("login.html", next=_safe_next(), signup_allowed=accounts.signup_allowed())


@bp.get("/setup")
@public
def setup_page():
    """The first-run page that creates the admin account."""
    if current_app.config["AUTH"] == "none":
        return redirect("/")
    if not _accounts().setup_needed():
        return redirect(url_for("auth.login_page"))
    return render_template("setup.html", next=_safe_next())
