"""A provider added through the admin API on a real gunicorn server: listed, streamed from, moved to a
second model server by an edit, gone after a delete; on the in-process backend and on Redis with two
workers (the change is made through one worker and used by whichever serves the next turn)."""

from __future__ import annotations

import pytest
import requests
from fakeproviders import FakeProvider, Reply, openai_text
from sseclient import post_chat, text_of, types_of

KEY = "sk-live-Secret-Key-5555-6666-7777-qrst"


@pytest.fixture(scope="module", params=["memory", "redis"])
def backend_env(request):
    """The in-process backend, and Redis with two workers sharing one database."""
    if request.param == "memory":
        return lambda data_dir: {}
    redis = request.getfixturevalue("redis_server")
    return lambda data_dir: redis.env(data_dir, workers=2)


def _fake(*words):
    server = FakeProvider(default=Reply(chunks=openai_text(*words), delay=0.02))
    server.get_json["/v1/models"] = {"data": [{"id": "m1"}]}
    return server


def test_added_provider_streams_moves_and_goes_away(server_factory):
    first, second = _fake("One", " two", " three"), _fake("Second", " server")
    try:
        server = server_factory(env={"ODYSSEUS_AUTH": "password"})
        admin = requests.Session()
        admin.headers["Origin"] = server.url
        assert (
            admin.post(
                server.url + "/api/auth/setup", json={"username": "root", "password": "root-pass-1"}, timeout=10
            ).status_code
            == 201
        )
        token = admin.post(server.url + "/api/auth/tokens", json={"name": "t"}, timeout=10).json()["token"]
        bearer = {"Authorization": f"Bearer {token}"}
        assert "lab/m1" not in {
            m["id"] for m in requests.get(server.url + "/api/models", headers=bearer, timeout=20).json()["models"]
        }
        made = admin.post(
            server.url + "/api/admin/providers",
            timeout=10,
            json={
                "name": "lab",
                "kind": "openai",
                "base_url": first.url + "/v1",
                "api_key": KEY,
                "default_model": "m1",
            },
        )
        assert made.status_code == 201, made.text
        provider_id = made.json()["id"]
        for _ in range(3):  # with two workers, whichever answers knows the new provider
            listing = requests.get(server.url + "/api/models", headers=bearer, timeout=20).json()
            assert "lab/m1" in {m["id"] for m in listing["models"]}
            frames = post_chat(server.url, "hello", headers=bearer, model="lab/m1").events()
            assert types_of(frames).count("delta") == 3 and text_of(frames) == "One two three", types_of(frames)
        assert len(first.posts) == 3 and first.posts[-1].headers["Authorization"] == f"Bearer {KEY}"

        # a new base_url needs the key entered again: the stored one never goes to another server (issue 38)
        kept_key = admin.patch(
            f"{server.url}/api/admin/providers/{provider_id}", json={"base_url": second.url + "/v1"}, timeout=10
        )
        assert kept_key.status_code == 400 and second.posts == []
        moved = admin.patch(
            f"{server.url}/api/admin/providers/{provider_id}",
            json={"base_url": second.url + "/v1", "api_key": KEY},
            timeout=10,
        )
        assert moved.status_code == 200 and moved.json()["api_key_last4"] == "qrst"
        for _ in range(3):
            frames = post_chat(server.url, "again", headers=bearer, model="lab/m1").events()
            assert text_of(frames) == "Second server"
        assert len(first.posts) == 3 and len(second.posts) == 3
        assert second.posts[-1].headers["Authorization"] == f"Bearer {KEY}"  # the key entered again

        assert admin.delete(f"{server.url}/api/admin/providers/{provider_id}", timeout=10).status_code == 200
        for _ in range(3):
            gone = requests.post(
                server.url + "/api/chat_stream", json={"message": "x", "model": "lab/m1"}, headers=bearer, timeout=20
            )
            assert gone.status_code == 404 and "lab" in gone.json()["error"]
            listing = requests.get(server.url + "/api/models", headers=bearer, timeout=20).json()
            assert not any(m["provider"] == "lab" for m in listing["models"])
        assert len(second.posts) == 3
        assert KEY not in server.logs() and KEY[:-4] not in server.logs()
    finally:
        first.close()
        second.close()
