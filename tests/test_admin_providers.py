"""The admin's provider connections (issue 20, settings): CRUD, hostile input, keys never returned,
admin-only, config providers read-only, "send one token" against real local model servers, and the
provider set other app instances on the same database pick up."""

from __future__ import annotations

import json
import logging

import pytest
from apphelpers import Recorder, close_app
from fakeproviders import FakeProvider, Reply, openai_text, refused_url

from odysseus import create_app
from odysseus.errors import NotFound
from odysseus.llm.base import ProviderConfig
from odysseus.llm.connections import probe, to_config

H = {"Origin": "http://localhost"}
KEY = "sk-test-Very-Secret-Key-0123456789-abcd"
CONFIG_KEY = "sk-config-Secret-9876543210-WXYZ"


@pytest.fixture
def model_server():
    server = FakeProvider(default=Reply(chunks=openai_text("Hello", " from", " the lab")))
    server.get_json["/v1/models"] = {"data": [{"id": "m1"}, {"id": "m2"}]}
    yield server
    server.close()


def _make_app(tmp_path, config_url):
    return create_app(
        {
            "DATA_DIR": str(tmp_path),
            "AUTH": "password",
            "DEMO_TOKEN_DELAY": 0.001,
            "LOGIN_FREE_FAILURES": 1000,
            "LOGIN_FREE_FAILURES_ADDRESS": 1000,
            "PROVIDERS": [
                ProviderConfig(name="cfgprov", kind="openai", base_url=config_url, api_key=CONFIG_KEY, models=["fixed"])
            ],
        }
    )


def _accounts(app):
    anon = app.test_client()
    anon.post("/api/auth/setup", json={"username": "root", "password": "root-pass-1"}, headers=H)
    admin = app.test_client()
    assert (
        admin.post("/api/auth/login", json={"username": "root", "password": "root-pass-1"}, headers=H).status_code
        == 200
    )
    admin.post("/api/auth/users", json={"username": "bob", "password": "bob-pass-1"}, headers=H)
    bob = app.test_client()
    assert bob.post("/api/auth/login", json={"username": "bob", "password": "bob-pass-1"}, headers=H).status_code == 200
    return app, Recorder(admin), Recorder(bob)


@pytest.fixture
def setup(tmp_path, model_server):
    app = _make_app(tmp_path, refused_url() + "/v1")
    yield _accounts(app)
    close_app(app)


@pytest.fixture(scope="module")
def shared_app(tmp_path_factory):
    """One app (and its two accounts) for the many hostile-input cases: each leaves no connection behind."""
    app = _make_app(tmp_path_factory.mktemp("hostile"), refused_url() + "/v1")
    yield _accounts(app)
    close_app(app)


def _chat(client, model):
    response = client.post("/api/chat_stream", json={"message": "hi", "model": model}, headers=H)
    return response.status_code, response.get_data(as_text=True)


def _deltas(stream_text):
    text = ""
    for line in stream_text.splitlines():
        if line.startswith("data: {"):
            text += json.loads(line[6:]).get("delta", "")
    return text


