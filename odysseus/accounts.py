"""Accounts without Flask: password hashing, set-up, sign-in with throttling, API tokens.

Passwords are hashed with werkzeug's scrypt helper (salted, memory-hard). API tokens
are ``ody_`` + 256 random bits; only their SHA-256 is stored (a fast hash is enough for
a secret that long), and a token is shown once, when created.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import secrets
import time
from typing import Optional, Tuple

from werkzeug.security import check_password_hash, generate_password_hash

from .errors import BadRequest, Conflict, Forbidden, RateLimited, Unauthorized
from .runs.native import NativeWorker
from .throttle import LoginThrottle

log = logging.getLogger(__name__)

TOKEN_PREFIX = "ody_"
PASSWORD_MIN = 8
PASSWORD_MAX = 1024
HASH_METHOD = "scrypt"
_USERNAME = re.compile(r"^[a-z0-9][a-z0-9_.@-]{0,63}$")


def normalize_username(raw: object) -> str:
    """A valid lower-case username, or BadRequest."""
    if not isinstance(raw, str) or not _USERNAME.match(raw.strip().lower()):
        raise BadRequest("username must be 1-64 characters: letters, digits, and _ . @ - (not first)")
    return raw.strip().lower()


def check_new_password(raw: object) -> str:
    """A password acceptable for a new account, or BadRequest."""
    if not isinstance(raw, str) or not (PASSWORD_MIN <= len(raw) <= PASSWORD_MAX):
        raise BadRequest(f"password must be a string of {PASSWORD_MIN} to {PASSWORD_MAX} characters")
    return raw


#: the threads password hashing runs on: its own small pool, so sign-ins never queue behind other work
#: (file parsing, page extraction) in gevent's shared thread pool; made on first use (after the patch)
_PASSWORD_THREADS: Optional[NativeWorker] = None
PASSWORD_POOL_SIZE = 2


def _password_threads() -> NativeWorker:
    global _PASSWORD_THREADS
    if _PASSWORD_THREADS is None:
        _PASSWORD_THREADS = NativeWorker("odysseus-passwords", PASSWORD_POOL_SIZE)
    return _PASSWORD_THREADS


def hash_password(password: str) -> str:
    """A salted scrypt hash of ``password`` (computed off the gevent hub: scrypt is CPU- and memory-heavy)."""
    return _password_threads().call(generate_password_hash, password, HASH_METHOD)


def verify_password(password_hash: str, password: str) -> bool:
    """True when ``password`` matches ``password_hash`` (checked off the gevent hub, on the password pool)."""
    return _password_threads().call(check_password_hash, password_hash, password)


def new_token() -> str:
    """A fresh API token: ``ody_`` + 256 random bits."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    """How a token is stored and looked up."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def load_or_create_secret(data_dir: str) -> str:
    """The cookie-signing secret kept in ``data_dir/secret_key`` (mode 0600), created on first use.

    Persisting it keeps people signed in across restarts and lets several workers agree.
    """
    path = os.path.join(data_dir, "secret_key")
    os.makedirs(data_dir, exist_ok=True)
    for _ in range(50):
        try:
            with open(path, "r", encoding="ascii") as fh:
                secret = fh.read().strip()
            if secret:
                return secret
        except FileNotFoundError:
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                continue  # another worker is writing it; read it on the next pass
            with os.fdopen(fd, "w", encoding="ascii") as fh:
                fh.write(secrets.token_hex(32) + "\n")
            continue
        time.sleep(0.02)  # present but still empty: its writer has not finished
    raise OSError(f"cannot read or create the secret key file {path}")


