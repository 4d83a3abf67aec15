"""Issue 22's targets, part 1: one worker under load (paced streams, a burst, CPU per token and turn, held runs).

Every function takes a ``size`` dict (see ``bench.targets.SIZES``) and returns rows
``(target, measured, direct or note, met)``; ``met`` is None where there is no verdict.
Direct (the model server itself) and the app are measured interleaved in the same run.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from typing import Dict, List, Optional, Tuple

from .client import Result, request
from .common import HOST, app_server, cpu_seconds, median, model_server, ms, origin, pct, worker_pid

Row = Tuple[str, str, str, Optional[bool]]
PACING = 0.005  # 5 ms per token: a fast real model (200 tokens/s)


def _direct_body(prompt: str) -> dict:
    return {"model": "bench", "stream": True, "messages": [{"role": "user", "content": prompt}]}


async def arrivals(
    path: str, n: int, spacing: float, prompt: str, model_port: int, app_port: int, headers: Dict[str, str]
) -> List[Result]:
    """``n`` requests on one path, the i-th opened ``i * spacing`` s after the first (0: all at once)."""

    async def one(i: int) -> Result:
        if spacing:
            await asyncio.sleep(i * spacing)
        if path == "direct":
            return await request(HOST, model_port, "POST", "/v1/chat/completions", _direct_body(prompt))
        return await request(HOST, app_port, "POST", "/api/chat_stream", {"message": prompt}, headers)

    return list(await asyncio.gather(*(one(i) for i in range(n))))


async def interleaved(
    n: int,
    spacing: float,
    prompt: str,
    tokens: int,
    rounds: int,
    model_port: int,
    app_port: int,
    headers: Dict[str, str],
) -> Dict[str, Dict[str, list]]:
    """Rounds of one batch per path, alternating which goes first, after one warm-up batch each."""
    out = {p: {"ttft": [], "total": [], "errors": 0} for p in ("direct", "app")}
    for path in ("direct", "app"):
        await arrivals(path, min(n, 10), spacing, prompt, model_port, app_port, headers)
    for index in range(rounds):
        for path in ("direct", "app") if index % 2 == 0 else ("app", "direct"):
            for r in await arrivals(path, n, spacing, prompt, model_port, app_port, headers):
                if r.error or r.status != 200 or r.first_token is None or r.tokens != tokens:
                    out[path]["errors"] += 1
                    continue
                out[path]["ttft"].append(r.first_token)
                out[path]["total"].append(r.total)
    return out


def _errors(d: Dict) -> str:
    return f"errors direct/app {d['direct']['errors']}/{d['app']['errors']}"


async def paced(size: Dict, model_port: int, app_port: int, headers: Dict[str, str], pid: int) -> List[Row]:
    """Streams in flight: one arrival every 10 ms, 5 ms per token, ~1 s replies."""
    n, tokens = size["paced_streams"], size["paced_tokens"]
    d = await interleaved(
        n, 0.010, f"paced tokens={tokens} delay={PACING}", tokens, size["paced_rounds"], model_port, app_port, headers
    )
    direct, app = d["direct"], d["app"]
    added_p99 = pct(app["ttft"], 0.99) - pct(direct["ttft"], 0.99)
    ratio = median(app["total"]) / median(direct["total"])
    return [
        (
            f"{n} paced streams (10 ms apart): added first token p99 <= 20 ms",
            f"+{ms(added_p99)} ms",
            f"direct p99 {ms(pct(direct['ttft'], 0.99))} ms, app {ms(pct(app['ttft'], 0.99))} ms; "
            f"n={len(app['ttft'])}; {_errors(d)}",
            added_p99 <= 0.020 and not app["errors"],
        ),
        (
            f"{n} paced streams: reply time within 5% of direct",
            f"{ratio:.3f}x",
            f"median last byte direct {ms(median(direct['total']))} ms, app {ms(median(app['total']))} ms",
            ratio <= 1.05 and not app["errors"],
        ),
    ]


async def burst(size: Dict, model_port: int, app_port: int, headers: Dict[str, str], pid: int) -> List[Row]:
    """Simultaneous arrivals of paced replies: the added median time to first token."""
    n, tokens = size["burst_streams"], size["paced_tokens"]
    d = await interleaved(
        n, 0.0, f"burst tokens={tokens} delay={PACING}", tokens, size["burst_rounds"], model_port, app_port, headers
    )
    added = median(d["app"]["ttft"]) - median(d["direct"]["ttft"])
    return [
        (
            f"burst of {n} simultaneous arrivals: added first token p50 <= 100 ms",
            f"+{ms(added)} ms",
            f"direct p50 {ms(median(d['direct']['ttft']))} ms, app p99 {ms(pct(d['app']['ttft'], 0.99))} ms; "
            f"{_errors(d)}",
            added <= 0.100 and not d["app"]["errors"],
        )
    ]


async def idle_rate(pid: int, seconds: float = 1.0) -> float:
    """The worker's CPU seconds per second while nothing is asked of it (timers, the writer thread)."""
    c0, t0 = cpu_seconds(pid), time.perf_counter()
    await asyncio.sleep(seconds)
    return (cpu_seconds(pid) - c0) / (time.perf_counter() - t0)


