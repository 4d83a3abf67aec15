"""A real gunicorn + gevent server on a loopback port, for tests over real sockets."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import subprocess
import sys
import time
from typing import Dict, Iterator, List, Optional

import requests

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Set by tests/conftest.py before each test: the node id of a test not marked ``slow``, else None.
_unmarked_test: Optional[str] = None


def require_slow_mark(unmarked_test: Optional[str]) -> None:
    """From now on ``LiveServer.start`` fails for ``unmarked_test`` (None: the running test may start servers)."""
    global _unmarked_test
    _unmarked_test = unmarked_test


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LiveServer:
    """gunicorn -c gunicorn.conf.py wsgi:app in a subprocess, with its own data dir and env."""

    def __init__(self, data_dir: str, env: Optional[Dict[str, str]] = None, port: Optional[int] = None):
        self.data_dir = data_dir
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = dict(env or {})
        self.proc: Optional[subprocess.Popen] = None
        self.log_path = os.path.join(data_dir, f"server-{self.port}.log")

    def start(self, timeout: float = 20.0) -> "LiveServer":
        """Start and wait until /api/health answers."""
        if _unmarked_test:
            raise RuntimeError(f"{_unmarked_test} starts a live server but is not marked slow (tests/slowmarks.py)")
        env = {
            k: v for k, v in os.environ.items() if not k.startswith(("ODYSSEUS_", "OPENAI_", "OLLAMA_", "ANTHROPIC_"))
        }
        env.update(
            {
                "PORT": str(self.port),
                "HOST": "127.0.0.1",
                "ODYSSEUS_DATA_DIR": self.data_dir,
                "ODYSSEUS_LOG_LEVEL": "warning",
                "ODYSSEUS_AUTH": "none",  # single-user on loopback unless the test asks for accounts
                # graceful timeout 0: on stop() the master ends its workers at once (a test server
                # stops in a fraction of a second); tests of the graceful drain pass their own values
                "ODYSSEUS_SHUTDOWN_GRACE": "0",
                "ODYSSEUS_GRACEFUL_MARGIN": "0",
                # no title request after a first reply: scripted models answer only what a test scripted
                "ODYSSEUS_TITLE_MODE": "first_line",
            }
        )
        env.update(self.env)
        os.makedirs(self.data_dir, exist_ok=True)
        self._log = open(self.log_path, "ab")
        # no control socket: gunicorn's default path is one per machine, shared by every server started here
        command = [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py", "--no-control-socket", "wsgi:app"]
        self.proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited early: {self.logs()}")
            try:
                if requests.get(self.url + "/api/health", timeout=1).ok:
                    return self
            except requests.RequestException:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"server did not start: {self.logs()}")

    def logs(self) -> str:
        """What the server printed."""
        try:
            with open(self.log_path, "rb") as fh:
                return fh.read().decode("utf-8", "replace")[-4000:]
        except OSError:
            return ""

    def worker_pids(self) -> List[int]:
        """The gunicorn workers: the master's child processes, read from /proc (never by a name pattern)."""
        if not self.proc:
            return []
        pids: List[int] = []
        for task in os.listdir(f"/proc/{self.proc.pid}/task"):
            with contextlib.suppress(OSError):
                with open(f"/proc/{self.proc.pid}/task/{task}/children") as fh:
                    pids += [int(p) for p in fh.read().split()]
        return pids

    def kill(self) -> None:
        """kill -9 the whole server (master and workers) at once, as a crash would."""
        if self.proc and self.proc.poll() is None:
            workers = _watch(self.worker_pids())
            os.kill(self.proc.pid, signal.SIGKILL)
            for pid in workers:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            self.proc.wait(5)
            _wait_gone(workers, 5)
            for fd in workers.values():
                os.close(fd)

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM the master and wait for it and its workers to exit (then kill -9 what is left).

        With the tests' graceful timeout of 0 this takes a fraction of a second; a server started
        with a longer ``ODYSSEUS_SHUTDOWN_GRACE`` drains its runs first, up to ``timeout``.
        """
        if self.proc and self.proc.poll() is None:
            workers = _watch(self.worker_pids())
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
            left = _wait_gone(workers, 5)
            for pid in left:  # only the workers this server started, by pid
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            _wait_gone(left, 5)
            for fd in workers.values():
                os.close(fd)
        if getattr(self, "_log", None):
            self._log.close()


def _watch(pids: List[int]) -> Dict[int, int]:
    """A pidfd per live pid (readable once that process has exited): waiting on the exit itself, not polling."""
    fds: Dict[int, int] = {}
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            fds[pid] = os.pidfd_open(pid)
    return fds


def _wait_gone(fds: Dict[int, int], timeout: float) -> List[int]:
    """Wait until every watched process has exited; the pids still running after ``timeout``."""
    deadline = time.monotonic() + timeout
    waiting = dict(fds)
    while waiting:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        ready, _, _ = select.select(list(waiting.values()), [], [], remaining)
        for pid in [pid for pid, fd in waiting.items() if fd in ready]:
            del waiting[pid]
    return list(waiting)


#: the API key the test model servers are given (they check nothing; it only has to look like a key)
TEST_MODEL_KEY = "sk-test-key-not-secret"


@contextlib.contextmanager
def serving_model(model_url: str, data_dir: str, **env: str) -> Iterator[LiveServer]:
    """A started server whose OpenAI-compatible provider is the test model at ``model_url`` (a
    tests/scripted_model.py ``ScriptedModel`` or a tests/fakeproviders.py ``FakeProvider``), with
    heartbeats every 0.5 s and the extra settings ``env``; stopped on leaving the block."""
    settings = {
        "OPENAI_BASE_URL": model_url + "/v1",
        "OPENAI_API_KEY": TEST_MODEL_KEY,
        "ODYSSEUS_HEARTBEAT_INTERVAL": "0.5",
        **env,
    }
    server = LiveServer(data_dir, settings).start()
    try:
        yield server
    finally:
        server.stop()
