"""Benchmark 3: events per second one worker delivers when the model streams as fast as it can.

A run of 20,000 tokens at zero pacing, followed by one subscriber (the POST itself) or by
ten (the POST plus nine ``/api/chat/resume`` readers started as soon as the session is
known; they replay from the start and then follow live). The direct path (the same
client reading the model server) is the physical limit. Trials are interleaved.
Delivered events per second = token frames received by all subscribers / wall time.
"""

from __future__ import annotations

import asyncio
import time
from typing import Dict, List, Tuple

from .client import Result, request
from .common import HOST, app_server, median, model_server, table

TOKENS = 20_000
TRIALS = 5


async def _trial(kind: str, model_port: int, app_port: int, headers: Dict[str, str]) -> Tuple[float, int, int]:
    prompt = f"fast tokens={TOKENS} delay=0"
    t0 = time.perf_counter()
    if kind == "direct":
        body = {"model": "bench", "stream": True, "messages": [{"role": "user", "content": prompt}]}
        result = await request(HOST, model_port, "POST", "/v1/chat/completions", body)
        return time.perf_counter() - t0, result.tokens, int(bool(result.error))
    followers: List[asyncio.Future] = []

    def follow(head: Result) -> None:
        if kind == "app x10":
            session = head.headers.get("x-odysseus-session-id")
            followers.extend(
                asyncio.ensure_future(request(HOST, app_port, "GET", f"/api/chat/resume/{session}", headers=headers))
                for _ in range(9)
            )

    first = await request(HOST, app_port, "POST", "/api/chat_stream", {"message": prompt}, headers, on_headers=follow)
    results = [first] + list(await asyncio.gather(*followers))
    errors = sum(1 for r in results if r.error or r.status != 200 or r.tokens != TOKENS)
    return time.perf_counter() - t0, sum(r.tokens for r in results), errors


async def measure(model_port: int, app_port: int, headers: Dict[str, str], trials: int) -> Dict[str, Dict]:
    """Per kind: events/s of each trial and errors."""
    kinds = ("direct", "app x1", "app x10")
    out = {k: {"rates": [], "errors": 0, "seconds": []} for k in kinds}
    await _trial("app x1", model_port, app_port, headers)  # warm-up
    for index in range(trials):
        order = kinds if index % 2 == 0 else tuple(reversed(kinds))
        for kind in order:
            seconds, events, errors = await _trial(kind, model_port, app_port, headers)
            out[kind]["rates"].append(events / seconds)
            out[kind]["seconds"].append(seconds)
            out[kind]["errors"] += errors
    return out


def report(data: Dict[str, Dict]) -> str:
    """The Markdown table."""
    direct = median(data["direct"]["rates"])
    rows = [
        [
            kind,
            len(d["rates"]),
            f"{median(d['rates']):,.0f}",
            f"{median(d['rates']) / direct:.3f}",
            f"{median(d['seconds']):.3f}",
            d["errors"],
        ]
        for kind, d in data.items()
    ]
    return table(["path", "trials", "events/s (median)", "ratio to direct", "run wall time (s)", "errors"], rows)


def run(quick: bool = False) -> Tuple[str, Dict[str, bool]]:
    """Run the benchmark and return its Markdown section body (no numeric target in the issue)."""
    env = {"ODYSSEUS_EVICT_GRACE": "2"}
    with model_server() as model_port, app_server(model_port, env) as app:
        started = time.monotonic()
        data = asyncio.run(measure(model_port, app.port, {"Origin": app.url}, 2 if quick else TRIALS))
    return report(data) + f"\n\nDuration: {time.monotonic() - started:.0f} s.", {}


if __name__ == "__main__":
    body, _ = run(quick=True)
    print(body)
