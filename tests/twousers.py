"""Two signed-in users of one in-process password-mode app (tests of per-user features: folders, shares)."""

from __future__ import annotations

from apphelpers import close_app

from odysseus import create_app

PASSWORD = "correct horse battery"
CSRF = "X-Odysseus-CSRF"


class Caller:
    """One signed-in browser: a test client with its cookie and the CSRF header on every write."""

    def __init__(self, app, username: str):
        self.client = app.test_client()
        response = self.client.post("/api/auth/login", json={"username": username, "password": PASSWORD})
        assert response.status_code == 200, response.json
        self.headers = {CSRF: response.json["csrf_token"]}

    def get(self, path, **kw):
        return self.client.get(path, **kw)

    def post(self, path, json=None):
        return self.client.post(path, json=json if json is not None else {}, headers=self.headers)

    def patch(self, path, json=None, **kw):
        return self.client.patch(path, json=json, headers=self.headers, **kw)

    def delete(self, path):
        return self.client.delete(path, headers=self.headers)

    def session(self, title: str) -> str:
        response = self.post("/api/sessions", {"title": title})
        assert response.status_code == 201
        return response.json["id"]

    def listed(self, query: str = "") -> list:
        response = self.get(f"/api/sessions{query}")
        assert response.status_code == 200, response.json
        return [s["id"] for s in response.json["sessions"]]


def two_users(directory: str):
    """A password-mode app with alice (admin) and bob signed in: yields (app, alice, bob), then closes the app.

    Made once per test module (hashing passwords is slow); see ``fresh`` for a clean slate per test.
    """
    app = create_app({"DATA_DIR": directory, "PROVIDERS": [], "AUTH": "password", "DEMO_TOKEN_DELAY": 0.001})
    accounts = app.extensions["odysseus.accounts"]
    accounts.create_user("alice", PASSWORD, is_admin=True)
    accounts.create_user("bob", PASSWORD)
    yield app, Caller(app, "alice"), Caller(app, "bob")
    close_app(app)


def fresh(app) -> None:
    """Remove every chat, folder and share, so a test starts from none (the accounts stay signed in)."""
    with app.extensions["odysseus.store"].locked.tx() as db:
        for table in ("messages", "sessions", "folders", "shares"):
            db.execute(f"delete from {table}")
