"""Benchmark 7: the run backends side by side: 1 worker in-process, 1 worker Redis, N workers Redis.

One model server, one redis-server (loopback, no persistence), and the same app started
three times. For each set-up, in one run:

- overhead: the 200-token zero-pacing reply directly from the model server and through
  the app, interleaved, at 1 and 100 concurrent streams; reported is the time the app adds
  to the first token (median at 1, p99 at 100), so the Redis backend's added cost is the
  difference between rows;
- concurrency: detached runs each with a live subscriber (6 tokens, one per second,
  heartbeats every second), started at 200/s, at rising levels; "held" is the largest level
  with zero errors and no heartbeat later than 1.5 s. N workers share one box's cores.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from typing import Dict, List, Tuple

from . import concurrency, overhead
from .common import app_server, median, model_server, ms, origin, pct, table, worker_pid

OVERHEAD_PLAN = ((1, 60, 0.0), (100, 3, 0.0))
LEVELS = (500, 1000, 2000)


def _setups(redis_url: str, prefix_seed: str) -> List[Tuple[str, Dict[str, str]]]:
    cores = os.cpu_count() or 1
    redis = {"ODYSSEUS_RUN_BACKEND": "redis", "ODYSSEUS_REDIS_URL": redis_url}
    return [
        ("1 worker, in-process", {"ODYSSEUS_WORKERS": "1"}),
        ("1 worker, Redis", {**redis, "ODYSSEUS_WORKERS": "1", "ODYSSEUS_REDIS_PREFIX": prefix_seed + "a:"}),
        (
            f"{cores} workers, Redis",
            {**redis, "ODYSSEUS_WORKERS": str(cores), "ODYSSEUS_REDIS_PREFIX": prefix_seed + "b:"},
        ),
    ]


def _added(samples, concurrency_: int) -> Tuple[float, float, int]:
    key = (concurrency_, 0.0)
    direct, app = samples[(key, "direct")], samples[(key, "app")]
    return (
        median(app["ttft"]) - median(direct["ttft"]),
        pct(app["ttft"], 0.99) - pct(direct["ttft"], 0.99),
        app["errors"],
    )


def run(quick: bool = False) -> Tuple[str, Dict[str, bool]]:
    """Run the comparison and return its Markdown section body and targets."""
    from redisserver import RedisServer, redis_available

    if not redis_available():
        return "redis-server is not installed: skipped.", {}
    plan = ((1, 20, 0.0), (100, 1, 0.0)) if quick else OVERHEAD_PLAN
    levels = (200, 500) if quick else LEVELS
    started = time.monotonic()
    rows = []
    held: Dict[str, int] = {}
    concurrency.TOKENS, concurrency.DELAY = 6, 1.0  # 6 s per level instead of 30 s: the ranking, not the soak
    with tempfile.TemporaryDirectory(prefix="odysseus-bench-redis-") as tmp, model_server() as model_port:
        redis = RedisServer(tmp).start()
        try:
            for name, env in _setups(redis.url, f"bench{os.getpid()}"):
                with app_server(model_port, {**env, "ODYSSEUS_EVICT_GRACE": "5"}) as app:
                    samples = asyncio.run(overhead.measure(model_port, app.port, origin(app), plan))
                c1_med, _, e1 = _added(samples, 1)
                _, c100_p99, e100 = _added(samples, 100)
                c100_med = _added(samples, 100)[0]
                env_c = {
                    **env,
                    "ODYSSEUS_HEARTBEAT_INTERVAL": str(concurrency.INTERVAL),
                    "ODYSSEUS_EVICT_GRACE": "5",
                    "ODYSSEUS_CONNECT_TIMEOUT": "30",
                }
                with app_server(model_port, env_c) as app:
                    levels_run = asyncio.run(concurrency.measure(app.port, origin(app), worker_pid(app), levels))
                ok = [r["n"] for r in levels_run if not r["errors"] and not r["late"]]
                held[name] = max(ok, default=0)
                worst = max((r["gap_max"] for r in levels_run), default=float("nan"))
                rows.append([name, ms(c1_med), ms(c100_med), ms(c100_p99), f"{e1}/{e100}", held[name], f"{worst:.2f}"])
        finally:
            redis.stop()
    body = table(
        [
            "set-up",
            "added first token, c=1 med (ms)",
            "c=100 med (ms)",
            "c=100 p99 (ms)",
            "errors c=1/c=100",
            f"streams held (of {'/'.join(map(str, levels))})",
            "worst gap (s)",
        ],
        rows,
    )
    body += (
        f"\n\nOverhead = app minus the model server itself, zero pacing, 200 tokens; concurrency levels run "
        f"{concurrency.TOKENS} tokens at {concurrency.DELAY:g} s. Duration: {time.monotonic() - started:.0f} s."
    )
    names = list(held)
    targets = (
        {"Redis (1 worker) holds as many streams as in-process": held[names[1]] >= held[names[0]]}
        if len(names) >= 2
        else {}
    )
    return body, targets


if __name__ == "__main__":
    text, met = run(quick=True)
    print(text)
    print(met)