def test_crud_routes_turns_and_never_returns_the_key(setup, model_server, caplog):
    caplog.set_level(logging.DEBUG)
    app, admin, bob = setup
    made = admin.post(
        "/api/admin/providers",
        json={
            "name": "lab",
            "kind": "openai",
            "base_url": model_server.url + "/v1",
            "api_key": KEY,
            "default_model": "m1",
        },
    )
    assert made.status_code == 201, made.get_json()
    row = made.get_json()
    assert row["api_key_last4"] == "abcd" and row["api_key_set"] and "api_key" not in row
    assert row["source"] == "database" and row["read_only"] is False and row["id"].startswith("prov_")

    listing = admin.get("/api/admin/providers").get_json()["providers"]
    assert [(p["name"], p["source"], p["read_only"]) for p in listing] == [
        ("cfgprov", "config", True),
        ("lab", "database", False),
    ]
    assert listing[0]["api_key_last4"] == "WXYZ" and listing[0]["id"] == "config:cfgprov"

    models = admin.get("/api/models").get_json()
    assert {"lab/m1", "lab/m2"} <= {m["id"] for m in models["models"]}
    assert "cfgprov/fixed" in {m["id"] for m in models["models"]}

    status, text = _chat(admin, "lab/m1")
    assert status == 200 and _deltas(text) == "Hello from the lab"
    post = model_server.posts[-1]
    assert post.body["model"] == "m1" and post.headers["Authorization"] == f"Bearer {KEY}"
    _chat(bob, "lab/m2")  # every user's turns may use it
    assert model_server.posts[-1].body["model"] == "m2"

    # an edit without api_key keeps the key; "" clears it
    edited = admin.patch(f"/api/admin/providers/{row['id']}", json={"default_model": "m2", "name": "lab2"})
    assert edited.status_code == 200 and edited.get_json()["api_key_last4"] == "abcd"
    assert _chat(admin, "lab/m1")[0] == 404  # the old name is gone at once
    _chat(admin, "lab2/m1")
    assert model_server.posts[-1].headers["Authorization"] == f"Bearer {KEY}"
    cleared = admin.patch(f"/api/admin/providers/{row['id']}", json={"api_key": ""}).get_json()
    assert cleared["api_key_set"] is False and cleared["api_key_last4"] is None
    _chat(admin, "lab2/m1")
    assert "Authorization" not in model_server.posts[-1].headers
    admin.patch(f"/api/admin/providers/{row['id']}", json={"api_key": KEY})

    # disabled: not offered; enabled again: back
    admin.patch(f"/api/admin/providers/{row['id']}", json={"enabled": False})
    assert "lab2/m1" not in {m["id"] for m in admin.get("/api/models").get_json()["models"]}
    admin.patch(f"/api/admin/providers/{row['id']}", json={"enabled": True})
    assert "lab2/m1" in {m["id"] for m in admin.get("/api/models").get_json()["models"]}

    assert admin.delete(f"/api/admin/providers/{row['id']}").status_code == 200
    status, text = _chat(admin, "lab2/m1")
    assert status == 404 and "unknown model" in json.loads(text)["error"]
    assert [p["name"] for p in admin.get("/api/admin/providers").get_json()["providers"]] == ["cfgprov"]
    assert admin.delete(f"/api/admin/providers/{row['id']}").status_code == 404
    assert not any(m["provider"] == "lab2" for m in admin.get("/api/models").get_json()["models"])

    admin.assert_never(KEY)
    admin.assert_never(CONFIG_KEY)
    bob.assert_never(KEY)
    assert KEY not in caplog.text and CONFIG_KEY not in caplog.text
    assert KEY not in json.dumps(admin.get("/api/openapi.json").get_json())


GOOD = {"name": "ok-name", "kind": "openai", "base_url": "http://127.0.0.1:9/v1", "api_key": KEY}
BAD = [
    {"name": ""},
    {"name": "a" * 65},
    {"name": "../etc"},
    {"name": "a/b"},
    {"name": "<script>x</script>"},
    {"name": "naïve"},
    {"name": "demo"},
    {"name": " lab"},
    {"name": 12},
    {"name": None},
    {"name": "-x"},
    {"name": "a\u0000b"},
    {"kind": "demo"},
    {"kind": "OpenAI"},
    {"kind": ""},
    {"kind": None},
    {"kind": ["openai"]},
    {"base_url": "javascript:alert(1)"},
    {"base_url": "file:///etc/passwd"},
    {"base_url": "ftp://host/v1"},
    {"base_url": "http://"},
    {"base_url": "http://user:pw@host/v1"},
    {"base_url": "http://h/\r\nX-Evil: 1"},
    {"base_url": "http://h:99999/"},
    {"base_url": "http://h/v1 x"},
    {"base_url": 5},
    {"base_url": "http://h/" + "a" * 3000},
    {"base_url": "//host/v1"},
    {"base_url": "http://h/v1?key=1"},
    {"api_key": "k" * 4097},
    {"api_key": "key with space"},
    {"api_key": "k\r\nX-Evil: 1"},
    {"api_key": "ключ"},
    {"api_key": 42},
    {"api_key": "k\x00"},
    {"models": "m1"},
    {"models": [1]},
    {"models": ["a" * 201]},
    {"models": [f"m{i}" for i in range(201)]},
    {"models": [""]},
    {"default_model": "m\x07"},
    {"default_model": 3},
    {"enabled": "yes"},
]


