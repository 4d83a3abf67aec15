"""Issue 22's targets, part 2: holding, memory, resume and the Redis backend with N workers.

Each function takes a ``size`` dict (``bench.targets.SIZES``) and returns rows
``(target, measured, note, met)``, starting and ending (by pid) its own processes.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from typing import Dict, List

import requests

from . import concurrency, memory, resume
from .common import app_server, cpu_seconds, median, model_server, ms, origin, pct, worker_pid
from .targets_load import Row, turns


def _held(rows: List[Dict]) -> int:
    return max((r["n"] for r in rows if not r["errors"] and not r["late"]), default=0)


async def _levels(
    port: int, headers: Dict[str, str], pid: int, levels, path: str, tokens: int, delay: float, pause: float = 8.0
) -> List[Dict]:
    out: List[Dict] = []
    for n in levels:
        out.append(await concurrency.level(port, headers, pid, n, tokens, delay, path))
        if out[-1]["errors"] or out[-1]["late"]:
            break
        await asyncio.sleep(pause)  # the previous level's logs pass their replay window
    return out


def _level_note(rows: List[Dict], worker: bool = True) -> str:
    return "; ".join(
        f"{r['n']}: {r['errors']} errors, {r['late']} late, worst gap {r['gap_max']:.2f} s, "
        f"client CPU {r['client_cpu']:.0%}"
        + (f", worker CPU {r['cpu']:.0%}, {r['per_stream_kb']:.0f} KiB/stream" if worker else "")
        + (f" ({r['sample_error'][:60]})" if r["sample_error"] else "")
        for r in rows
    )


def detached(size: Dict) -> List[Row]:
    """Detached streams with a live subscriber each; the client alone is measured first against the model server."""
    levels, tokens, delay = size["detached_levels"], size["hold_tokens"], size["hold_delay"]
    env = {
        "ODYSSEUS_HEARTBEAT_INTERVAL": "1",
        "ODYSSEUS_EVICT_GRACE": "5",
        "ODYSSEUS_CONNECT_TIMEOUT": "30",
        "ODYSSEUS_MAX_STREAMS_PER_USER": "100000",
    }
    with model_server() as model_port:
        client_rows = asyncio.run(
            asyncio.wait_for(
                _levels(model_port, {}, os.getpid(), levels[-1:], "/v1/chat/completions", tokens, delay, 0),
                tokens * delay + levels[-1] / 100 + 120,
            )
        )
        with app_server(model_port, env) as app:
            app_rows = asyncio.run(
                asyncio.wait_for(
                    _levels(app.port, origin(app), worker_pid(app), levels, "/api/chat_stream", tokens, delay),
                    len(levels) * (tokens * delay + 60) + sum(levels) / 100,
                )
            )
    held, client_ok = _held(app_rows), _held(client_rows)
    return [
        (
            f"detached streams held with on-time heartbeats >= 5,000 (levels {'/'.join(map(str, levels))})",
            f"{held:,}",
            f"app: {_level_note(app_rows)}. Client alone against the model server: "
            f"{_level_note(client_rows, worker=False)}",
            held >= 5000 if client_ok else None,
        )
    ]


def rss(size: Dict) -> List[Row]:
    """Worker RSS at the start and after many runs are evicted (bench/memory.py's measurement)."""
    with model_server() as model_port, app_server(model_port, {"ODYSSEUS_EVICT_GRACE": str(memory.GRACE)}) as app:
        d = asyncio.run(
            asyncio.wait_for(memory.measure(app.port, origin(app), worker_pid(app), size["memory_runs"]), 900)
        )
    growth = (d["after_grace"] - d["start"]) / d["start"]
    return [
        (
            f"worker RSS within 10% of the start after {d['runs']:,} runs evicted",
            f"{growth:+.1%}",
            f"start {d['start']:.1f} MiB, right after {d['after_runs']:.1f}, after the grace {d['after_grace']:.1f}; "
            f"{d['failures']} failures, {d['runs'] / d['seconds']:.0f} runs/s",
            growth <= 0.10 and not d["failures"],
        )
    ]


def replay(size: Dict) -> List[Row]:
    """A resume's first event for a long log: from the start and from a cursor near the end."""
    events = size["resume_events"]
    with model_server() as model_port, app_server(model_port, {"ODYSSEUS_EVICT_GRACE": "900"}) as app:
        with requests.post(
            app.url + "/api/chat_stream",
            json={"message": f"long tokens={events - 8} delay=0"},
            headers=origin(app),
            stream=True,
            timeout=300,
        ) as response:
            session = response.headers["X-Odysseus-Session-Id"]
            for _ in response.iter_content(chunk_size=None):
                pass
        count = requests.get(f"{app.url}/api/chat/stream_status/{session}", timeout=10).json()["event_count"]
        data = asyncio.run(asyncio.wait_for(resume.measure(app.port, session, count, size["resume_trials"]), 600))
    rows: List[Row] = []
    for kind, d in data.items():
        p99 = pct(d["first_event"], 0.99)
        rows.append(
            (
                f"resume's first event < 5 ms ({kind}, {count:,}-event log)",
                f"p99 {ms(p99)} ms",
                f"median {ms(median(d['first_event']))} ms, last byte median {ms(median(d['total']))} ms, "
                f"n={len(d['first_event'])}, errors {d['errors']}",
                p99 < 0.005 and not d["errors"],
            )
        )
    return rows


def _redis_setup(model_port: int, env: Dict[str, str], size: Dict) -> Dict:
    """Throughput (turns/s, 20 clients, 20-token turns) and held streams for one set-up."""
    with app_server(model_port, env) as app:
        pids = app.worker_pids()
        cpu0 = sum(cpu_seconds(p) for p in pids)
        failures, wall = asyncio.run(
            asyncio.wait_for(turns(app.port, origin(app), size["redis_turns"], 20, "rate tokens=20 delay=0"), 300)
        )
        cpu = sum(cpu_seconds(p) for p in pids) - cpu0
    hold_env = {
        **env,
        "ODYSSEUS_HEARTBEAT_INTERVAL": "1",
        "ODYSSEUS_CONNECT_TIMEOUT": "30",
        "ODYSSEUS_MAX_STREAMS_PER_USER": "100000",
    }
    with app_server(model_port, hold_env) as app:
        rows = asyncio.run(
            asyncio.wait_for(
                _levels(app.port, origin(app), worker_pid(app), size["redis_levels"], "/api/chat_stream", 6, 1.0, 6),
                600,
            )
        )
    return {
        "rate": size["redis_turns"] / wall,
        "failures": failures,
        "cpu_per_turn": cpu / size["redis_turns"],
        "held": _held(rows),
        "rows": rows,
    }


def redis_scaling(size: Dict) -> List[Row]:
    """Redis backend with 1 and 2 workers: turns/s and held streams, the ratio per worker added."""
    from redisserver import RedisServer, redis_available

    if not redis_available():
        return [("Redis backend scales with workers", "skipped", "redis-server is not installed", None)]
    workers = max(2, min(2, os.cpu_count() or 2))
    out: Dict[int, Dict] = {}
    with tempfile.TemporaryDirectory(prefix="odysseus-bench-redis-") as tmp, model_server() as model_port:
        redis = RedisServer(tmp).start()
        try:
            for n in (1, workers):
                env = {
                    "ODYSSEUS_RUN_BACKEND": "redis",
                    "ODYSSEUS_REDIS_URL": redis.url,
                    "ODYSSEUS_WORKERS": str(n),
                    "ODYSSEUS_REDIS_PREFIX": f"bench{os.getpid()}w{n}:",
                    "ODYSSEUS_EVICT_GRACE": "5",
                }
                out[n] = _redis_setup(model_port, env, size)
        finally:
            redis.stop()
    one, many = out[1], out[workers]
    rate_ratio = many["rate"] / one["rate"] if one["rate"] else 0.0
    held_ratio = many["held"] / one["held"] if one["held"] else (float("inf") if many["held"] else 0.0)
    per_worker = (rate_ratio - 1) / (workers - 1)
    levels = "/".join(map(str, size["redis_levels"]))
    note = (
        f"1 worker {one['rate']:.0f} turns/s ({one['cpu_per_turn'] * 1000:.2f} ms worker CPU/turn, "
        f"{one['failures']} failures), held {one['held']}; {workers} workers {many['rate']:.0f} turns/s "
        f"({many['failures']} failures), held {many['held']} (levels {levels}); the client, the model server and "
        f"redis share the {os.cpu_count()} cores"
    )
    return [
        (
            f"Redis, {workers} workers: turns/s scale with the cores (+>=0.5x per worker added)",
            f"{rate_ratio:.2f}x (+{per_worker:.2f}x per worker)",
            note,
            per_worker >= 0.5 and not many["failures"],
        ),
        (
            f"Redis, {workers} workers: held streams scale with the cores",
            f"{one['held']} -> {many['held']}" + (f" ({held_ratio:.2f}x)" if one["held"] else ""),
            f"largest level held: {one['held']} -> {many['held']} (levels stop at {size['redis_levels'][-1]})",
            # no verdict when 1 worker already holds the top level, or neither holds the first
            held_ratio >= 1.5 if one["held"] < size["redis_levels"][-1] and (one["held"] or many["held"]) else None,
        ),
    ]