class Accounts:
    """Users, sign-in and tokens over the store; one per app (it owns the login throttle)."""

    def __init__(self, store, config: dict):
        self.store = store
        self.config = config
        self.throttle = LoginThrottle.from_config(config)
        self._dummy_hash: Optional[str] = None

    # ------------------------------------------------------------ users
    def setup_needed(self) -> bool:
        """True until the first account exists."""
        return self.store.users.count() == 0

    def create_user(
        self, username: object, password: object, *, is_admin: bool = False, first_only: bool = False
    ) -> dict:
        """Create an account; the very first one is always an admin and adopts single-user data."""
        name, secret = normalize_username(username), check_new_password(password)
        first = self.setup_needed()
        if first_only and not first:
            raise Conflict("set-up is already done; sign in instead")
        user = self.store.users.create(
            name, hash_password(secret), is_admin=is_admin or first, only_if_none=first_only or first
        )
        if first:
            self.adopt_single_user_data()
        return user

    def adopt_single_user_data(self) -> int:
        """Give rows left under ``LOCAL_OWNER`` to the first admin (at the first account and at start-up).

        At start-up this also picks up a reply that a single-user run saved after the first
        account had already adopted everything else.
        """
        admin = self.store.users.first_admin_id()
        moved = self.store.users.adopt(self.config["LOCAL_OWNER"], admin) if admin else 0
        if moved:
            log.info("the first admin adopted %d row(s) made in single-user mode", moved)
        return moved

    def setup(self, username: object, password: object) -> dict:
        """Create the first (admin) account; Conflict once any account exists."""
        return self.create_user(username, password, is_admin=True, first_only=True)

    def signup_allowed(self) -> bool:
        """Whether anyone may create an account (the admin's setting)."""
        return self.store.settings.get("allow_signup", "0") == "1"

    def set_signup_allowed(self, allowed: bool) -> None:
        """Turn open sign-up on or off."""
        self.store.settings.set("allow_signup", "1" if allowed else "0")

    def implicit_owner(self) -> str:
        """The owner in AUTH=none: the first admin once accounts exist, else ``LOCAL_OWNER``."""
        return self.store.users.first_admin_id() or self.config["LOCAL_OWNER"]

    def implicit_caller(self) -> Tuple[str, Optional[dict]]:
        """``implicit_owner()`` and its account row (None before any account exists), in one read."""
        return self.store.users.implicit(self.config["LOCAL_OWNER"])

    # ------------------------------------------------------------ passwords
    def authenticate(self, username: object, password: object, address: str) -> dict:
        """The user for these credentials; RateLimited while locked out, Unauthorized when wrong."""
        name = username.strip().lower() if isinstance(username, str) else ""
        keys = [("user", name[:64]), ("address", address or "?")]  # bounded keys: no memory blow-up
        wait = self.throttle.retry_after(keys)
        if wait > 0:
            raise RateLimited(f"too many failed sign-ins; try again in {int(wait) + 1} s", retry_after=wait)
        user = self.store.users.by_username(name) if _USERNAME.match(name) else None
        if not isinstance(password, str) or len(password) > PASSWORD_MAX:
            password = ""
        # Hash even for unknown names, so timing does not reveal which usernames exist.
        ok = verify_password(user["password_hash"] if user else self._dummy(), password) and user is not None
        if not ok or user is None:
            self.throttle.failure(keys)
            raise Unauthorized("wrong username or password")
        self.throttle.success(("user", name[:64]))
        if user.get("disabled_at"):  # an admin disabled the account (settings screen)
            raise Forbidden("this account is disabled; ask the admin")
        return user

    def change_password(self, user: dict, current: object, new: object, address: str) -> int:
        """Replace the user's password after checking the current one; returns the new session version."""
        password = check_new_password(new)
        try:
            self.authenticate(user["username"], current, address)
        except Unauthorized:
            raise Forbidden("the current password is wrong") from None
        return self.store.users.set_password(user["id"], hash_password(password))

    def reset_password(self, username: object, new: object) -> dict:
        """Set a password without the old one (the command line, for a forgotten password)."""
        user = self.store.users.by_username(normalize_username(username))
        if user is None:
            raise BadRequest("no such user")
        self.store.users.set_password(user["id"], hash_password(check_new_password(new)))
        return user

    def _dummy(self) -> str:
        if self._dummy_hash is None:
            self._dummy_hash = hash_password(secrets.token_hex(16))
        return self._dummy_hash

    # ------------------------------------------------------------ tokens
    def create_token(self, owner: str, name: object) -> Tuple[str, dict]:
        """A new token for ``owner``: the secret (shown once) and its stored record."""
        label = name.strip() if isinstance(name, str) and name.strip() else "API token"
        if len(label) > 100:
            raise BadRequest("name is longer than 100 characters")
        token = new_token()
        row = self.store.tokens.create(owner, label, hash_token(token), token[: len(TOKEN_PREFIX) + 6])
        return token, row

    def user_for_token(self, token: str) -> Optional[dict]:
        """The owner of a live token, or None (unknown, revoked, malformed)."""
        if not token.startswith(TOKEN_PREFIX) or len(token) > 200:
            return None
        row = self.store.tokens.by_hash(hash_token(token))
        if row is None:
            return None
        user = self.store.users.get(row["owner"])
        if user is not None and user.get("disabled_at"):
            return None  # a disabled account's tokens stop working (and work again if re-enabled)
        if user is not None:
            self.store.tokens.touch(row)
        return user
