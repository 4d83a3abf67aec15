"""Helpers for tests that build in-process apps (importable from any test directory)."""

from typing import Iterator, Tuple

#: the password of the accounts ``two_users`` makes
PASSWORD = "correct horse battery"


class Browser:
    """One signed-in user of an in-process app: a test client with its CSRF header."""

    def __init__(self, app, username: str):
        self.client = app.test_client()
        answer = self.client.post("/api/auth/login", json={"username": username, "password": PASSWORD})
        assert answer.status_code == 200, answer.json
        self.headers = {"X-Odysseus-CSRF": answer.json["csrf_token"]}

    def call(self, method: str, path: str, json=None):
        """One request with the CSRF header."""
        return self.client.open(path, method=method, json=json, headers=self.headers)


def two_users(data_dir: str, **config) -> Iterator[Tuple[Browser, Browser]]:
    """For a fixture: Alice (the admin) and Bob, signed in to one password-mode app (``config`` added)."""
    from odysseus import create_app

    settings = {"DATA_DIR": data_dir, "PROVIDERS": [], "AUTH": "password", "DEMO_TOKEN_DELAY": 0.001, **config}
    app = create_app(settings)
    accounts = app.extensions["odysseus.accounts"]
    accounts.create_user("alice", PASSWORD, is_admin=True)
    accounts.create_user("bob", PASSWORD)
    yield Browser(app, "alice"), Browser(app, "bob")
    close_app(app)


def close_app(application) -> None:
    """Stop an in-process app's runs and close its SQLite file.

    Each open database holds three descriptors (db, -wal, -shm); left open across hundreds
    of tests they push later sockets past select()'s FD_SETSIZE in the fake servers.
    """
    application.extensions["odysseus.runs"].close()
    application.extensions["odysseus.store"].close()


def insert_running_run(db, owner: str, worker: str, lease_until: float, model: str = "m") -> tuple:
    """Inside the caller's transaction: a new session and a run row left ``running`` by ``worker``
    (its lease until ``lease_until``), as a worker writes it at a turn's start; (session_id, run_id)."""
    import time

    from odysseus.events import CHAT_TERMINAL
    from odysseus.store import new_id
    from odysseus.store.runs import RunRepo

    session_id, run_id = new_id("s_"), new_id("run_")
    now = time.time()
    db.execute(
        "insert into sessions (id, owner, title, created_at, updated_at) values (?, ?, 't', ?, ?)",
        [session_id, owner, now, now],
    )
    RunRepo.insert_running(
        db,
        run_id=run_id,
        session_id=session_id,
        owner=owner,
        mode="chat",
        model=model,
        user_message_id=None,
        client_message_id=None,
        worker=worker,
        lease_until=lease_until,
        first_seq=1,
        terminal_type=CHAT_TERMINAL,
    )
    return session_id, run_id


class Recorder:
    """A test client that keeps every response body, to show a secret never leaves the server."""

    def __init__(self, client, headers=None):
        self.client = client
        self.headers = headers if headers is not None else {"Origin": "http://localhost"}
        self.bodies = []

    def __getattr__(self, method):
        def call(url, **kwargs):
            kwargs.setdefault("headers", self.headers)
            response = getattr(self.client, method)(url, **kwargs)
            self.bodies.append(response.get_data(as_text=True))
            return response

        return call

    def assert_never(self, secret: str) -> None:
        """Neither ``secret`` nor all but its last four characters was in any answer."""
        assert all(secret not in text and secret[:-4] not in text for text in self.bodies)