@pytest.mark.parametrize("change", BAD, ids=[json.dumps(c, ensure_ascii=True)[:40] for c in BAD])
def test_hostile_input_is_refused_and_stores_nothing(shared_app, change):
    app, admin, _ = shared_app
    store = app.extensions["odysseus.store"]
    before = store.provider_connections.version()
    response = admin.post("/api/admin/providers", json={**GOOD, **change})
    assert response.status_code == 400, response.get_json()
    assert isinstance(response.get_json()["error"], str)
    assert store.provider_connections.list() == [] and store.provider_connections.version() == before
    # the same value in an edit of a stored one changes nothing either
    saved = admin.post("/api/admin/providers", json=GOOD).get_json()
    version = store.provider_connections.version()
    assert admin.patch(f"/api/admin/providers/{saved['id']}", json=change).status_code == 400
    assert store.provider_connections.version() == version
    assert store.provider_connections.get(saved["id"])["name"] == "ok-name"
    assert admin.delete(f"/api/admin/providers/{saved['id']}").status_code == 200
    admin.assert_never(KEY)


def test_odd_bodies(setup):
    app, admin, _ = setup
    assert (
        admin.post(
            "/api/admin/providers", data=b"\xff\xfe not json", headers={**H, "Content-Type": "application/json"}
        ).status_code
        == 400
    )
    assert admin.post("/api/admin/providers", json=["a"]).status_code == 400
    huge = admin.post("/api/admin/providers", json={**GOOD, "padding": "x" * 70_000})
    assert huge.status_code == 413 and "error" in huge.get_json()
    lone = admin.post(
        "/api/admin/providers",
        data='{"name": "x\\ud800", "kind": "openai"}',
        headers={**H, "Content-Type": "application/json"},
    )
    assert lone.status_code == 400
    saved = admin.post("/api/admin/providers", json=GOOD).get_json()
    assert admin.patch(f"/api/admin/providers/{saved['id']}", json={}).status_code == 400
    assert app.extensions["odysseus.store"].provider_connections.list()[0]["api_key"] == KEY


def test_admin_only_unknown_ids_and_read_only_config(setup, model_server):
    app, admin, bob = setup
    saved = admin.post("/api/admin/providers", json=GOOD).get_json()
    path = f"/api/admin/providers/{saved['id']}"
    for method, url, body in [
        ("get", "/api/admin/providers", None),
        ("post", "/api/admin/providers", GOOD),
        ("patch", path, {"name": "mine"}),
        ("delete", path, None),
        ("post", path + "/test", {}),
        ("post", "/api/admin/providers/test", GOOD),
    ]:
        response = getattr(bob, method)(url, json=body) if body is not None else getattr(bob, method)(url)
        assert response.status_code == 403 and "admin" in response.get_json()["error"], (method, url)
    anon = app.test_client()
    assert anon.get("/api/admin/providers").status_code == 401
    assert app.extensions["odysseus.store"].provider_connections.get(saved["id"])["name"] == "ok-name"
    for unknown in ("prov_nope", "prov_" + "A" * 22, "%00", "config:nope"):
        assert admin.patch(f"/api/admin/providers/{unknown}", json={"name": "x1"}).status_code == 404
        assert admin.delete(f"/api/admin/providers/{unknown}").status_code == 404
        assert admin.post(f"/api/admin/providers/{unknown}/test", json={}).status_code == 404
    for config_id in ("config:cfgprov", "cfgprov"):
        assert admin.patch(f"/api/admin/providers/{config_id}", json={"name": "x1"}).status_code == 409
        assert admin.delete(f"/api/admin/providers/{config_id}").status_code == 409
    # names are unique across both sources, in any case
    assert admin.post("/api/admin/providers", json={**GOOD, "name": "CfgProv"}).status_code == 409
    assert admin.post("/api/admin/providers", json={**GOOD, "name": "OK-NAME"}).status_code == 409
    assert admin.patch(path, json={"name": "cfgprov"}).status_code == 409
    assert len(app.extensions["odysseus.store"].provider_connections.list()) == 1
    admin.assert_never(KEY)
    bob.assert_never(KEY)


