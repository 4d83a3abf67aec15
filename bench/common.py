"""Shared benchmark plumbing: the model server and app processes, memory, statistics, machine facts."""

from __future__ import annotations

import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from importlib import metadata
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))

from liveserver import LiveServer, free_port  # noqa: E402

from .model_server import raise_nofile  # noqa: E402

HOST = "127.0.0.1"


def wait_port(port: int, timeout: float = 10.0) -> None:
    """Block until something accepts on ``port``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex((HOST, port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


@contextmanager
def model_process(tokens: int = 200, delay: float = 0.0) -> Iterator[Tuple[int, int]]:
    """The fast model server in its own process; yields its port and pid."""
    raise_nofile()
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bench.model_server",
            "--port",
            str(port),
            "--tokens",
            str(tokens),
            "--delay",
            str(delay),
        ],
        cwd=ROOT,
    )
    try:
        wait_port(port)
        yield port, proc.pid
    finally:
        stop_process(proc)


@contextmanager
def model_server(tokens: int = 200, delay: float = 0.0) -> Iterator[int]:
    """The fast model server in its own process; yields its port."""
    with model_process(tokens, delay) as (port, _pid):
        yield port


def stop_process(proc: subprocess.Popen, grace: float = 10.0) -> None:
    """Terminate a process we started (by its pid), then kill it if it has not gone within ``grace``."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


@contextmanager
def app_server(model_port: int, env: Optional[Dict[str, str]] = None) -> Iterator[LiveServer]:
    """The app as users serve it: gunicorn, one gevent worker, single-user mode on loopback."""
    raise_nofile()  # inherited by gunicorn and its worker
    with tempfile.TemporaryDirectory(prefix="odysseus-bench-") as data_dir:
        settings = {
            "OPENAI_BASE_URL": f"http://{HOST}:{model_port}/v1",
            "OPENAI_API_KEY": "x",
            "OPENAI_MODEL": "bench",
            "ODYSSEUS_AUTH": "none",
            "ODYSSEUS_WORKERS": "1",
            "ODYSSEUS_LOG_LEVEL": "warning",
            **(env or {}),
        }
        server = LiveServer(data_dir, settings).start(timeout=30)
        try:
            yield server
        finally:
            server.stop()


def origin(server: LiveServer) -> Dict[str, str]:
    """The header that lets a single-user-mode write through the cross-site check."""
    return {"Origin": server.url}


def worker_pid(server: LiveServer) -> int:
    """The pid of gunicorn's (only) worker process."""
    return first_child(server.proc.pid)


def first_child(pid: int) -> int:
    """The first child process of ``pid`` (a gunicorn master's worker), waiting up to 10 s for it."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/task/{pid}/children") as fh:
                children = fh.read().split()
            if children:
                return int(children[0])
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError("no gunicorn worker found")


def process_tree(pid: int) -> List[int]:
    """``pid`` and all its descendants, read from /proc (never by a name pattern)."""
    out, todo = [], [pid]
    while todo:
        current = todo.pop()
        out.append(current)
        try:
            for task in os.listdir(f"/proc/{current}/task"):
                with open(f"/proc/{current}/task/{task}/children") as fh:
                    todo += [int(p) for p in fh.read().split()]
        except OSError:
            pass
    return out


def tree_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` and its live descendants."""
    total = 0.0
    for member in process_tree(pid):
        try:
            total += cpu_seconds(member)
        except OSError:
            pass
    return total


def rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` in MiB."""
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds used by ``pid`` so far."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pct(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1), nearest-rank."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, max(0, int(round(q * len(ordered) + 0.5)) - 1))]


def median(values: Sequence[float]) -> float:
    """The median, NaN for no values."""
    return statistics.median(values) if values else float("nan")


def ms(seconds: float) -> str:
    """Seconds as milliseconds for a table cell."""
    return f"{seconds * 1000:.2f}"


def machine() -> Dict[str, str]:
    """The facts a result depends on."""
    mem = ""
    try:
        with open("/proc/meminfo") as fh:
            mem = f"{int(fh.readline().split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    model = ""
    try:
        with open("/proc/cpuinfo") as fh:
            model = next((ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")), "")
    except OSError:
        pass
    versions = []
    for name in ("flask", "gevent", "gunicorn", "requests", "greenlet"):
        try:
            versions.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            pass
    return {
        "cores": str(os.cpu_count()),
        "cpu": model,
        "memory": mem,
        "python": platform.python_version(),
        "os": f"{platform.system()} {platform.release()}",
        "libraries": ", ".join(versions),
        "load": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }


def table(header: List[str], rows: List[List[str]]) -> str:
    """A Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)
