"""Benchmark 2: how many concurrent detached runs one worker holds, each with a live subscriber.

Each run streams 12 tokens from the model server, one every 2.5 s (30 s per run), so the
subscriber lives mostly on heartbeats (``HEARTBEAT_INTERVAL`` 1 s). Streams are started
at 200 per second. A level passes when every stream answers 200, carries all 12 tokens
and ``[DONE]``, and no subscriber waited more than ``interval + 0.5 s`` between two reads.
Memory per stream is the worker's resident memory at the plateau minus before, over N.
The streams are spread over several client processes (``bench/client_procs.py``), so the
client's own event loop does not make heartbeats look late; its CPU (all its processes,
as a share of one core) is reported beside the worker's.
"""

from __future__ import annotations

import asyncio
import time
from typing import Dict, List, Tuple

from .client_procs import LEAD, default_procs, spread
from .common import HOST, app_server, cpu_seconds, median, model_server, origin, rss_mb, table, worker_pid

LEVELS = (500, 1000, 2000, 3000)
TOKENS, DELAY, INTERVAL = 12, 2.5, 1.0
RAMP_PER_SECOND = 200  # starting a run costs ~2.5 ms of worker CPU: 400/s would saturate it
LATE = INTERVAL + 0.5


async def level(
    app_port: int,
    headers: Dict[str, str],
    pid: int,
    n: int,
    tokens: int = 0,
    delay: float = 0.0,
    path: str = "/api/chat_stream",
    procs: int = 0,
) -> Dict:
    """Run ``n`` concurrent streams (``tokens`` at ``delay`` s, default the module's); return counts, gaps, memory.

    ``path="/v1/chat/completions"`` with the model server's port measures the client itself.
    ``procs``: client processes (default one per core, at least two).
    """
    tokens, delay = tokens or TOKENS, delay or DELAY
    before, cpu0, t0, own0 = rss_mb(pid), cpu_seconds(pid), time.monotonic(), time.process_time()
    prompt = f"hold tokens={tokens} delay={delay}"
    body = (
        {"message": prompt}
        if path == "/api/chat_stream"
        else {"model": "bench", "stream": True, "messages": [{"role": "user", "content": prompt}]}
    )

    procs = procs or default_procs()
    task = asyncio.ensure_future(spread(HOST, app_port, path, body, headers, n, RAMP_PER_SECOND, procs, timeout=120))
    ramp = n / RAMP_PER_SECOND
    await asyncio.sleep(LEAD + ramp + delay * tokens / 2)  # all started, half way through
    plateau = rss_mb(pid)
    results, children_cpu = await task
    wall = time.monotonic() - t0
    cpu = (cpu_seconds(pid) - cpu0) / wall
    client_cpu = (time.process_time() - own0 + children_cpu) / wall
    bad = [r for r in results if r.error or r.status != 200 or r.tokens != tokens or r.dones != 1]
    gaps = [r.max_gap for r in results if not r.error]
    late = delay + 0.5 if path != "/api/chat_stream" else min(LATE, delay + 0.5)
    at = [r.max_gap_at / r.total for r in results if not r.error and r.max_gap_at and r.total]
    return {
        "n": n,
        "gap_at_med": median(at),  # where in a stream its largest silence ended (0 start .. 1 end)
        "errors": len(bad),
        "late": sum(1 for g in gaps if g > late),
        "gap_med": median(gaps),
        "gap_max": max(gaps) if gaps else float("nan"),
        "heartbeats": sum(r.heartbeats for r in results),
        "rss_before": before,
        "rss_plateau": plateau,
        "per_stream_kb": (plateau - before) * 1024 / n,
        "cpu": cpu,
        "client_cpu": client_cpu,
        "sample_error": next((r.error or f"status {r.status} tokens {r.tokens}" for r in bad), ""),
    }


async def measure(app_port: int, headers: Dict[str, str], pid: int, levels) -> List[Dict]:
    """Each level in turn; stop climbing after a level fails."""
    out = []
    for n in levels:
        stats = await level(app_port, headers, pid, n)
        out.append(stats)
        if stats["errors"] or stats["late"]:
            break
        await asyncio.sleep(8)  # the previous level's logs pass their 5 s replay window
    return out


def report(rows: List[Dict]) -> Tuple[str, Dict[str, bool]]:
    """The Markdown table and the target."""
    held = max((r["n"] for r in rows if not r["errors"] and not r["late"]), default=0)
    body = table(
        [
            "streams",
            "errors",
            "late heartbeats",
            "median max gap (s)",
            "worst gap (s)",
            "heartbeats",
            "worker RSS before (MiB)",
            "at plateau (MiB)",
            "per stream (KiB)",
            "worker CPU",
            "client CPU",
        ],
        [
            [
                r["n"],
                r["errors"],
                r["late"],
                f"{r['gap_med']:.2f}",
                f"{r['gap_max']:.2f}",
                r["heartbeats"],
                f"{r['rss_before']:.0f}",
                f"{r['rss_plateau']:.0f}",
                f"{r['per_stream_kb']:.0f}",
                f"{r['cpu']:.0%}",
                f"{r['client_cpu']:.0%}",
            ]
            for r in rows
        ],
    )
    failures = [f"{r['n']}: {r['sample_error']}" for r in rows if r["sample_error"]]
    if failures:
        body += "\n\nFirst failure: " + "; ".join(failures)
    body += f"\n\nMost concurrent streams held with zero errors and on-time heartbeats: **{held}**."
    return body, {"held >= 2,000 concurrent streams": held >= 2000}


def run(quick: bool = False) -> Tuple[str, Dict[str, bool]]:
    """Run the benchmark and return its Markdown section body and targets."""
    levels = (200, 500) if quick else LEVELS
    env = {
        "ODYSSEUS_HEARTBEAT_INTERVAL": str(INTERVAL),
        "ODYSSEUS_EVICT_GRACE": "5",
        "ODYSSEUS_MAX_STREAMS_PER_USER": "100000",  # thousands of streams from one (single-user) client
        "ODYSSEUS_CONNECT_TIMEOUT": "30",
    }
    with model_server() as model_port, app_server(model_port, env) as app:
        started = time.monotonic()
        rows = asyncio.run(measure(app.port, origin(app), worker_pid(app), levels))
        text, targets = report(rows)
    return text + f"\n\nDuration: {time.monotonic() - started:.0f} s.", targets


if __name__ == "__main__":
    body, met = run(quick=True)
    print(body)
    print(met)