def test_send_one_token(setup, model_server):
    app, admin, _ = setup
    saved = admin.post(
        "/api/admin/providers",
        json={"name": "lab", "kind": "openai", "base_url": model_server.url + "/v1", "api_key": KEY},
    ).get_json()
    result = admin.post(f"/api/admin/providers/{saved['id']}/test", json={}).get_json()
    assert result["ok"] is True and result["model"] == "m1" and isinstance(result["latency_ms"], int)
    assert model_server.posts[-1].body["max_tokens"] == 1
    assert model_server.posts[-1].headers["Authorization"] == f"Bearer {KEY}"
    assert admin.post(f"/api/admin/providers/{saved['id']}/test", json={"model": "m2"}).get_json()["model"] == "m2"
    # unsaved form values; a saved id fills in the key left blank
    unsaved = admin.post(
        "/api/admin/providers/test",
        json={"kind": "openai", "base_url": model_server.url + "/v1", "default_model": "m2", "id": saved["id"]},
    ).get_json()
    assert unsaved["ok"] is True and unsaved["model"] == "m2"
    assert model_server.posts[-1].headers["Authorization"] == f"Bearer {KEY}"
    refused = admin.post(
        "/api/admin/providers/test",
        json={"kind": "openai", "base_url": refused_url() + "/v1", "default_model": "m1", "api_key": KEY},
    ).get_json()
    assert refused["ok"] is False and "connection refused" in refused["error"]
    # the config provider (pointing at a closed port) can be tested too
    config = admin.post("/api/admin/providers/config:cfgprov/test", json={}).get_json()
    assert config["ok"] is False and "connection refused" in config["error"]
    assert admin.post("/api/admin/providers/test", json={"kind": "nope"}).status_code == 400
    with FakeProvider(
        default=Reply(status=401, body={"error": {"message": f"Incorrect API key provided: {KEY}"}})
    ) as denying:
        denied = admin.post(
            "/api/admin/providers/test",
            json={"kind": "openai", "base_url": denying.url + "/v1", "default_model": "m1", "api_key": KEY},
        ).get_json()
    assert denied["ok"] is False and "refused the key (HTTP 401)" in denied["error"] and "…abcd" in denied["error"]
    assert app.extensions["odysseus.store"].provider_connections.list()[0]["name"] == "lab"  # nothing new stored
    admin.assert_never(KEY)


@pytest.mark.parametrize("kind,chunks,path", [("ollama", None, "/api/chat"), ("anthropic", None, "/v1/messages")])
def test_probe_speaks_each_kind(kind, chunks, path):
    from fakeproviders import anthropic_text, ollama_text

    replies = {
        "ollama": Reply(chunks=ollama_text("ok"), content_type="application/x-ndjson"),
        "anthropic": Reply(chunks=anthropic_text("ok")),
    }
    with FakeProvider(default=replies[kind]) as server:
        result = probe(
            to_config({"name": "p1", "kind": kind, "base_url": server.url, "api_key": KEY, "default_model": "mod"}), {}
        )
        assert result["ok"] is True, result
        assert server.posts[-1].path == path
        sent = server.posts[-1].body
        assert (sent["options"]["num_predict"] if kind == "ollama" else sent["max_tokens"]) == 1


def test_probe_times_out_on_a_silent_server():
    with FakeProvider(default=Reply(end="silent")) as server:
        result = probe(
            to_config({"name": "p1", "kind": "openai", "base_url": server.url + "/v1", "default_model": "m"}),
            {},
            timeout=0.5,
        )
    assert result["ok"] is False and "timed out" in result["error"]


def test_other_instances_on_the_same_database_follow(tmp_path, model_server):
    """Two apps on one file (as two gunicorn workers): a change made through one reaches the other."""
    first = _make_app(tmp_path, refused_url() + "/v1")
    second = _make_app(tmp_path, refused_url() + "/v1")
    try:
        anon = first.test_client()
        anon.post("/api/auth/setup", json={"username": "root", "password": "root-pass-1"}, headers=H)
        clients = []
        for application in (first, second):
            client = application.test_client()
            client.post("/api/auth/login", json={"username": "root", "password": "root-pass-1"}, headers=H)
            clients.append(client)
        assert clients[1].get("/api/models").status_code == 200  # caches the catalog in the second app
        made = (
            clients[0]
            .post(
                "/api/admin/providers",
                headers=H,
                json={"name": "lab", "kind": "openai", "base_url": model_server.url + "/v1", "default_model": "m1"},
            )
            .get_json()
        )
        assert "lab/m1" in {m["id"] for m in clients[1].get("/api/models").get_json()["models"]}
        status, text = _chat(clients[1], "lab/m1")
        assert status == 200 and _deltas(text) == "Hello from the lab"
        old_provider = second.extensions["odysseus.router"].providers["lab"]
        clients[0].patch(f"/api/admin/providers/{made['id']}", json={"default_model": "m2"}, headers=H)
        _chat(clients[1], "lab")
        assert model_server.posts[-1].body["model"] == "m2"
        assert second.extensions["odysseus.router"].providers["lab"] is not old_provider
        clients[0].delete(f"/api/admin/providers/{made['id']}", headers=H)
        assert _chat(clients[1], "lab/m1")[0] == 404
        assert "lab/m1" not in {m["id"] for m in clients[1].get("/api/models").get_json()["models"]}
    finally:
        close_app(first)
        close_app(second)


