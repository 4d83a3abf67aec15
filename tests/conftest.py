"""Shared fixtures: an in-process app, and real gunicorn+gevent servers on loopback ports.

Every fixture runs single-user mode (``AUTH=none``, one implicit owner, loopback only)
unless a test asks for accounts: ``server_factory(env={"ODYSSEUS_AUTH": "password"})``
or ``create_app({..., "AUTH": "password"})``.
"""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# In-process apps read the environment too: no title request to a scripted model unless a test asks.
os.environ.setdefault("ODYSSEUS_TITLE_MODE", "first_line")

from fakeproviders import FakeProvider  # noqa: E402
from apphelpers import close_app  # noqa: E402
import liveserver  # noqa: E402
from liveserver import LiveServer  # noqa: E402
from redisserver import RedisServer, redis_available  # noqa: E402

from odysseus import create_app  # noqa: E402
from slowmarks import is_slow  # noqa: E402


def pytest_collection_modifyitems(config, items):
    """Mark ``slow`` every browser test and every test that starts a live server (see tests/slowmarks.py)."""
    for item in items:
        if is_slow(item):
            item.add_marker(pytest.mark.slow)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Keep the rule true: a live server started for a test not marked ``slow`` fails that test."""
    liveserver.require_slow_mark(item.nodeid if item.get_closest_marker("slow") is None else None)


@pytest.fixture
def app(tmp_path):
    """An app on a fresh SQLite file with a fast demo model."""
    application = create_app({"DATA_DIR": str(tmp_path), "DEMO_TOKEN_DELAY": 0.001, "PROVIDERS": [], "AUTH": "none"})
    yield application
    close_app(application)


@pytest.fixture
def agent_app(tmp_path):
    """An app whose agent mode offers ``shell`` and ``update_plan``; script its model with
    ``agent_fakes.use_script`` (the agent tests of approvals, their binding and the sandbox)."""
    application = create_app(
        {
            "DATA_DIR": str(tmp_path),
            "PROVIDERS": [],
            "AUTH": "none",
            "AGENT_TOOLS": "shell,update_plan",
            "TOOL_PROGRESS_INTERVAL": 0.2,
        }
    )
    yield application
    close_app(application)


@pytest.fixture
def client(app):
    """Flask's test client (for validation and JSON routes, not for streaming behaviour)."""
    return app.test_client()


@pytest.fixture(scope="module")
def backend_env():
    """Extra server env for the run backend under test, per data directory: none (the in-process backend).

    A module that runs its tests against both backends overrides this fixture with
    ``params=["memory", "redis"]`` (see ``tests/test_detached_runs.py``); ``live`` and
    ``server_factory`` then start every server with that backend.
    """
    return lambda data_dir: {}


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory):
    """A real redis-server on a loopback port for this module (skipped when the package is missing)."""
    if not redis_available():
        pytest.skip("redis-server is not installed (Debian package redis-server)")
    server = RedisServer(str(tmp_path_factory.mktemp("redis"))).start()
    yield server
    server.stop()


@pytest.fixture
def server_factory(tmp_path_factory, backend_env):
    """Start real servers with given env; all are stopped at teardown."""
    started = []

    def start(env=None, data_dir=None):
        directory = data_dir or str(tmp_path_factory.mktemp("srv"))
        # accounts only when a test asks for them
        settings = {"ODYSSEUS_AUTH": "none", **backend_env(directory), **(env or {})}
        server = LiveServer(directory, {k: str(v) for k, v in settings.items()}).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="module")
def live(tmp_path_factory, backend_env):
    """One real server per test module: demo model at 20 ms/token, heartbeats every 0.5 s."""
    directory = str(tmp_path_factory.mktemp("live"))
    server = LiveServer(
        directory,
        {
            "ODYSSEUS_AUTH": "none",
            "ODYSSEUS_DEMO_TOKEN_DELAY": "0.02",
            "ODYSSEUS_HEARTBEAT_INTERVAL": "0.5",
            "ODYSSEUS_EVICT_GRACE": "3",
            **backend_env(directory),
        },
    ).start()
    yield server
    server.stop()


@pytest.fixture
def fake():
    """A local server speaking a model provider's wire protocol, scripted per request."""
    server = FakeProvider()
    yield server
    server.close()
