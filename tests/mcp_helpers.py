"""Where the tests' MCP servers are, and small helpers for the MCP tests (issue 34).

Real servers we did not write: ``mcp-server-time`` (PyPI, a test extra: in the venv's bin) and
``@modelcontextprotocol/server-everything`` (npm, a devDependency: node_modules/.bin). The hostile
server is ours (tests/mcp_servers/hostile.py).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from typing import Dict, List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIME_SERVER = os.path.join(os.path.dirname(sys.executable), "mcp-server-time")
EVERYTHING = os.path.join(ROOT, "node_modules", ".bin", "mcp-server-everything")
HOSTILE = os.path.join(ROOT, "tests", "mcp_servers", "hostile.py")


def stdio(name: str, command: str, *args: str, start_timeout: float = 60, **extra) -> Dict:
    """A broker spec of a stdio server (what odysseus.mcp.service sends the broker)."""
    return {
        "name": name,
        "command": command,
        "args": list(args),
        "env": {},
        "start_timeout": start_timeout,
        "max_delay": 2,
        **extra,
    }


def hostile(name: str, mode: str = "normal", log: Optional[str] = None, **extra) -> Dict:
    """The hostile server in ``mode`` (its received messages appended to ``log``)."""
    return stdio(name, sys.executable, HOSTILE, mode, *([log] if log else []), **extra)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class EverythingHttp:
    """server-everything serving Streamable HTTP on a free loopback port (``url``), for one test module."""

    def __init__(self):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.proc: Optional[subprocess.Popen] = None

    def start(self) -> "EverythingHttp":
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PORT": str(self.port), "HOME": "/tmp"}
        self.proc = subprocess.Popen(
            [EVERYTHING, "streamableHttp"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("server-everything did not start listening")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(5)


def alive(pid: int) -> bool:
    """True while ``pid`` is a live (non-zombie) process."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def children(pid: int) -> List[int]:
    """Every descendant of ``pid``."""
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError):
                continue
            if ppid == parent:
                found.append(int(entry))
                todo.append(int(entry))
    return found


def wait_until(check, timeout: float = 10.0, step: float = 0.05):
    """Poll ``check()`` until it is truthy (returned) or ``timeout`` passes (AssertionError)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(step)
    raise AssertionError("condition not met in time")