def test_a_deleted_or_renamed_name_is_404_on_an_app_that_never_loaded_it(tmp_path, model_server):
    """A connection made and deleted (or renamed) while another worker was not looking, or before a restart:
    that worker's ``name/model`` is a 404, not the bare model handed to the one provider left; a new
    connection that takes the name again is served."""
    first = _make_app(tmp_path, model_server.url + "/v1")
    try:
        app, admin, _bob = _accounts(first)
        for name in ("gone", "old"):
            made = admin.post(
                "/api/admin/providers",
                json={"name": name, "kind": "openai", "base_url": model_server.url + "/v1", "default_model": "m1"},
            ).get_json()
            if name == "gone":
                assert admin.delete(f"/api/admin/providers/{made['id']}").status_code == 200
            else:
                assert admin.patch(f"/api/admin/providers/{made['id']}", json={"name": "new"}).status_code == 200
    finally:
        close_app(first)
    later = _make_app(tmp_path, model_server.url + "/v1")  # a restart, or a worker that never saw them
    try:
        client = later.test_client()
        client.post("/api/auth/login", json={"username": "root", "password": "root-pass-1"}, headers=H)
        posts = len(model_server.posts)
        for spec in ("gone/m1", "old/m1", "GONE/m1"):
            status, text = _chat(client, spec)
            assert status == 404 and "was removed or disabled" in json.loads(text)["error"], (spec, text)
        assert len(model_server.posts) == posts  # nothing reached the remaining provider
        assert _chat(client, "new/m1")[0] == 200
        again = client.post(
            "/api/admin/providers",
            headers=H,
            json={"name": "Gone", "kind": "openai", "base_url": model_server.url + "/v1", "default_model": "m2"},
        )
        assert again.status_code == 201
        status, text = _chat(client, "Gone/m1")
        assert status == 200 and model_server.posts[-1].body["model"] == "m1"
    finally:
        close_app(later)


def test_demo_only_without_any_provider(tmp_path, model_server):
    app = create_app({"DATA_DIR": str(tmp_path), "AUTH": "password", "PROVIDERS": [], "DEMO_TOKEN_DELAY": 0.001})
    try:
        router = app.extensions["odysseus.router"]
        assert list(router.providers) == ["demo"]
        store = app.extensions["odysseus.store"]
        assert store.provider_connections.version() == 0
        row = store.provider_connections.create(
            {"name": "lab", "kind": "openai", "base_url": model_server.url + "/v1"}, None
        )
        router.sync(force=True)
        assert list(router.providers) == ["lab"]
        unchanged = router.providers["lab"]
        router.sync(force=True)
        assert router.providers["lab"] is unchanged  # no change: same object, same connection pool
        store.provider_connections.delete(row["id"])
        router.sync(force=True)
        assert list(router.providers) == ["demo"]
        with pytest.raises(NotFound):
            router.resolve("lab/m1")
        assert router.resolve("demo/odysseus-demo")[0].provider.kind == "demo"
    finally:
        close_app(app)


