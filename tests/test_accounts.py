"""Accounts: hashing, tokens, the login throttle, set-up once, password change, CSRF, single-user mode."""

from __future__ import annotations

import hashlib
import io
import os
import stat
import time

import pytest
from flask import Flask

from odysseus import accounts as acc
from odysseus import cli, create_app
from odysseus.bind import bind_host, is_loopback_host, single_user_refusal
from odysseus.errors import OdysseusError
from odysseus.throttle import LoginThrottle

PASSWORD = "correct horse battery"
CSRF = "X-Odysseus-CSRF"


@pytest.fixture
def make_app(tmp_path):
    """Apps in password mode on one data dir (a second call is a 'restart')."""
    made = []

    def make(**overrides):
        config = {
            "DATA_DIR": str(tmp_path),
            "PROVIDERS": [],
            "DEMO_TOKEN_DELAY": 0.001,
            "AUTH": "password",
            "LOGIN_BASE_DELAY": 0.3,
            **overrides,
        }
        application = create_app(config)
        made.append(application)
        return application

    yield make
    for application in made:
        application.extensions["odysseus.runs"].close()


@pytest.fixture
def papp(make_app):
    return make_app()


def setup_admin(client, username="alice", password=PASSWORD):
    response = client.post("/api/auth/setup", json={"username": username, "password": password})
    assert response.status_code == 201, response.json
    return response.json["csrf_token"]


def login(client, username, password=PASSWORD):
    response = client.post("/api/auth/login", json={"username": username, "password": password})
    assert response.status_code == 200, response.json
    return response.json["csrf_token"]


def add_user(app, username, password=PASSWORD, admin=False):
    return app.extensions["odysseus.accounts"].create_user(username, password, is_admin=admin)


# ---------------------------------------------------------------- pure parts
def test_password_hash_is_salted_scrypt_and_verifies():
    first, second = acc.hash_password(PASSWORD), acc.hash_password(PASSWORD)
    assert first.startswith("scrypt:") and first != second and PASSWORD not in first
    assert acc.verify_password(first, PASSWORD) and acc.verify_password(second, PASSWORD)
    assert not acc.verify_password(first, PASSWORD + "x")


def test_tokens_are_long_random_and_stored_only_as_sha256():
    tokens = {acc.new_token() for _ in range(50)}
    assert len(tokens) == 50
    for token in tokens:
        assert token.startswith("ody_") and len(token) >= 4 + 43  # 32 random bytes, base64url
    token = next(iter(tokens))
    assert acc.hash_token(token) == hashlib.sha256(token.encode()).hexdigest()


@pytest.mark.parametrize(
    "raw,ok",
    [
        ("alice", True),
        ("Alice ", True),
        ("a.b-c_d@e", True),
        ("", False),
        ("-alice", False),
        ("al ice", False),
        ("x" * 65, False),
        (42, False),
    ],
)
def test_username_rules(raw, ok):
    if ok:
        assert acc.normalize_username(raw) == raw.strip().lower()
    else:
        with pytest.raises(OdysseusError):
            acc.normalize_username(raw)


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_throttle_locks_after_free_failures_doubling_and_capped():
    clock = Clock()
    throttle = LoginThrottle({"user": 3, "address": 10}, base_delay=1.0, max_delay=8.0, forget_after=100.0, clock=clock)
    keys = [("user", "alice"), ("address", "10.0.0.1")]
    for _ in range(2):
        throttle.failure(keys)
        assert throttle.retry_after(keys) == 0
    delays = []
    for _ in range(5):
        delays.append(throttle.failure(keys))
        assert throttle.retry_after(keys) == pytest.approx(delays[-1])
    assert delays == [1.0, 2.0, 4.0, 8.0, 8.0]
    assert throttle.retry_after([("user", "bob"), ("address", "10.0.0.2")]) == 0  # others unaffected
    clock.now += 8.5
    assert throttle.retry_after(keys) == 0
    throttle.success(("user", "alice"))
    assert throttle.failures(("user", "alice")) == 0
    assert throttle.failures(("address", "10.0.0.1")) == 7  # a good password elsewhere does not reset an address
    clock.now += 101  # forgotten after a quiet hour
    throttle.failure([("address", "10.0.0.1")])
    assert throttle.failures(("address", "10.0.0.1")) == 1


