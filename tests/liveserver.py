"""A real gunicorn + gevent server on a loopback port, for tests over real sockets."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from typing import Dict, List, Optional

import requests

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("ODYSSEUS_", "OPENAI_", "OLLAMA_", "ANTHROPIC_"))}
        env.update({"PORT": str(self.port), "HOST": "127.0.0.1", "ODYSSEUS_DATA_DIR": self.data_dir,
                    "ODYSSEUS_LOG_LEVEL": "warning",
                    "ODYSSEUS_AUTH": "none",  # single-user on loopback unless the test asks for accounts
                    # a test server stops within about two seconds
                    "ODYSSEUS_SHUTDOWN_GRACE": "1", "ODYSSEUS_GRACEFUL_MARGIN": "1",
                    # no title request after a first reply: scripted models answer only what a test scripted
                    "ODYSSEUS_TITLE_MODE": "first_line"})
        env.update(self.env)
        os.makedirs(self.data_dir, exist_ok=True)
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py", "wsgi:app"],
                                     cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT)
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
            workers = self.worker_pids()
            os.kill(self.proc.pid, signal.SIGKILL)
            for pid in workers:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            self.proc.wait(5)
            deadline = time.monotonic() + 5
            while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
                time.sleep(0.02)

    def stop(self) -> None:
        """Stop gracefully (then forcefully)."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if getattr(self, "_log", None):
            self._log.close()


def _alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False