def test_a_server_echoing_the_refused_key_never_gets_it_to_the_client(setup, caplog):
    """Errors carry the provider's own words; a key echoed in them is cut to its last four everywhere."""
    caplog.set_level(logging.DEBUG)
    app, admin, bob = setup
    echo = {"error": {"message": f"Incorrect API key provided: {KEY}. Or was it {KEY[:-4]}?"}}
    with FakeProvider(default=Reply(status=401, body=echo)) as denying:
        denying.get_status["/v1/models"] = (401, echo)
        admin.post(
            "/api/admin/providers",
            json={
                "name": "echo",
                "kind": "openai",
                "api_key": KEY,
                "base_url": denying.url + "/v1",
                "default_model": "m1",
            },
        )
        listing = admin.get("/api/models?refresh=1").get_json()
        failure = next(e for e in listing["errors"] if e["provider"] == "echo")
        assert failure["status"] == 401 and "…abcd" in failure["error"]
        status, text = _chat(bob, "echo/m1")
        assert status == 200 and "HTTP 401" in text and "…abcd" in text
        for probe_path in ("/api/admin/providers/test", None):
            saved_id = admin.get("/api/admin/providers").get_json()["providers"][-1]["id"]
            url = probe_path or f"/api/admin/providers/{saved_id}/test"
            body = {"kind": "openai", "base_url": denying.url + "/v1", "api_key": KEY} if probe_path else {}
            assert admin.post(url, json=body).get_json()["ok"] is False
    sessions = bob.get("/api/sessions").get_json()["sessions"]
    assert sessions
    for session in sessions:  # the stored failure and its export too
        bob.get(f"/api/sessions/{session['id']}/messages")
        bob.get(f"/api/sessions/{session['id']}/export?format=json")
        bob.get(f"/api/chat/stream_status/{session['id']}")
    admin.assert_never(KEY)
    bob.assert_never(KEY)
    assert KEY not in caplog.text and KEY[:-4] not in caplog.text


def test_a_stored_key_is_never_sent_to_a_new_base_url(setup, model_server):
    """Test and Save with a changed base_url and no key: 400, nothing sent, nothing stored (issue 38 item 6)."""
    app, admin, _ = setup
    saved = admin.post(
        "/api/admin/providers",
        json={"name": "lab", "kind": "openai", "base_url": model_server.url + "/v1", "api_key": KEY},
    ).get_json()
    with FakeProvider(default=Reply(chunks=openai_text("stolen"))) as elsewhere:
        moved = {"kind": "openai", "base_url": elsewhere.url + "/v1", "default_model": "m1", "id": saved["id"]}
        tested = admin.post("/api/admin/providers/test", json=moved)
        assert tested.status_code == 400 and "enter the API key again" in tested.get_json()["error"]
        patched = admin.patch(f"/api/admin/providers/{saved['id']}", json={"base_url": elsewhere.url + "/v1"})
        assert patched.status_code == 400 and "enter the API key again" in patched.get_json()["error"]
        assert (
            app.extensions["odysseus.store"].provider_connections.get(saved["id"])["base_url"]
            == model_server.url + "/v1"
        )
        assert admin.post(f"/api/admin/providers/{saved['id']}/test", json={}).get_json()["ok"] is True  # still its URL
        assert elsewhere.posts == []  # the key never left for the new URL
        # with the key entered again, the move is the admin's own decision
        moved_with_key = admin.patch(
            f"/api/admin/providers/{saved['id']}", json={"base_url": elsewhere.url + "/v1", "api_key": KEY}
        )
        assert moved_with_key.status_code == 200
    # unchanged URL, other fields: the stored key stays and goes where it went before
    assert admin.patch(f"/api/admin/providers/{saved['id']}", json={"default_model": "m2"}).status_code == 200
    admin.assert_never(KEY)


def test_the_single_user_owner_manages_providers_without_an_account(tmp_path, model_server):
    """AUTH=none with no account: the owner adds, tests and removes a provider (issues 35 and 37)."""
    app = create_app({"DATA_DIR": str(tmp_path), "AUTH": "none", "PROVIDERS": []})
    try:
        owner = app.test_client()
        made = owner.post(
            "/api/admin/providers",
            json={"name": "llama", "kind": "openai", "base_url": model_server.url + "/v1", "api_key": KEY},
        )
        assert made.status_code == 201, made.get_json()
        assert owner.post(f"/api/admin/providers/{made.get_json()['id']}/test", json={}).get_json()["ok"] is True
        assert [p["name"] for p in owner.get("/api/admin/providers").get_json()["providers"]] == ["llama"]
        assert owner.delete(f"/api/admin/providers/{made.get_json()['id']}").status_code == 200
    finally:
        close_app(app)
