"""A real redis-server (the Debian package) on a free loopback port, for the Redis run backend's tests.

Each instance has its own directory, keeps nothing on disk (``--save "" --appendonly no``)
and is stopped by its pid. ``restart()`` stops it and starts a fresh, empty one on the same
port, as a Redis crash and restart without persistence would.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import socket
import subprocess
import time
from typing import Dict, Optional

from liveserver import free_port

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"


def redis_available() -> bool:
    """True when the redis-server binary is installed."""
    return os.path.exists(REDIS_SERVER)


class RedisServer:
    """redis-server on 127.0.0.1:<free port>."""

    def __init__(self, directory: str, port: Optional[int] = None):
        self.directory = directory
        self.port = port or free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: Optional[subprocess.Popen] = None

    def start(self, timeout: float = 10.0) -> "RedisServer":
        """Start and wait until it answers PING."""
        os.makedirs(self.directory, exist_ok=True)
        log = open(os.path.join(self.directory, f"redis-{self.port}.log"), "ab")
        self.proc = subprocess.Popen(
            [
                REDIS_SERVER,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--dir",
                self.directory,
                "--save",
                "",
                "--appendonly",
                "no",
                "--protected-mode",
                "yes",
                "--daemonize",
                "no",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("redis-server exited at start")
            if self.ping():
                return self
            time.sleep(0.02)
        self.stop()
        raise RuntimeError("redis-server did not answer")

    def ping(self) -> bool:
        """True when the server answers PING (raw protocol: no client library needed)."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self) -> None:
        """Stop it by pid (SIGKILL after a grace)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def kill(self) -> None:
        """kill -9, as a crash would."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)

    def restart(self, down_for: float = 0.0) -> None:
        """Crash it, stay down ``down_for`` seconds, start an empty one on the same port."""
        self.kill()
        time.sleep(down_for)  # the scenario: Redis stays down this long
        self.start()

    def env(self, data_dir: str, workers: int = 2) -> Dict[str, str]:
        """Server env for the Redis backend; the key prefix is per data directory (servers may share one Redis)."""
        prefix = "t" + hashlib.sha1(data_dir.encode()).hexdigest()[:10] + ":"
        return {
            "ODYSSEUS_RUN_BACKEND": "redis",
            "ODYSSEUS_REDIS_URL": self.url,
            "ODYSSEUS_REDIS_PREFIX": prefix,
            "ODYSSEUS_WORKERS": str(workers),
        }