async def worker_cpu(pid: int, coro, idle_rate: float) -> Tuple[float, float]:
    """Worker CPU seconds spent while ``coro`` runs (plus a settle), less the idle rate; and its wall time."""
    cpu0, t0 = cpu_seconds(pid), time.perf_counter()
    await coro
    wall = time.perf_counter() - t0
    await asyncio.sleep(0.3)  # the turn's after-work (saves) ends after the last byte
    elapsed = time.perf_counter() - t0
    return max(0.0, cpu_seconds(pid) - cpu0 - idle_rate * elapsed), wall


async def turns(app_port: int, headers: Dict[str, str], count: int, clients: int, prompt: str) -> Tuple[int, float]:
    """``count`` turns through ``clients`` concurrent clients; (failures, wall seconds)."""
    failures = 0
    queue = iter(range(count))

    async def client() -> None:
        nonlocal failures
        for _ in queue:
            r = await request(HOST, app_port, "POST", "/api/chat_stream", {"message": prompt}, headers)
            if r.error or r.status != 200 or r.dones != 1:
                failures += 1

    t0 = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    return failures, time.perf_counter() - t0


async def cpu(size: Dict, model_port: int, app_port: int, headers: Dict[str, str], pid: int) -> List[Row]:
    """Worker CPU per turn (1-token replies) and per token (long replies minus short), and intake events/s."""
    long_tokens, intake_tokens = size["cpu_long_tokens"], size["intake_tokens"]
    await turns(app_port, headers, 20, 4, "warm tokens=1 delay=0")
    idle = await idle_rate(pid)
    short_n, long_n = size["cpu_short_turns"], size["cpu_long_turns"]
    short_cpu, _ = await worker_cpu(pid, turns(app_port, headers, short_n, 4, "short tokens=1 delay=0"), idle)
    long_cpu, _ = await worker_cpu(pid, turns(app_port, headers, long_n, 1, f"long tokens={long_tokens} delay=0"), idle)
    per_turn = short_cpu / short_n
    per_token = max(0.0, (long_cpu / long_n - per_turn) / (long_tokens - 1))
    results: List[Result] = []

    async def one_big() -> None:
        results.append(
            await request(
                HOST,
                app_port,
                "POST",
                "/api/chat_stream",
                {"message": f"intake tokens={intake_tokens} delay=0"},
                headers,
                timeout=300,
            )
        )

    big_cpu, _ = await worker_cpu(pid, one_big(), idle)
    big = results[0]
    ok = not big.error and big.tokens == intake_tokens and big.first_token is not None
    rate = intake_tokens / (big.total - big.first_token) if ok and big.total > big.first_token else 0.0
    direct = await request(
        HOST,
        model_port,
        "POST",
        "/v1/chat/completions",
        _direct_body(f"intake tokens={intake_tokens} delay=0"),
        timeout=300,
    )
    direct_rate = intake_tokens / direct.total if direct.total else 0.0
    tick = 1 / os.sysconf("SC_CLK_TCK")  # /proc counts CPU in clock ticks
    return [
        (
            "worker CPU per streamed token <= 10 µs",
            f"{per_token * 1e6:.1f} µs",
            f"({long_n} replies of {long_tokens} tokens minus {short_n} 1-token turns; "
            f"/proc tick {tick * 1000:.0f} ms)",
            per_token <= 10e-6,
        ),
        (
            "worker CPU per turn start <= ~1 ms",
            f"{per_turn * 1000:.2f} ms",
            f"({short_n} 1-token turns, 4 clients; idle {idle * 100:.1f}% subtracted)",
            per_turn <= 0.0011,
        ),
        (
            "intake >= 100k events/s per worker",
            f"{rate:,.0f} events/s",
            f"one {intake_tokens:,}-token reply, first token to last byte; worker CPU {big_cpu:.2f} s "
            f"({intake_tokens / big_cpu if big_cpu else 0:,.0f} events per CPU-second); direct read "
            f"{direct_rate:,.0f}/s{'' if ok else '; reply failed: ' + str(big.error or big.tokens)}",
            rate >= 100_000,
        ),
    ]


