"""Benchmark 1: overhead of /api/chat_stream against the model server itself (the physical limit).

The same 200-token reply (zero pacing) is requested directly from the model server and
through the app, at 1, 10 and 100 concurrent streams. Trials are interleaved: each round
runs one batch on each path, alternating which goes first. Besides the contract's zero
pacing, a paced model (5 ms per token) is measured at 1 and 100 streams. Reported: time to the first
token and to the last byte, medians and p99, the milliseconds the app adds and the ratio.
"""

from __future__ import annotations

import asyncio
import time
from typing import Dict, List, Tuple

from .client import request
from .common import HOST, app_server, median, model_server, ms, origin, pct, table

#: (concurrency, rounds, seconds between tokens): about 400-1000 samples per path for the
#: contract's zero pacing; a paced model (5 ms/token, 200 tokens/s) shows the everyday case.
PLAN = ((1, 400, 0.0), (10, 60, 0.0), (100, 10, 0.0), (1, 20, 0.005), (100, 3, 0.005))
TOKENS = 200
Key = Tuple[int, float]


async def _batch(path: str, n: int, delay: float, model_port: int, app_port: int, headers: Dict[str, str]) -> List:
    prompt = f"bench tokens={TOKENS} delay={delay}"
    if path == "direct":
        body = {"model": "bench", "stream": True, "messages": [{"role": "user", "content": prompt}]}
        calls = [request(HOST, model_port, "POST", "/v1/chat/completions", body) for _ in range(n)]
    else:
        calls = [request(HOST, app_port, "POST", "/api/chat_stream", {"message": prompt}, headers) for _ in range(n)]
    return await asyncio.gather(*calls)


async def measure(model_port: int, app_port: int, headers: Dict[str, str], plan=PLAN) -> Dict[Tuple[Key, str], Dict]:
    """Samples per ((concurrency, pacing), path): ttft and total lists, errors."""
    out: Dict[Tuple[Key, str], Dict] = {}
    for concurrency, rounds, delay in plan:
        key = (concurrency, delay)
        for path in ("direct", "app"):
            out[(key, path)] = {"ttft": [], "total": [], "errors": 0, "short": 0}
        for _ in range(1 if delay else 3):  # warm-up: connections, caches, SQLite pages
            for path in ("direct", "app"):
                await _batch(path, concurrency, delay, model_port, app_port, headers)
        for index in range(rounds):
            order = ("direct", "app") if index % 2 == 0 else ("app", "direct")
            for path in order:
                for result in await _batch(path, concurrency, delay, model_port, app_port, headers):
                    bucket = out[(key, path)]
                    if result.error or result.status != 200 or result.first_token is None:
                        bucket["errors"] += 1
                        continue
                    if result.tokens != TOKENS:
                        bucket["short"] += 1
                    bucket["ttft"].append(result.first_token)
                    bucket["total"].append(result.total)
    return out


def report(samples: Dict[Tuple[Key, str], Dict]) -> Tuple[str, Dict[str, bool]]:
    """The Markdown table and the targets met (the targets are about zero pacing)."""
    rows = []
    targets = {}
    for key in sorted({k for k, _ in samples}, key=lambda k: (k[1], k[0])):
        concurrency, delay = key
        direct, app = samples[(key, "direct")], samples[(key, "app")]
        for metric in ("ttft", "total"):
            d_med, a_med = median(direct[metric]), median(app[metric])
            d_p99, a_p99 = pct(direct[metric], 0.99), pct(app[metric], 0.99)
            rows.append(
                [
                    concurrency,
                    f"{delay * 1000:g} ms" if delay else "none",
                    "first token" if metric == "ttft" else "last byte",
                    len(app[metric]),
                    ms(d_med),
                    ms(a_med),
                    ms(a_med - d_med),
                    f"{a_med / d_med:.2f}",
                    ms(d_p99),
                    ms(a_p99),
                    ms(a_p99 - d_p99),
                    f"{a_p99 / d_p99:.2f}",
                    f"{direct['errors']}/{app['errors']}",
                    f"{direct['short']}/{app['short']}",
                ]
            )
            if delay:
                continue
            if concurrency == 1 and metric == "ttft":
                targets["added median first token at c=1 <= 1 ms"] = (a_med - d_med) <= 0.001
            if concurrency == 100 and metric == "ttft":
                targets["added p99 first token at c=100 <= 5 ms"] = (a_p99 - d_p99) <= 0.005
            if concurrency == 100 and metric == "total":
                targets["added p99 last byte at c=100 <= 5 ms"] = (a_p99 - d_p99) <= 0.005
    header = [
        "streams",
        "pacing",
        "time to",
        "n",
        "direct med",
        "app med",
        "added med",
        "ratio med",
        "direct p99",
        "app p99",
        "added p99",
        "ratio p99",
        "errors d/a",
        "short d/a",
    ]
    return table(header, rows) + "\n\n(milliseconds; `short`: replies with fewer than 200 tokens)", targets


def run(quick: bool = False) -> Tuple[str, Dict[str, bool]]:
    """Run the benchmark and return its Markdown section body and targets."""
    plan = ((1, 40, 0.0), (10, 6, 0.0), (100, 2, 0.0), (1, 4, 0.005)) if quick else PLAN
    with model_server() as model_port, app_server(model_port) as app:
        started = time.monotonic()
        samples = asyncio.run(measure(model_port, app.port, origin(app), plan))
        text, targets = report(samples)
    return text + f"\n\nDuration: {time.monotonic() - started:.0f} s.", targets


if __name__ == "__main__":
    body, met = run(quick=True)
    print(body)
    print(met)
