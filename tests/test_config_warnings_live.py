"""A real gunicorn master with two workers says an unknown configuration name once per start-up,
not once per worker (the workers are forked from the master, which already said it)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def backend_env(redis_server):
    """Redis with two workers: the set-up where a per-worker warning would repeat."""
    return lambda data_dir: redis_server.env(data_dir, workers=2)


def test_two_workers_warn_once_about_an_unknown_variable_and_toml_key(server_factory, tmp_path):
    toml = tmp_path / "odysseus.toml"
    toml.write_text("heartbeat_intervl = 3\n")
    server = server_factory(env={"ODYSSEUS_MAX_STREAM_PER_USER": "3", "ODYSSEUS_CONFIG": str(toml)})
    assert len(server.worker_pids()) == 2
    logs = server.logs()
    assert logs.count("unknown configuration variable ODYSSEUS_MAX_STREAM_PER_USER") == 1, logs
    assert "did you mean ODYSSEUS_MAX_STREAMS_PER_USER" in logs
    assert logs.count("unknown key heartbeat_intervl") == 1, logs
