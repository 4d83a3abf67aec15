"""Numbers and nesting from requests: ASCII digits within bounds, else a 400 JSON error (never a 500 or a guess).

``str.isdigit`` and ``int`` accept ``²`` and ``٣``; a 20-digit offset overflows SQLite;
``json.loads`` raises RecursionError on a body nested 100,000 deep.
"""

from __future__ import annotations

import pytest
from apphelpers import close_app

from odysseus import create_app

UNICODE_DIGITS = ["%C2%B2", "%D9%A3", "%EF%BC%95", "%E0%A5%AA"]  # ², ٣ (Arabic-Indic), ５ (fullwidth), ४ (Devanagari)
NOT_NUMBERS = UNICODE_DIGITS + [
    "99999999999999999999",
    "-1",
    "+5",
    "1.5",
    "1e3",
    "%205",
    "5%20",
    "0x10",
    "1_000",
    "%0A5",
    "abc",
]
DEEP = 100_000


def _counts(app):
    db = app.extensions["odysseus.store"].db
    return tuple(db.execute(f"select count(*) from {t}").fetchone()[0] for t in ("sessions", "messages", "runs"))


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    """One app for the module: every test here sends a rejected request (or counts its own rows), so they
    need no fresh database each, and 180 app start-ups were a quarter of the fast test set."""
    application = create_app(
        {
            "DATA_DIR": str(tmp_path_factory.mktemp("numeric")),
            "DEMO_TOKEN_DELAY": 0.001,
            "PROVIDERS": [],
            "AUTH": "none",
        }
    )
    yield application
    close_app(application)


@pytest.fixture
def fresh_app(tmp_path):
    """An app on an empty database, for a test that needs message ids to start at 1."""
    application = create_app({"DATA_DIR": str(tmp_path), "PROVIDERS": [], "AUTH": "none"})
    yield application
    close_app(application)


@pytest.fixture
def session_id(app):
    return app.extensions["odysseus.store"].sessions.create("local")["id"]


def _assert_400(response, *fragments):
    assert response.status_code == 400, (response.status_code, response.data[:300])
    error = response.get_json()["error"]
    assert all(f in error for f in fragments), error


@pytest.mark.parametrize("value", NOT_NUMBERS)
def test_resume_cursor(client, session_id, value):
    _assert_400(client.get(f"/api/chat/resume/{session_id}?after={value}"), "cursor")


@pytest.mark.parametrize("value", NOT_NUMBERS)
def test_attach_cursor(client, value):
    _assert_400(client.get(f"/api/agent/chat/stream/attach?run_id=r_x&after={value}"), "cursor")


@pytest.mark.parametrize("header", ["\u00b2", "\u00d9\u00a3", "99999999999999999999", "-3", "1.0", "9007199254740992"])
def test_last_event_id_header(client, session_id, header):
    _assert_400(client.get(f"/api/chat/resume/{session_id}", headers={"Last-Event-ID": header}), "cursor")


@pytest.mark.parametrize("path", ["/api/sessions", "/api/agent/chat/runs", "/api/chat/background"])
@pytest.mark.parametrize("name", ["limit", "offset"])
@pytest.mark.parametrize("value", NOT_NUMBERS)
def test_page_arguments(client, path, name, value):
    _assert_400(client.get(f"{path}?{name}={value}"), name)


@pytest.mark.parametrize("name", ["limit", "before"])
@pytest.mark.parametrize("value", NOT_NUMBERS + ["0"])
def test_message_page_arguments(client, session_id, name, value):
    _assert_400(client.get(f"/api/sessions/{session_id}/messages?{name}={value}"), name)


def test_limits_over_the_maximum(client, session_id):
    _assert_400(client.get("/api/sessions?limit=501"), "limit")
    _assert_400(client.get(f"/api/sessions/{session_id}/messages?limit=1001"), "limit")
    _assert_400(client.get("/api/sessions?offset=1000000001"), "offset")
    assert client.get("/api/sessions?limit=500&offset=1000000000").status_code == 200


@pytest.mark.parametrize("value", ["\u0663", "\u00b2"])
def test_unicode_digits_in_a_message_id_are_not_that_message(fresh_app, value):
    store, client = fresh_app.extensions["odysseus.store"], fresh_app.test_client()
    session_id = store.sessions.create("local")["id"]
    ids = [store.messages.add("local", session_id, "user", f"m{i}") for i in range(4)]
    target = int(value) if value.isdecimal() else 2
    assert target in ids
    assert client.delete(f"/api/messages/{value}").status_code == 404
    assert client.patch(f"/api/messages/{value}", json={"content": "x"}).status_code == 404
    assert store.messages.get("local", target)["content"] == f"m{target - 1}"


@pytest.mark.parametrize(
    "path",
    [
        "/api/chat_stream",
        "/api/sessions",
        "/api/agent/chat/stream",
        "/api/chat/background",
        "/api/agent/profiles",
        "/api/auth/login",
    ],
)
@pytest.mark.parametrize("shape", ["array", "object"])
def test_json_nested_100000_deep(app, client, path, shape):
    before = _counts(app)
    raw = "[" * DEEP + "]" * DEEP if shape == "array" else '{"a":' * DEEP + "1" + "}" * DEEP
    if path != "/api/sessions":
        raw = '{"message": "hi", "x": ' + raw + "}"
    _assert_400(client.post(path, data=raw, content_type="application/json"), "nested")
    assert _counts(app) == before


def test_json_nested_past_our_limit_but_under_pythons(app, client):
    raw = '{"message": "hi", "x": ' + "[" * 65 + "]" * 65 + "}"
    _assert_400(client.post("/api/chat_stream", data=raw, content_type="application/json"), "nested")
    ok = '{"title": "t", "x": ' + "[" * 60 + "]" * 60 + "}"
    assert client.post("/api/sessions", data=ok, content_type="application/json").status_code == 201


def test_stop_with_a_deep_body(client, session_id):
    raw = "[" * DEEP + "]" * DEEP
    _assert_400(client.post(f"/api/chat/stop/{session_id}", data=raw, content_type="application/json"), "nested")


@pytest.mark.parametrize(
    "body, content_type",
    [
        ('{"message": "hi", "temperature": 1' + "0" * 400 + "}", "application/json"),
        ('{"message": "hi", "temperature": NaN}', "application/json"),
        ('{"message": "hi", "temperature": Infinity}', "application/json"),
        ("message=hi&temperature=%D9%A1", "application/x-www-form-urlencoded"),
        ("message=hi&temperature=nan", "application/x-www-form-urlencoded"),
        ("message=hi&temperature=1e0", "application/x-www-form-urlencoded"),
        ("message=hi&temperature=%201", "application/x-www-form-urlencoded"),
    ],
)
def test_temperature(app, client, body, content_type):
    before = _counts(app)
    _assert_400(client.post("/api/chat_stream", data=body, content_type=content_type), "temperature")
    assert _counts(app) == before


def test_ascii_numbers_still_work(client, session_id):
    assert client.get(f"/api/sessions/{session_id}/messages?limit=5&before=10").status_code == 200
    assert client.get("/api/sessions?limit=5&offset=0").status_code == 200
    assert client.get("/api/agent/chat/runs?limit=5&offset=3").status_code == 200
    response = client.post(
        "/api/chat_stream",
        data="message=hi&temperature=0.5&mode=nope",
        content_type="application/x-www-form-urlencoded",
    )
    _assert_400(response, "mode")  # the temperature was fine; the mode is what is wrong