def test_throttle_address_key_locks_across_usernames():
    throttle = LoginThrottle({"user": 100, "address": 4}, base_delay=5.0, clock=Clock())
    for i in range(4):
        throttle.failure([("user", f"victim{i}"), ("address", "10.0.0.9")])
    assert throttle.retry_after([("user", "fresh"), ("address", "10.0.0.9")]) == pytest.approx(5.0)


def test_throttle_memory_is_bounded_and_keeps_locked_keys():
    clock = Clock()
    throttle = LoginThrottle({"user": 1, "address": 1000}, max_keys=50, clock=clock)
    throttle.failure([("user", "target")])  # locked
    for i in range(200):
        clock.now += 0.001
        throttle.failure([("address", f"10.1.{i // 250}.{i % 250}")])
    assert len(throttle._entries) <= 50
    assert throttle.retry_after([("user", "target")]) > 0


@pytest.mark.parametrize(
    "host,loopback",
    [
        ("127.0.0.1", True),
        ("127.8.9.1", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("app.localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("", False),
        ("192.168.1.5", False),
        ("example.com", False),
        ("unix:/tmp/odysseus.sock", False),
    ],
)
def test_is_loopback_host(host, loopback):
    assert is_loopback_host(host) is loopback


@pytest.mark.parametrize(
    "bind,host",
    [
        ("127.0.0.1:5000", "127.0.0.1"),
        ("[::1]:80", "::1"),
        ("0.0.0.0:1", "0.0.0.0"),
        ("localhost", "localhost"),
        ("unix:/run/o.sock", "unix:/run/o.sock"),
    ],
)
def test_bind_host(bind, host):
    assert bind_host(bind) == host


def test_single_user_refusal_rules():
    none = {"AUTH": "none", "AUTH_FORCE": False}
    assert single_user_refusal(none, ["127.0.0.1"]) is None
    message = single_user_refusal(none, ["0.0.0.0"])
    assert message and "0.0.0.0" in message and "ODYSSEUS_AUTH_FORCE" in message
    assert single_user_refusal({**none, "AUTH_FORCE": True}, ["0.0.0.0"]) is None
    assert single_user_refusal({"AUTH": "password"}, ["0.0.0.0"]) is None


def test_secret_key_is_persisted_0600_and_reused(tmp_path):
    first = acc.load_or_create_secret(str(tmp_path))
    assert len(first) == 64
    assert stat.S_IMODE(os.stat(tmp_path / "secret_key").st_mode) == 0o600
    assert acc.load_or_create_secret(str(tmp_path)) == first


# ---------------------------------------------------------------- set-up and sign-in
def test_setup_once_then_refused(papp):
    papp.add_url_rule("/page", "page", lambda: "a page that needs an account")
    client = papp.test_client()
    assert client.get("/api/auth/status").json["setup_required"] is True
    assert client.get("/page").headers["Location"] == "/setup?next=/page"
    setup_admin(client)
    status = client.get("/api/auth/status").json
    assert status["setup_required"] is False and status["user"]["username"] == "alice" and status["user"]["is_admin"]
    again = papp.test_client().post("/api/auth/setup", json={"username": "mallory", "password": PASSWORD})
    assert again.status_code == 409
    assert [u["username"] for u in papp.extensions["odysseus.store"].users.list()] == ["alice"]
    assert papp.test_client().get("/setup").headers["Location"].endswith("/login")
    assert papp.test_client().get("/page").headers["Location"] == "/login?next=/page"
    assert client.get("/page").data == b"a page that needs an account"


@pytest.mark.parametrize(
    "payload",
    [
        {"username": "alice", "password": "short"},
        {"username": "", "password": PASSWORD},
        {"username": "al ice", "password": PASSWORD},
        {"password": PASSWORD},
    ],
)
def test_setup_rejects_bad_input_and_stores_nothing(papp, payload):
    response = papp.test_client().post("/api/auth/setup", json=payload)
    assert response.status_code == 400 and "error" in response.json
    assert papp.extensions["odysseus.store"].users.count() == 0


def test_login_logout_and_cookie_flags(papp):
    setup_admin(papp.test_client())
    client = papp.test_client()
    assert client.get("/api/sessions").status_code == 401
    wrong = client.post("/api/auth/login", json={"username": "alice", "password": "nope nope"})
    assert wrong.status_code == 401
    response = client.post("/api/auth/login", json={"username": "ALICE", "password": PASSWORD})
    assert response.status_code == 200
    cookie = response.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Secure" not in cookie
    assert client.get("/api/sessions").status_code == 200
    assert client.post("/api/auth/logout", json={}, headers={CSRF: response.json["csrf_token"]}).status_code == 200
    assert client.get("/api/sessions").status_code == 401


def _cookie_of(response) -> str:
    """The session cookie's name=value from a Set-Cookie header."""
    return response.headers["Set-Cookie"].split(";", 1)[0]


def test_a_copied_cookie_answers_401_after_sign_out(papp):
    """Sign-out deletes the sign-in on the server (issue 38 item 4): a copy taken before stops working."""
    setup_admin(papp.test_client())
    browser = papp.test_client()
    response = browser.post("/api/auth/login", json={"username": "alice", "password": PASSWORD})
    name, _, value = _cookie_of(response).partition("=")
    thief = papp.test_client()
    thief.set_cookie(name, value)
    assert thief.get("/api/sessions").status_code == 200  # the copy works...
    assert browser.post("/api/auth/logout", json={}, headers={CSRF: response.json["csrf_token"]}).status_code == 200
    assert thief.get("/api/sessions").status_code == 401  # ...until sign-out
    # another browser of the same account is not signed out by it
    other = papp.test_client()
    login(other, "alice")
    again = papp.test_client()
    token = login(again, "alice")
    assert again.post("/api/auth/logout", json={}, headers={CSRF: token}).status_code == 200
    assert other.get("/api/sessions").status_code == 200


def test_a_password_change_revokes_the_account_s_tokens_unless_asked_not_to(papp):
    client = papp.test_client()
    csrf = setup_admin(client)
    made = client.post("/api/auth/tokens", json={"name": "script"}, headers={CSRF: csrf}).json
    bearer = {"Authorization": f"Bearer {made['token']}"}
    assert papp.test_client().get("/api/sessions", headers=bearer).status_code == 200
    kept = client.post(
        "/api/auth/password",
        json={"current_password": PASSWORD, "new_password": "new password 1", "keep_tokens": True},
        headers={CSRF: csrf},
    )
    assert kept.status_code == 200 and kept.json["tokens_revoked"] == 0
    assert papp.test_client().get("/api/sessions", headers=bearer).status_code == 200
    changed = client.post(
        "/api/auth/password",
        json={"current_password": "new password 1", "new_password": "new password 2"},
        headers={CSRF: kept.json["csrf_token"]},
    )
    assert changed.status_code == 200 and changed.json["tokens_revoked"] == 1
    assert papp.test_client().get("/api/sessions", headers=bearer).status_code == 401
    assert client.get("/api/sessions").status_code == 200  # this browser stays signed in
    bad = client.post(
        "/api/auth/password",
        json={"current_password": "new password 2", "new_password": "new password 3", "keep_tokens": "yes"},
        headers={CSRF: changed.json["csrf_token"]},
    )
    assert bad.status_code == 400


def test_cookie_is_secure_over_https_only_behind_a_trusted_proxy(make_app):
    app = make_app(TRUST_PROXY=True)
    client = app.test_client()
    response = client.post(
        "/api/auth/setup", json={"username": "alice", "password": PASSWORD}, headers={"X-Forwarded-Proto": "https"}
    )
    assert "Secure" in response.headers["Set-Cookie"]
    untrusted = make_app(DATA_DIR=app.config["DATA_DIR"] + "-2").test_client()
    response = untrusted.post(
        "/api/auth/setup", json={"username": "alice", "password": PASSWORD}, headers={"X-Forwarded-Proto": "https"}
    )
    assert "Secure" not in response.headers["Set-Cookie"]


@pytest.mark.slow  # measured 1.2 s: waits out the sign-in slow-down
def test_slow_down_after_repeated_failures(papp):
    setup_admin(papp.test_client())
    client = papp.test_client()
    statuses = [
        client.post("/api/auth/login", json={"username": "alice", "password": f"guess {i}"}).status_code
        for i in range(5)
    ]
    assert statuses == [401] * 5
    locked = client.post("/api/auth/login", json={"username": "alice", "password": PASSWORD})
    assert locked.status_code == 429 and int(locked.headers["Retry-After"]) >= 1
    assert locked.json["retry_after"] > 0
    assert "Set-Cookie" not in locked.headers  # even the right password is not checked while locked
    time.sleep(papp.config["LOGIN_BASE_DELAY"] + 0.1)  # the scenario: the slow-down is waited out
    assert client.post("/api/auth/login", json={"username": "alice", "password": PASSWORD}).status_code == 200


def test_password_change_ends_other_sessions_and_keeps_this_one(papp):
    first = papp.test_client()
    csrf = setup_admin(first)
    other = papp.test_client()
    login(other, "alice")
    wrong = first.post(
        "/api/auth/password",
        json={"current_password": "not it!", "new_password": "new password 1"},
        headers={CSRF: csrf},
    )
    assert wrong.status_code == 403
    short = first.post(
        "/api/auth/password", json={"current_password": PASSWORD, "new_password": "x"}, headers={CSRF: csrf}
    )
    assert short.status_code == 400
    changed = first.post(
        "/api/auth/password",
        json={"current_password": PASSWORD, "new_password": "new password 1"},
        headers={CSRF: csrf},
    )
    assert changed.status_code == 200
    assert first.get("/api/sessions").status_code == 200
    assert other.get("/api/sessions").status_code == 401
    fresh = papp.test_client()
    assert fresh.post("/api/auth/login", json={"username": "alice", "password": PASSWORD}).status_code == 401
    login(fresh, "alice", "new password 1")


def test_logout_everywhere_ends_every_session(papp):
    one, two = papp.test_client(), papp.test_client()
    csrf = setup_admin(one)
    login(two, "alice")
    assert one.post("/api/auth/logout", json={"everywhere": True}, headers={CSRF: csrf}).status_code == 200
    assert two.get("/api/sessions").status_code == 401


def test_cookie_survives_restart_but_not_a_forged_signature(make_app):
    app = make_app()
    client = app.test_client()
    setup_admin(client)
    cookie = client.get_cookie("odysseus_session").value
    restarted = make_app().test_client()  # same data dir: the persisted secret signs the same way
    restarted.set_cookie("odysseus_session", cookie)
    assert restarted.get("/api/sessions").status_code == 200
    user = app.extensions["odysseus.store"].users.by_username("alice")
    forger = Flask("forger")
    forger.config["SECRET_KEY"] = "not the real secret"
    forged = forger.session_interface.get_signing_serializer(forger).dumps(
        {"uid": user["id"], "sv": user["session_version"], "csrf": "x"}
    )
    attacker = app.test_client()
    attacker.set_cookie("odysseus_session", forged)
    assert attacker.get("/api/sessions").status_code == 401
    attacker.set_cookie("odysseus_session", cookie[:-3] + ("AAA" if not cookie.endswith("AAA") else "BBB"))
    assert attacker.get("/api/sessions").status_code == 401


def test_the_cookie_serializer_is_made_once_per_key_set_and_a_new_key_refuses_old_cookies(make_app):
    app = make_app()
    client = app.test_client()
    setup_admin(client)
    interface = app.session_interface
    made = interface.get_signing_serializer(app)
    assert client.get("/api/sessions").status_code == 200
    assert interface.get_signing_serializer(app) is made  # not rebuilt per request
    app.secret_key = "rotated"  # a new key (without the old one as a fallback): old cookies are void
    assert interface.get_signing_serializer(app) is not made
    assert client.get("/api/sessions").status_code == 401
    app.config["SECRET_KEY_FALLBACKS"] = [made.secret_keys[-1]]  # the old key kept as a fallback
    assert client.get("/api/sessions").status_code == 200


# ---------------------------------------------------------------- tokens
def test_token_shown_once_stored_hashed_usable_and_revocable(papp):
    client = papp.test_client()
    csrf = setup_admin(client)
    created = client.post("/api/auth/tokens", json={"name": "script"}, headers={CSRF: csrf})
    assert created.status_code == 201
    token = created.json["token"]
    listed = client.get("/api/auth/tokens").json["tokens"]
    assert [t["id"] for t in listed] == [created.json["id"]] and "token" not in listed[0]
    with papp.extensions["odysseus.store"].locked.read() as db:
        rows = list(db["api_tokens"].rows)
    assert rows[0]["token_hash"] == hashlib.sha256(token.encode()).hexdigest()
    assert all(token not in str(value) for value in rows[0].values())
    bearer = papp.test_client()
    auth = {"Authorization": f"Bearer {token}"}
    assert bearer.post("/api/sessions", json={"title": "from a script"}, headers=auth).status_code == 201
    assert bearer.post("/api/auth/tokens", json={}, headers=auth).status_code == 403  # tokens cannot mint tokens
    assert client.delete(f"/api/auth/tokens/{created.json['id']}", headers={CSRF: csrf}).status_code == 200
    assert bearer.get("/api/sessions", headers=auth).status_code == 401
    assert client.get("/api/auth/tokens").json["tokens"] == []


def test_revoking_someone_elses_token_is_404(papp):
    alice = papp.test_client()
    alice_csrf = setup_admin(alice)
    add_user(papp, "bob")
    bob = papp.test_client()
    bob_csrf = login(bob, "bob")
    token = bob.post("/api/auth/tokens", json={"name": "b"}, headers={CSRF: bob_csrf}).json
    assert alice.delete(f"/api/auth/tokens/{token['id']}", headers={CSRF: alice_csrf}).status_code == 404
    assert (
        papp.test_client().get("/api/sessions", headers={"Authorization": f"Bearer {token['token']}"}).status_code
        == 200
    )


# ---------------------------------------------------------------- cross-site writes
@pytest.mark.parametrize(
    "headers,expected",
    [
        ({"Origin": "http://evil.example"}, 403),
        ({"Referer": "http://evil.example/page"}, 403),
        ({"Origin": "null"}, 403),
        ({}, 403),  # a cookie write with neither Origin nor the CSRF header
        ({"Origin": "http://localhost"}, 201),
        ({"Referer": "http://localhost/chat"}, 201),
        ({CSRF: "wrong"}, 403),
        ("csrf", 201),
        ({"Origin": "https://chat.example.org"}, 201),  # listed in ALLOWED_ORIGINS
    ],
)
def test_cookie_writes_need_our_origin_or_the_csrf_header(make_app, headers, expected):
    app = make_app(ALLOWED_ORIGINS="https://chat.example.org")
    client = app.test_client()
    csrf = setup_admin(client)
    if headers == "csrf":
        headers = {CSRF: csrf}
    response = client.post("/api/sessions", json={"title": "t"}, headers=headers)
    assert response.status_code == expected, response.json
    assert len(client.get("/api/sessions").json["sessions"]) == (1 if expected == 201 else 0)


def test_login_from_a_foreign_origin_is_refused(papp):
    setup_admin(papp.test_client())
    response = papp.test_client().post(
        "/api/auth/login", json={"username": "alice", "password": PASSWORD}, headers={"Origin": "http://evil.example"}
    )
    assert response.status_code == 403 and "Set-Cookie" not in response.headers


def test_bearer_requests_are_exempt_from_origin_checks(papp):
    client = papp.test_client()
    csrf = setup_admin(client)
    token = client.post("/api/auth/tokens", json={}, headers={CSRF: csrf}).json["token"]
    response = papp.test_client().post(
        "/api/sessions", json={}, headers={"Authorization": f"Bearer {token}", "Origin": "http://elsewhere.example"}
    )
    assert response.status_code == 201


# ---------------------------------------------------------------- sign-up and admin
def test_signup_is_off_until_the_admin_allows_it(papp):
    admin = papp.test_client()
    csrf = setup_admin(admin)
    visitor = papp.test_client()
    assert visitor.post("/api/auth/signup", json={"username": "bob", "password": PASSWORD}).status_code == 403
    assert admin.post("/api/auth/settings", json={"allow_signup": True}, headers={CSRF: csrf}).json == {
        "allow_signup": True
    }
    created = visitor.post("/api/auth/signup", json={"username": "bob", "password": PASSWORD})
    assert created.status_code == 201 and created.json["user"]["is_admin"] is False
    taken = papp.test_client().post("/api/auth/signup", json={"username": "bob", "password": PASSWORD})
    assert taken.status_code == 409
    bob_csrf = created.json["csrf_token"]
    assert visitor.get("/api/auth/users").status_code == 403
    assert visitor.post("/api/auth/settings", json={"allow_signup": False}, headers={CSRF: bob_csrf}).status_code == 403
    assert [u["username"] for u in admin.get("/api/auth/users").json["users"]] == ["alice", "bob"]


def test_admin_creates_users(papp):
    admin = papp.test_client()
    csrf = setup_admin(admin)
    made = admin.post(
        "/api/auth/users", json={"username": "carol", "password": PASSWORD, "is_admin": True}, headers={CSRF: csrf}
    )
    assert made.status_code == 201 and made.json["is_admin"] is True and "password_hash" not in made.json
    login(papp.test_client(), "carol")


def test_login_and_setup_pages_render(papp):
    client = papp.test_client()
    page = client.get("/setup")
    assert page.status_code == 200 and b"/api/auth/setup" in page.data and b"js/auth." in page.data
    setup_admin(client)
    page = papp.test_client().get("/login?next=/chat")
    assert page.status_code == 200 and b'data-next="/chat"' in page.data
    assert b'data-next="/"' in papp.test_client().get("/login?next=//evil.example").data
    assert papp.test_client().get("/static/js/auth.js").status_code == 200
    assert client.get("/login?next=/chat").headers["Location"] == "/chat"  # already signed in


# ---------------------------------------------------------------- single-user mode
def test_single_user_mode_serves_the_implicit_owner(app):
    client = app.test_client()
    status = client.get("/api/auth/status").json
    assert status["mode"] == "none" and status["signed_in"] is True and status["via"] == "none"
    assert client.post("/api/sessions", json={"title": "mine"}).status_code == 201
    assert client.get("/api/sessions").json["sessions"][0]["owner"] == app.config["LOCAL_OWNER"]
    assert client.post("/api/sessions", json={}, headers={"Origin": "http://evil.example"}).status_code == 403
    rebinding = client.get("/api/sessions", headers={"Host": "attacker.example:5000"})
    assert rebinding.status_code == 403  # DNS rebinding: a foreign host name never reaches the data


def test_the_implicit_caller_is_one_read_of_the_oldest_admin_and_their_row(make_app):
    """[issue 22] AUTH=none resolves owner and account row in one statement, as implicit_owner + users.get did."""
    app = make_app(AUTH="none")
    accounts, users = app.extensions["odysseus.accounts"], app.extensions["odysseus.store"].users
    local = app.config["LOCAL_OWNER"]
    assert accounts.implicit_caller() == (local, None)  # no account yet
    users.create("bob", "x")  # not an admin: still the implicit owner
    assert accounts.implicit_caller() == (local, None)
    first = users.create("alice", "x", is_admin=True)
    users.create("zed", "x", is_admin=True)
    owner, row = accounts.implicit_caller()
    assert owner == first["id"] == accounts.implicit_owner() and row == users.get(first["id"])
    assert app.test_client().get("/api/auth/status").json["signed_in"] is True


@pytest.mark.slow  # measured 1.2 s
def test_first_account_adopts_single_user_data(make_app):
    single = make_app(AUTH="none")
    single.test_client().post("/api/sessions", json={"title": "before accounts"})
    app = make_app()
    client = app.test_client()
    setup_admin(client)
    assert [s["title"] for s in client.get("/api/sessions").json["sessions"]] == ["before accounts"]
    again = make_app(AUTH="none").test_client()  # back to single-user: the admin's chats
    assert [s["title"] for s in again.get("/api/sessions").json["sessions"]] == ["before accounts"]
    # a straggler saved under the single-user owner later (a run that was still going) is adopted at start-up
    app.extensions["odysseus.store"].sessions.create(app.config["LOCAL_OWNER"], "straggler")
    restarted = make_app().test_client()
    login(restarted, "alice")
    assert sorted(s["title"] for s in restarted.get("/api/sessions").json["sessions"]) == [
        "before accounts",
        "straggler",
    ]


def test_single_user_mode_refused_on_a_public_host(tmp_path, monkeypatch):
    monkeypatch.setenv("HOST", "0.0.0.0")
    with pytest.raises(OdysseusError, match="not a loopback address"):
        create_app({"DATA_DIR": str(tmp_path), "PROVIDERS": [], "AUTH": "none"})
    forced = create_app({"DATA_DIR": str(tmp_path), "PROVIDERS": [], "AUTH": "none", "AUTH_FORCE": True})
    forced.extensions["odysseus.runs"].close()


def test_unknown_auth_mode_is_refused(tmp_path):
    with pytest.raises(OdysseusError, match="ODYSSEUS_AUTH"):
        create_app({"DATA_DIR": str(tmp_path), "PROVIDERS": [], "AUTH": "maybe"})


# ---------------------------------------------------------------- command line
def run_cli(monkeypatch, tmp_path, argv, stdin=""):
    monkeypatch.setenv("ODYSSEUS_DATA_DIR", str(tmp_path))
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    return cli.main(argv)


@pytest.mark.slow  # measured 1.2 s: CLI subprocesses
def test_cli_create_user_first_is_admin(tmp_path, monkeypatch, capsys):
    assert run_cli(monkeypatch, tmp_path, ["create-user", "Root", "--password-stdin"], PASSWORD + "\n") == 0
    assert run_cli(monkeypatch, tmp_path, ["create-user", "bob", "--password-stdin"], PASSWORD + "\n") == 0
    assert run_cli(monkeypatch, tmp_path, ["create-user", "bob", "--password-stdin"], PASSWORD + "\n") == 1
    assert run_cli(monkeypatch, tmp_path, ["create-user", "eve", "--password-stdin"], "short\n") == 1
    out = capsys.readouterr()
    assert "created admin root" in out.out and "created user bob" in out.out and "taken" in out.err
    app = create_app({"DATA_DIR": str(tmp_path), "PROVIDERS": [], "AUTH": "password"})
    try:
        login(app.test_client(), "root")
        assert (
            app.test_client().post("/api/auth/setup", json={"username": "x", "password": PASSWORD}).status_code == 409
        )
    finally:
        app.extensions["odysseus.runs"].close()
    assert run_cli(monkeypatch, tmp_path, ["reset-password", "bob", "--password-stdin"], "another one 2\n") == 0


def test_cli_serve_refuses_single_user_on_a_public_host(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ODYSSEUS_AUTH", "none")
    monkeypatch.setenv("HOST", "127.0.0.1")  # serve() writes HOST; monkeypatch restores it afterwards
    monkeypatch.setenv("PORT", "5000")
    monkeypatch.setattr(os, "execv", lambda *a: pytest.fail("serve must not start gunicorn"))
    assert run_cli(monkeypatch, tmp_path, ["serve", "--host", "0.0.0.0"]) == 2
    assert "not a loopback address" in capsys.readouterr().err