async def _health(app_port: int) -> Dict:
    r = await request(HOST, app_port, "GET", "/api/health", keep_body=True)
    body = r.body
    if r.headers.get("transfer-encoding") == "chunked":
        body = body.split(b"\r\n", 1)[1].rsplit(b"\r\n0\r\n", 1)[0]
    return json.loads(body)


async def _cost(size: Dict, model_port: int, app_port: int, headers: Dict[str, str]) -> Tuple[float, float, int]:
    """Added median time to first token at one stream (200 tokens, zero pacing) and 1-token turns/s (10 clients)."""
    d = await interleaved(1, 0.0, "cost tokens=200 delay=0", 200, size["held_samples"], model_port, app_port, headers)
    added = median(d["app"]["ttft"]) - median(d["direct"]["ttft"])
    count = size["held_turns"]
    failures, wall = await turns(app_port, headers, count, 10, "rate tokens=1 delay=0")
    return added, count / wall, failures + d["app"]["errors"]


async def held(size: Dict, model_port: int, app_port: int, headers: Dict[str, str], pid: int) -> List[Row]:
    """A turn's cost with 0 and with many finished runs held in the replay window (long EVICT_GRACE)."""
    added0, rate0, err0 = await _cost(size, model_port, app_port, headers)
    fill = size["held_runs"]
    failures, _ = await turns(app_port, headers, fill, 20, "fill tokens=1 delay=0")
    in_memory = (await _health(app_port)).get("runs_in_memory", "?")
    added1, rate1, err1 = await _cost(size, model_port, app_port, headers)
    note = (
        f"0 held: +{ms(added0)} ms, {rate0:.0f} turns/s; {in_memory} held: +{ms(added1)} ms, "
        f"{rate1:.0f} turns/s; errors {err0}/{err1}, fill failures {failures}"
    )
    # "does not grow": within the noise of this shared machine (20%, or 1 ms of added time)
    return [
        (
            f"added first token with {fill:,} runs held does not grow",
            f"+{ms(added0)} -> +{ms(added1)} ms",
            note,
            added1 <= max(added0 * 1.2, added0 + 0.001) and not err1,
        ),
        (
            f"turns/s with {fill:,} runs held does not fall",
            f"{rate0:.0f} -> {rate1:.0f} turns/s ({rate1 / rate0 if rate0 else 0:.2f}x)",
            "10 clients, 1-token turns",
            rate1 >= 0.8 * rate0 and not err1,
        ),
    ]


def run_part(fn, size: Dict, env: Optional[Dict[str, str]] = None, limit: float = 300) -> List[Row]:
    """One model server and one app server (one gevent worker) for ``fn``; ended by pid, bounded by ``limit``."""
    env = {"ODYSSEUS_MAX_STREAMS_PER_USER": "100000", **(env or {})}  # 100 streams from one (single-user) client
    with model_server() as model_port, app_server(model_port, env) as app:
        pid = worker_pid(app)
        return asyncio.run(asyncio.wait_for(fn(size, model_port, app.port, origin(app), pid), limit))
