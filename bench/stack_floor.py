"""How far a turn is from the floor of the stack: the same client, model and worker class, three servers.

Issue 22 asks for about 1 ms of worker CPU per turn start and a burst of 100 arrivals whose median
first token comes at most 100 ms after the model's own. This puts numbers on what the chosen stack
(gunicorn's gevent worker, Flask, SQLite) costs before Odysseus does anything, by serving the same
requests from ``bench.floor_app``:

- **bare Flask**: parse the JSON body, stream two SSE frames (no storage, no model);
- **floor turn**: the unavoidable work of a turn in its cheapest form (one write transaction
  before the first byte, the provider request on a kept-alive socket, tokens re-framed as SSE,
  one write transaction at the end);
- **Odysseus**: the app as users run it (one worker, single-user mode).

All three run at once against one model server; every measurement alternates between them in
rounds, so the machine's load falls on each alike. Reported: worker CPU per one-token turn
(``/proc``, idle subtracted) and the burst's added median first token against the model itself.

Pinned and unpinned (issue 40): on two shared cores the client, the model server and the worker
compete for CPU, so a heavy harness shows up as app latency. Each round is measured twice, in
alternating order: **pinned** (every gunicorn process, master and worker threads alike, on core 0;
the harness and the model server on core 1, with ``os.sched_setaffinity`` on every thread of each)
and **unpinned** (everything on both cores). ``--pinned`` or ``--unpinned`` measures one only.

``BENCH_BASELINE_ROOT=/path/to/an/older/tree`` adds a fourth server, **Odysseus (before)**, served
from that tree (``git archive <commit> | tar -x -C DIR``), so a change is measured against the code
before it in the same run, rounds alternating.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack, contextmanager
from typing import Dict, Iterator, List, Sequence, Tuple

import requests

from .common import HOST, ROOT, app_server, cpu_seconds, free_port, median, model_process, origin, stop_process
from .common import first_child, process_tree, table, worker_pid
from .targets_load import PACING, arrivals, idle_rate, interleaved, turns, worker_cpu

#: one-token turns per server and round, rounds, burst rounds (each round: one burst per server)
SIZES = {"full": (300, 3, 3), "quick": (100, 2, 1), "smoke": (20, 1, 1)}
CLIENTS = 4
PACED_TOKENS = 400  # 2 s per reply: the measured second lies well inside every stream
PACED_PROMPT = f"paced tokens={PACED_TOKENS} delay={PACING}"
BARE = "bare Flask"
MODES = ("pinned", "unpinned")
WORKER_CORE, HARNESS_CORE = 0, 1


def _set_affinity(pids: List[int], cores: set) -> None:
    """Every thread of every process in ``pids`` (and of its children) onto ``cores``."""
    for pid in pids:
        for member in process_tree(pid):
            try:
                tasks = os.listdir(f"/proc/{member}/task")
            except OSError:
                continue
            for task in tasks:
                try:
                    os.sched_setaffinity(int(task), cores)
                except OSError:
                    pass  # a thread that has just ended


def pin(mode: str, servers: List[int], harness: List[int]) -> None:
    """``pinned``: the servers (gunicorn masters) on one core, the harness and the model on the other;
    ``unpinned``: everything on every core."""
    every = set(range(os.cpu_count() or 1))
    if mode == "pinned" and len(every) >= 2:
        _set_affinity(servers, {WORKER_CORE})
        _set_affinity(harness, {HARNESS_CORE})
    else:
        _set_affinity(servers + harness, every)


@contextmanager
def baseline_server(model_port: int, root: str, env: Dict[str, str]) -> Iterator[Tuple[int, int, int]]:
    """Odysseus from another tree (``root``), served like ``app_server``; yields port, worker pid, master pid."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="odysseus-before-") as data_dir:
        settings = {
            k: v for k, v in os.environ.items() if not k.startswith(("ODYSSEUS_", "OPENAI_", "OLLAMA_", "ANTHROPIC_"))
        }
        settings.update(
            {
                "PORT": str(port),
                "HOST": HOST,
                "PYTHONPATH": root,
                "ODYSSEUS_DATA_DIR": data_dir,
                "ODYSSEUS_AUTH": "none",
                "ODYSSEUS_WORKERS": "1",
                "ODYSSEUS_LOG_LEVEL": "warning",
                "ODYSSEUS_SHUTDOWN_GRACE": "0",
                "ODYSSEUS_GRACEFUL_MARGIN": "0",
                "ODYSSEUS_TITLE_MODE": "first_line",
                "OPENAI_BASE_URL": f"http://{HOST}:{model_port}/v1",
                "OPENAI_API_KEY": "x",
                "OPENAI_MODEL": "bench",
                **env,
            }
        )
        command = [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py", "--no-control-socket", "wsgi:app"]
        proc = subprocess.Popen(command, cwd=root, env=settings)
        try:
            _wait_healthy(port)
            yield port, first_child(proc.pid), proc.pid
        finally:
            stop_process(proc)


@contextmanager
def floor_server(model_port: int, mode: str) -> Iterator[Tuple[int, int, str, int]]:
    """``bench.floor_app`` under gunicorn's gevent worker (one worker); yields its port, worker pid, data dir
    and master pid."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="odysseus-floor-") as data_dir:
        env = {**os.environ, "FLOOR_MODE": mode, "FLOOR_MODEL": f"{HOST}:{model_port}", "FLOOR_DATA_DIR": data_dir}
        env["PYTHONPATH"] = ROOT  # run from the data dir: gunicorn must not read the app's gunicorn.conf.py
        command = [sys.executable, "-m", "gunicorn", "-k", "gevent", "-w", "1", "--worker-connections", "10000"]
        command += ["-b", f"{HOST}:{port}", "--log-level", "warning", "bench.floor_app:app"]
        proc = subprocess.Popen(command, cwd=data_dir, env=env)
        try:
            _wait_healthy(port)
            yield port, first_child(proc.pid), data_dir, proc.pid
        finally:
            stop_process(proc)


def _wait_healthy(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if requests.get(f"http://{HOST}:{port}/api/health", timeout=1).ok:
                return
        except requests.RequestException:
            pass
        time.sleep(0.1)
    raise RuntimeError("the floor server did not start")


async def _per_turn(port: int, headers: Dict[str, str], pid: int, count: int) -> float:
    await turns(port, headers, 20, CLIENTS, "warm tokens=1 delay=0")
    idle = await idle_rate(pid, 0.5)
    used, _wall = await worker_cpu(pid, turns(port, headers, count, CLIENTS, "short tokens=1 delay=0"), idle)
    return used / count


async def _burst_added(model_port: int, port: int, headers: Dict[str, str]) -> Tuple[float, int]:
    d = await interleaved(100, 0.0, f"burst tokens=200 delay={PACING}", 200, 1, model_port, port, headers)
    return median(d["app"]["ttft"]) - median(d["direct"]["ttft"]), d["app"]["errors"]


async def _paced_cpu(model_port: int, port: int, headers: Dict[str, str], pid: int) -> Tuple[float, int]:
    """Worker CPU per token while 100 paced streams (5 ms per token) are all in flight: 1 s in the middle."""
    replies = asyncio.ensure_future(arrivals("app", 100, 0.0, PACED_PROMPT, model_port, port, headers))
    await asyncio.sleep(0.8)  # every stream has started and is past its first token
    c0, t0 = cpu_seconds(pid), time.perf_counter()
    await asyncio.sleep(1.0)
    used, wall = cpu_seconds(pid) - c0, time.perf_counter() - t0
    results = await replies
    errors = sum(1 for r in results if r.error or r.tokens != PACED_TOKENS)
    return used / (wall * 100 / PACING), errors


async def _measure(
    servers: Dict[str, Tuple[int, Dict[str, str], int]], model_port: int, size: str, modes: List[str], pinning
) -> Dict:
    """``{mode: {server: {"cpu": [...], "burst": [...], ...}}}``: each round in every mode, orders alternating."""
    count, rounds, burst_rounds = SIZES[size]
    out: Dict[str, Dict[str, Dict[str, List[float]]]] = {
        mode: {name: {"cpu": [], "burst": [], "paced": [], "errors": []} for name in servers} for mode in modes
    }
    names = list(servers)
    for index in range(rounds):
        for mode in modes if index % 2 == 0 else modes[::-1]:
            pinning(mode)
            for name in names if index % 2 == 0 else names[::-1]:
                port, headers, pid = servers[name]
                out[mode][name]["cpu"].append(await _per_turn(port, headers, pid, count))
    for index in range(burst_rounds):
        for mode in modes if index % 2 == 0 else modes[::-1]:
            pinning(mode)
            for name in names if index % 2 == 0 else names[::-1]:
                if name == BARE:
                    continue  # it never calls the model: no first token to compare
                port, headers, pid = servers[name]
                added, errors = await _burst_added(model_port, port, headers)
                out[mode][name]["burst"].append(added)
                per_token, paced_errors = await _paced_cpu(model_port, port, headers, pid)
                out[mode][name]["paced"].append(per_token)
                out[mode][name]["errors"].append(errors + paced_errors)
    pinning("unpinned")
    return out


def measure(size: str = "full", modes: Sequence[str] = MODES) -> Dict:
    """Start the servers against one model server and measure them alternately, in each pinning mode."""
    env = {"ODYSSEUS_MAX_STREAMS_PER_USER": "100000"}  # 100 streams from one (single-user) client
    with ExitStack() as stack:
        model_port, model_pid = stack.enter_context(model_process())
        servers: Dict[str, Tuple[int, Dict[str, str], int]] = {}
        masters: List[int] = []
        for mode, name in (("bare", BARE), ("turn", "floor turn")):
            port, pid, _data_dir, master = stack.enter_context(floor_server(model_port, mode))
            servers[name] = (port, {}, pid)
            masters.append(master)
        baseline = os.environ.get("BENCH_BASELINE_ROOT")
        if baseline:
            port, pid, master = stack.enter_context(baseline_server(model_port, baseline, env))
            servers["Odysseus (before)"] = (port, {}, pid)
            masters.append(master)
        app = stack.enter_context(app_server(model_port, env))
        servers["Odysseus"] = (app.port, origin(app), worker_pid(app))
        assert app.proc is not None
        masters.append(app.proc.pid)
        harness = [os.getpid(), model_pid]
        try:
            coro = _measure(servers, model_port, size, list(modes), lambda mode: pin(mode, masters, harness))
            data = asyncio.run(asyncio.wait_for(coro, 1800))
        finally:
            pin("unpinned", masters, harness)
        data["load"] = _load()
        return data


def _load() -> str:
    with open("/proc/loadavg") as fh:
        return " ".join(fh.read().split()[:3])


def report(data: Dict) -> str:
    """One side-by-side table per pinning mode, with the ratios to the floor turn."""
    parts = []
    for mode in MODES:
        if mode in data:
            parts += [f"**{mode}**", "", _table(data[mode]), ""]
    parts.append(f"Load average at the end: {data.get('load', '-')}")
    return "\n".join(parts)


def _table(data: Dict) -> str:
    floor_cpu = median(data["floor turn"]["cpu"])
    floor_burst = median(data["floor turn"]["burst"])
    floor_paced = median(data["floor turn"]["paced"])
    rows = []
    for name, d in data.items():
        cpu = median(d["cpu"])
        burst = median(d["burst"]) if d["burst"] else None
        paced = median(d["paced"]) if d["paced"] else None
        rows.append(
            [
                name,
                f"{cpu * 1000:.2f} ms",
                f"{cpu / floor_cpu:.2f}x",
                f"+{burst * 1000:.1f} ms" if burst is not None else "-",
                f"{burst / floor_burst:.2f}x" if burst is not None and floor_burst > 0 else "-",
                f"{paced * 1e6:.1f} µs" if paced is not None else "-",
                f"{paced / floor_paced:.2f}x" if paced is not None and floor_paced > 0 else "-",
                " / ".join(f"{c * 1000:.2f}" for c in d["cpu"]),
                " / ".join(f"{b * 1000:.0f}" for b in d["burst"]) or "-",
                str(sum(d["errors"])),
            ]
        )
    header = ["server", "CPU per 1-token turn", "vs floor", "burst added p50", "vs floor"]
    header += ["CPU per paced token (100 streams)", "vs floor", "CPU rounds (ms)", "burst rounds (ms)", "errors"]
    return table(header, rows)


def run(quick: bool = False) -> Tuple[str, Dict[str, bool]]:
    """For ``bench.run_all``: no targets of its own (it explains two of issue 22's)."""
    return report(measure("quick" if quick else "full")), {}


def main() -> None:
    """Command line entry point: ``python -m bench.stack_floor [--quick|--smoke] [--pinned|--unpinned]``."""
    size = "quick" if "--quick" in sys.argv else "smoke" if "--smoke" in sys.argv else "full"
    modes = [m for m in MODES if f"--{m}" in sys.argv] or list(MODES)
    print(report(measure(size, modes)))


if __name__ == "__main__":
    main()
