"""Benchmark 5: memory and eviction after 10,000 short runs.

After a warm-up of 300 runs whose logs are evicted, the worker's resident memory is the
start. Then 10,000 short runs (20 tokens, zero pacing; 20 clients at a time) finish; the
finished logs stay for ``EVICT_GRACE`` (3 s) and are then freed by the janitor. The
result is resident memory at the start, right after the runs, and once the replay
windows have passed (the lowest reading in the 20 s after); target: within 10% of the start.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Dict, Tuple

from .client import request
from .common import HOST, app_server, model_server, rss_mb, table, worker_pid

RUNS = 10_000
CLIENTS = 20
GRACE = 3.0


async def _many(app_port: int, headers: Dict[str, str], count: int) -> int:
    """Make ``count`` runs with ``CLIENTS`` at a time; return the number of failures."""
    body = {"message": "short tokens=20 delay=0"}
    failures = 0
    queue = iter(range(count))

    async def client() -> None:
        nonlocal failures
        for _ in queue:
            result = await request(HOST, app_port, "POST", "/api/chat_stream", body, headers)
            if result.error or result.status != 200 or result.dones != 1:
                failures += 1

    await asyncio.gather(*(client() for _ in range(CLIENTS)))
    return failures


async def _health(app_port: int) -> Dict:
    result = await request(HOST, app_port, "GET", "/api/health", keep_body=True)
    body = result.body
    if result.headers.get("transfer-encoding") == "chunked":  # one chunk: size line, data, terminator
        body = body.split(b"\r\n", 1)[1].rsplit(b"\r\n0\r\n", 1)[0]
    return json.loads(body)


async def measure(app_port: int, headers: Dict[str, str], pid: int, runs: int) -> Dict:
    """Warm up, record, run, wait out the grace, record."""
    await _many(app_port, headers, 300)
    await asyncio.sleep(GRACE + 2)
    start = rss_mb(pid)
    t0 = time.perf_counter()
    failures, curve, held = 0, [], []
    for block in range(0, runs, 1000):  # the curve tells a one-time high-water mark from a leak
        failures += await _many(app_port, headers, min(1000, runs - block))
        curve.append(rss_mb(pid))
        held.append(await _health(app_port))  # finished runs still inside their replay window
    seconds = time.perf_counter() - t0
    after_runs = rss_mb(pid)
    readings = []
    for _ in range(40):
        await asyncio.sleep(0.5)
        readings.append(rss_mb(pid))
    return {
        "runs": runs,
        "failures": failures,
        "seconds": seconds,
        "start": start,
        "after_runs": after_runs,
        "after_grace": min(readings[int(GRACE / 0.5) + 2 :]),
        "final": readings[-1],
        "curve": curve,
        "held": held,
        "held_after": await _health(app_port),
    }


def report(d: Dict) -> Tuple[str, Dict[str, bool]]:
    """The Markdown table and the target."""
    growth = (d["after_grace"] - d["start"]) / d["start"]
    text = table(
        [
            "runs",
            "failures",
            "runs/s",
            "RSS start (MiB)",
            "right after (MiB)",
            "after grace (MiB)",
            "20 s later (MiB)",
            "change after grace",
        ],
        [
            [
                d["runs"],
                d["failures"],
                f"{d['runs'] / d['seconds']:.0f}",
                f"{d['start']:.1f}",
                f"{d['after_runs']:.1f}",
                f"{d['after_grace']:.1f}",
                f"{d['final']:.1f}",
                f"{growth:+.1%}",
            ]
        ],
    )
    text += "\n\nRSS after each 1,000 runs (MiB): " + ", ".join(f"{v:.1f}" for v in d["curve"])
    peak = max(d["held"], key=lambda h: h["log_bytes"])
    text += (
        f"\n\nHeld by the engine (`/api/health`): at most {peak['runs_in_memory']} finished runs in their "
        f"replay window ({peak['log_bytes'] / 1024:.0f} KiB of log payload); after the grace "
        f"{d['held_after']['runs_in_memory']} runs, {d['held_after']['log_bytes']} bytes."
    )
    return text, {"RSS after the replay windows within 10% of the start": growth <= 0.10}


def run(quick: bool = False) -> Tuple[str, Dict[str, bool]]:
    """Run the benchmark and return its Markdown section body and targets."""
    env = {"ODYSSEUS_EVICT_GRACE": str(GRACE)}
    with model_server() as model_port, app_server(model_port, env) as app:
        started = time.monotonic()
        data = asyncio.run(measure(app.port, {"Origin": app.url}, worker_pid(app), 1000 if quick else RUNS))
        text, targets = report(data)
    return text + f"\n\nDuration: {time.monotonic() - started:.0f} s.", targets


if __name__ == "__main__":
    body, met = run(quick=True)
    print(body)
    print(met)
