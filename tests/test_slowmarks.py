"""The test-loop rules themselves: which tests are ``slow``, the guard on live servers, and a quick, clean stop."""

from __future__ import annotations

import os
import time

import pytest
import requests
from liveserver import LiveServer
from slowmarks import _starts_live_server


def _helper_that_starts(tmp):
    return LiveServer(tmp)


def _fixture_like(tmp):
    return _helper_that_starts(tmp)


def _in_process(tmp):
    return os.path.join(tmp, "x")


def _nested():
    def inner(tmp):
        return LiveServer(tmp)

    return inner


# An alias hides the class from the static rule (tests/slowmarks.py); the run-time guard still stops it.
SERVER_CLASS = LiveServer


# looked up by name, so that the test below does not itself count as starting a server
SAMPLES = {"direct": _helper_that_starts, "helper": _fixture_like, "nested": _nested, "in-process": _in_process}


def test_the_rule_follows_helpers_and_nested_functions():
    assert _starts_live_server(SAMPLES["direct"], set())
    assert _starts_live_server(SAMPLES["helper"], set())  # through a helper of the same module
    assert _starts_live_server(SAMPLES["nested"], set())  # through a function defined inside
    assert not _starts_live_server(SAMPLES["in-process"], set())
    assert not _starts_live_server(None, set())


def test_a_fast_test_cannot_start_a_live_server(tmp_path, request):
    assert request.node.get_closest_marker("slow") is None
    with pytest.raises(RuntimeError, match="not marked slow"):
        SERVER_CLASS(str(tmp_path / "data")).start()
    assert not os.path.exists(tmp_path / "data")  # refused before anything was started


def test_browser_and_live_tests_are_marked(request):
    items = request.session.items
    browser_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "browser")
    for item in items:
        if str(item.path).startswith(browser_dir) or {"live", "server_factory"} & set(item.fixturenames):
            assert item.get_closest_marker("slow") is not None, item.nodeid


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_stop_ends_master_and_workers_and_frees_the_data_directory(server_factory, tmp_path):
    data_dir = str(tmp_path / "shared")
    server = server_factory({}, data_dir=data_dir)
    with requests.Session() as keepalive:  # an idle keep-alive connection does not hold the stop up
        assert keepalive.get(server.url + "/api/health", timeout=10).ok
        workers = server.worker_pids()
        assert workers
        started = time.monotonic()
        server.stop()
        took = time.monotonic() - started
    assert server.proc.poll() is not None and not any(_alive(pid) for pid in workers)
    # the time is the property (a graceful timeout of 0 in tests, exits awaited, no polling); a drain would
    # take SHUTDOWN_GRACE + margin = 30 s, so this generous bound still tells the two apart
    assert took < 5, took
    again = server_factory({}, data_dir=data_dir)  # the data directory's lock went with the processes
    assert requests.get(again.url + "/api/health", timeout=10).ok
