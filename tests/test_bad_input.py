"""Rejected input gets a clear 4xx JSON error and persists nothing."""

from __future__ import annotations

import pytest


def _counts(app):
    db = app.extensions["odysseus.store"].db
    return tuple(db.execute(f"select count(*) from {t}").fetchone()[0] for t in ("sessions", "messages", "runs"))


@pytest.mark.parametrize(
    "kwargs, status, fragment",
    [
        ({"data": "{not json", "content_type": "application/json"}, 400, "malformed JSON"),
        ({"json": ["a", "list"]}, 400, "object"),
        ({"json": {}}, 400, "message"),
        ({"json": {"message": ""}}, 400, "message"),
        ({"json": {"message": "   "}}, 400, "message"),
        ({"json": {"message": 42}}, 400, "message"),
        ({"json": {"message": "hi", "mode": "telepathy"}}, 400, "mode"),
        ({"json": {"message": "hi", "session": "s_doesnotexist"}}, 404, "session"),
        ({"json": {"message": "hi", "session_id": 12}}, 400, "session_id"),
        ({"json": {"message": "hi", "temperature": "hot"}}, 400, "temperature"),
        ({"json": {"message": "hi", "temperature": 9}}, 400, "temperature"),
        ({"json": {"message": "hi", "model": "nosuchprovider/x"}}, 404, "model"),
        ({"data": "message=hi&mode=nope", "content_type": "application/x-www-form-urlencoded"}, 400, "mode"),
        ({"data": "just text", "content_type": "text/plain"}, 400, "JSON"),
    ],
)
def test_chat_stream_rejects(app, client, kwargs, status, fragment):
    before = _counts(app)
    response = client.post("/api/chat_stream", **kwargs)
    assert response.status_code == status
    body = response.get_json()
    assert fragment.lower() in body["error"].lower()
    assert _counts(app) == before


def test_oversized_body_is_413_and_stores_nothing(tmp_path):
    from odysseus import create_app

    app = create_app({"DATA_DIR": str(tmp_path), "MAX_BODY_BYTES": 1024, "PROVIDERS": [], "AUTH": "none"})
    client = app.test_client()
    response = client.post("/api/chat_stream", json={"message": "x" * 5000})
    assert response.status_code == 413
    assert response.get_json() == {"error": "request body too large"}
    assert _counts(app) == (0, 0, 0)
    app.extensions["odysseus.runs"].close()


@pytest.mark.parametrize("query, header", [("?after=abc", None), ("?after=-1", None), ("", "x1"), ("?after=1.5", None)])
def test_bad_cursor_is_400(client, query, header):
    session = client.post("/api/sessions", json={}).get_json()
    headers = {"Last-Event-ID": header} if header else {}
    response = client.get(f"/api/chat/resume/{session['id']}{query}", headers=headers)
    assert response.status_code == 400
    assert "cursor" in response.get_json()["error"]


def test_unknown_routes_and_methods_are_json(client):
    assert client.get("/api/nothing-here").get_json() == {
        "error": "The requested URL was not found on the server. "
        "If you entered the URL manually please check your "
        "spelling and try again."
    }
    response = client.get("/api/chat_stream")
    assert response.status_code == 405 and "error" in response.get_json()


def test_history_validation(client):
    assert client.patch("/api/sessions/s_nope", json={"title": "x"}).status_code == 404
    session = client.post("/api/sessions", json={"title": "t"}).get_json()
    assert client.patch(f"/api/sessions/{session['id']}", json={}).status_code == 400
    assert client.patch("/api/messages/999", json={"content": "x"}).status_code == 404
    assert client.delete("/api/messages/999").status_code == 404
    assert client.get("/api/sessions?limit=0").status_code == 400
    assert client.get("/api/sessions?limit=abc").status_code == 400
