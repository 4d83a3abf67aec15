"""Benchmark 11: the OpenAI-compatible API (/v1) against /api/chat_stream, side by side in one run.

The same 200-token reply (zero pacing) is asked for through ``POST /api/chat_stream``,
``POST /v1/chat/completions`` (``stream: true``) and ``POST /v1/responses`` (``stream: true``), and from
the model server directly, at 1 and at 100 concurrent streams. Rounds alternate the order of the
paths, so the machine's load falls on each alike. Reported per path: the median time to the first
token, what it adds to the model's own, and the worker CPU per reply (``/proc``, the idle rate
subtracted), each as a ratio to /api/chat_stream. Target (issue 33): within 10 % of /api/chat_stream.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Dict, List, Tuple

from .client import Result, request
from .common import HOST, app_server, median, model_server, ms, origin, table, worker_pid
from .targets_load import idle_rate, worker_cpu

TOKENS = 200
PROMPT = f"bench tokens={TOKENS} delay=0"
MODEL = "openai/bench"
PATHS = ("direct", "/api/chat_stream", "/v1/chat/completions", "/v1/responses")
#: (concurrency, groups, rounds): each round runs, on every path, ``groups`` batches of that many streams one
#: after the other (one worker-CPU sample: /proc counts in 10 ms ticks, so a sample spans many replies)
SIZES = {
    "full": ((1, 100, 8), (100, 2, 8)),
    "quick": ((1, 50, 4), (100, 1, 4)),
    "smoke": ((1, 10, 2), (100, 1, 1)),
}
TARGET = 1.10


def _call(path: str, model_port: int, app_port: int, headers: Dict[str, str]):
    if path == "direct":
        body = {"model": "bench", "stream": True, "messages": [{"role": "user", "content": PROMPT}]}
        return request(HOST, model_port, "POST", "/v1/chat/completions", body)
    if path == "/api/chat_stream":
        return request(HOST, app_port, "POST", path, {"message": PROMPT}, headers)
    if path == "/v1/chat/completions":
        body = {"model": MODEL, "stream": True, "messages": [{"role": "user", "content": PROMPT}]}
        return request(HOST, app_port, "POST", path, body, headers)
    return request(HOST, app_port, "POST", path, {"model": MODEL, "input": PROMPT, "stream": True}, headers)


def _ok(path: str, r: Result) -> bool:
    """A whole reply: every token arrived (the Responses stream repeats the text in its done events)."""
    if r.error or r.status != 200 or r.first_token is None:
        return False
    return r.tokens >= TOKENS if path == "/v1/responses" else r.tokens == TOKENS


async def _batch(path: str, n: int, ports: Tuple[int, int], headers: Dict[str, str], groups: int = 1) -> List[Result]:
    """``groups`` batches of ``n`` concurrent streams, one after the other."""
    out: List[Result] = []
    for _ in range(groups):
        out += await asyncio.gather(*(_call(path, ports[0], ports[1], headers) for _ in range(n)))
    return out


async def _measure(size: str, model_port: int, app_port: int, headers: Dict[str, str], pid: int) -> Dict:
    out: Dict = {}
    ports = (model_port, app_port)
    for path in PATHS:  # warm-up: connections, caches, SQLite pages
        await _batch(path, 10, ports, headers)
    for concurrency, groups, rounds in SIZES[size]:
        samples = {p: {"ttft": [], "cpu": [], "errors": 0} for p in PATHS}
        idle = await idle_rate(pid, 0.5)
        for index in range(rounds):
            shift = index % len(PATHS)
            for path in PATHS[shift:] + PATHS[:shift]:
                batch = _batch(path, concurrency, ports, headers, groups)
                if path == "direct":
                    results = await batch
                else:
                    holder: List[List[Result]] = []

                    async def run(batch=batch, holder=holder) -> None:
                        holder.append(await batch)

                    used, _wall = await worker_cpu(pid, run(), idle)
                    results = holder[0]
                    samples[path]["cpu"].append(used / (concurrency * groups))
                for r in results:
                    if not _ok(path, r):
                        samples[path]["errors"] += 1
                        continue
                    samples[path]["ttft"].append(r.first_token)
        out[concurrency] = samples
    return out


def measure(size: str = "full") -> Dict:
    """Start the model server and the app; measure the paths in alternating rounds."""
    env = {"ODYSSEUS_MAX_STREAMS_PER_USER": "100000"}  # 100 streams from one (single-user) client
    with model_server(TOKENS) as model_port, app_server(model_port, env) as app:
        coro = _measure(size, model_port, app.port, origin(app), worker_pid(app))
        return asyncio.run(asyncio.wait_for(coro, 1200))


def report(data: Dict) -> Tuple[str, Dict[str, bool]]:
    """The side-by-side table and the verdicts against /api/chat_stream."""
    rows, verdicts = [], {}
    for concurrency, samples in data.items():
        direct = median(samples["direct"]["ttft"])
        base_ttft = median(samples["/api/chat_stream"]["ttft"])
        base_cpu = median(samples["/api/chat_stream"]["cpu"])
        for path in PATHS:
            d = samples[path]
            ttft = median(d["ttft"])
            cpu = median(d["cpu"]) if d["cpu"] else None
            rows.append(
                [
                    str(concurrency),
                    f"`{path}`",
                    f"{ms(ttft)} ms",
                    f"+{ms(ttft - direct)} ms" if path != "direct" else "-",
                    f"{ttft / base_ttft:.2f}x" if path != "direct" else "-",
                    f"{cpu * 1000:.2f} ms" if cpu is not None else "-",
                    f"{cpu / base_cpu:.2f}x" if cpu is not None else "-",
                    str(d["errors"]),
                ]
            )
            if path.startswith("/v1/") and cpu is not None:
                name = f"{path} at {concurrency} stream{'s' if concurrency > 1 else ''}"
                verdicts[f"{name}: first token within 10 % of /api/chat_stream"] = ttft / base_ttft <= TARGET
                verdicts[f"{name}: worker CPU per reply within 10 % of /api/chat_stream"] = cpu / base_cpu <= TARGET
    header = ["streams", "path", "first token p50", "added", "vs chat_stream", "worker CPU per reply"]
    header += ["vs chat_stream", "errors"]
    return table(header, rows), verdicts


def run(quick: bool = False) -> Tuple[str, Dict[str, bool]]:
    """For ``bench.run_all``."""
    return report(measure("quick" if quick else "full"))


def main() -> None:
    """Command line entry point: ``python -m bench.openai_api [--quick|--smoke]``."""
    size = "quick" if "--quick" in sys.argv else "smoke" if "--smoke" in sys.argv else "full"
    text, verdicts = report(measure(size))
    print(text)
    for name, ok in verdicts.items():
        print(f"- {'met' if ok else 'not met'}: {name}")


if __name__ == "__main__":
    main()
