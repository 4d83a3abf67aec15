"""Benchmark 16: what model titles cost the streams (issue 40), ``TITLE_MODE=model`` against ``first_line``.

``python -m bench.titles [--quick | --smoke]``

One paced model server (20 ms per token) and two apps, one with ``TITLE_MODE=model`` (each new
chat asks the model for a title after its first reply: a second, 32-token request, since the
model server honours ``max_tokens`` as a real one does) and one with ``first_line``. Steady state:
``n`` new chats arrive ``spacing`` apart, each a reply of ``tokens`` tokens, so the titles of the
first chats run while later chats start and stream. Rounds alternate the order of the three
paths (the model server directly, the app with model titles, the app with first-line titles),
so the machine's other load falls on all three alike.

Reported per app: added first token p99 and added inter-token gap p99 (app minus direct, the
gaps pooled over every token read after the first), the worker's CPU per chat, and how many
sessions got a model title (the check that titles really ran).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
import urllib.request
import json
from typing import Dict, List, Tuple

from .client import request
from .common import HOST, app_server, cpu_seconds, machine, median, model_server, ms, origin, pct, table, worker_pid

DELAY = 0.020  # 20 ms per token: the harness
#: (chats per round, spacing s, tokens per reply, rounds)
SIZES = {"full": (100, 0.020, 50, 4), "quick": (100, 0.040, 50, 3), "smoke": (20, 0.02, 10, 1)}
PATHS = ("direct", "model", "first_line")


def _signed(seconds: float) -> str:
    """Seconds as signed milliseconds (an app may beat direct within the noise)."""
    return f"{seconds * 1000:+.2f}"


def _titled(port: int, headers: Dict[str, str]) -> Tuple[int, int]:
    """(sessions, sessions whose title came from the model: the model server's tokens start ``tk``)."""
    total = titled = 0
    before = ""
    while True:
        url = f"http://{HOST}:{port}/api/sessions?limit=500" + (f"&before={before}" if before else "")
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30) as response:
            page = json.load(response)
        total += len(page["sessions"])
        titled += sum(1 for s in page["sessions"] if s["title"].startswith("tk"))
        if not page.get("has_more"):
            return total, titled
        before = page["next_before"]


async def _batch(path: str, n: int, spacing: float, prompt: str, ports: Dict[str, int], headers, gaps: List[float]):
    async def one(i: int):
        await asyncio.sleep(i * spacing)
        if path == "direct":
            body = {"model": "bench", "stream": True, "messages": [{"role": "user", "content": prompt}]}
            return await request(HOST, ports["direct"], "POST", "/v1/chat/completions", body, gaps=gaps)
        return await request(HOST, ports[path], "POST", "/api/chat_stream", {"message": prompt}, headers, gaps=gaps)

    return list(await asyncio.gather(*(one(i) for i in range(n))))


async def measure(size: str, ports: Dict[str, int], headers: Dict[str, Dict[str, str]], pids: Dict[str, int]) -> Dict:
    """Alternating rounds of the three paths; per path: first tokens, gaps, errors, worker CPU s."""
    n, spacing, tokens, rounds = SIZES[size]
    prompt = f"titles tokens={tokens} delay={DELAY}"
    out = {p: {"ttft": [], "gaps": [], "errors": 0, "cpu": 0.0, "chats": 0} for p in PATHS}
    for path in PATHS:  # warm-up: connections, caches, the first title route resolution
        await _batch(path, min(n, 10), spacing, prompt, ports, headers.get(path), [])
    await asyncio.sleep(1.5)
    for index in range(rounds):
        order = PATHS[index % 3 :] + PATHS[: index % 3]
        for path in order:
            pid = pids.get(path)
            cpu0 = cpu_seconds(pid) if pid else 0.0
            gaps: List[float] = []
            results = await _batch(path, n, spacing, prompt, ports, headers.get(path), gaps)
            await asyncio.sleep(1.0)  # the last titles (32 tokens at 20 ms) end before the next path starts
            if pid:
                out[path]["cpu"] += cpu_seconds(pid) - cpu0
            out[path]["gaps"] += gaps
            for r in results:
                if r.error or r.status != 200 or r.first_token is None or r.tokens != tokens:
                    out[path]["errors"] += 1
                    continue
                out[path]["ttft"].append(r.first_token)
                out[path]["chats"] += 1
    return out


def run(quick: bool = False, size: str = "") -> Tuple[str, Dict[str, bool]]:
    """Run benchmark 16; its Markdown body and its target."""
    size = size or ("quick" if quick else "full")
    n, spacing, tokens, rounds = SIZES[size]
    started, load0 = time.monotonic(), os.getloadavg()[0]
    with model_server(tokens, DELAY) as model_port:
        many = {"ODYSSEUS_MAX_STREAMS_PER_USER": "100000"}  # one user opens them all (the default is 32)
        with (
            app_server(model_port, {**many, "ODYSSEUS_TITLE_MODE": "model"}) as with_model,
            app_server(model_port, {**many, "ODYSSEUS_TITLE_MODE": "first_line"}) as with_line,
        ):
            ports = {"direct": model_port, "model": with_model.port, "first_line": with_line.port}
            headers = {"model": origin(with_model), "first_line": origin(with_line)}
            pids = {"model": worker_pid(with_model), "first_line": worker_pid(with_line)}
            data = asyncio.run(measure(size, ports, headers, pids))
            titled = {p: _titled(ports[p], headers[p]) for p in ("model", "first_line")}
    load1 = os.getloadavg()[0]
    direct = data["direct"]
    d_ttft, d_gap = pct(direct["ttft"], 0.99), pct(direct["gaps"], 0.99)
    rows, added = [], {}
    for path in PATHS:
        d = data[path]
        ttft99, gap99 = pct(d["ttft"], 0.99), pct(d["gaps"], 0.99)
        if path == "direct":
            rows.append([path, ms(median(d["ttft"])), ms(ttft99), "", ms(gap99), "", "", "", d["errors"]])
            continue
        added[path] = (ttft99 - d_ttft, gap99 - d_gap)
        sessions, by_model = titled[path]
        rows.append(
            [
                f"`TITLE_MODE={path}`",
                ms(median(d["ttft"])),
                ms(ttft99),
                _signed(ttft99 - d_ttft),
                ms(gap99),
                _signed(gap99 - d_gap),
                f"{d['cpu'] / max(1, d['chats']) * 1000:.2f}",
                f"{by_model}/{sessions}",
                d["errors"],
            ]
        )
    body = table(
        [
            "path",
            "first token p50 (ms)",
            "first token p99 (ms)",
            "added p99 (ms)",
            "inter-token gap p99 (ms)",
            "added gap p99 (ms)",
            "worker CPU per chat (ms)",
            "model titles / sessions",
            "errors",
        ],
        rows,
    )
    (m_ttft, m_gap), (f_ttft, f_gap) = added["model"], added["first_line"]

    def within(a: float, b: float) -> bool:  # 10%, or 2 ms where both are within the run's noise
        return a <= b * 1.10 or a - b <= 0.002

    body += (
        f"\n\n{n} new chats per round, one every {spacing * 1000:.0f} ms, {tokens} tokens at {DELAY * 1000:.0f} ms "
        f"(~{n * spacing:.1f} s of arrivals, ~{tokens * DELAY:.1f} s replies), {rounds} rounds per path, the three "
        f"paths alternating; the titles of the first chats of a round run while its later chats arrive. "
        f"Added first token p99: model titles {_signed(m_ttft)} ms, first line {_signed(f_ttft)} ms; added gap "
        f"p99: {_signed(m_gap)} ms and {_signed(f_gap)} ms. Load average {load0:.2f} at the start, {load1:.2f} "
        f"at the end; {machine()['cores']} cores. Duration: {time.monotonic() - started:.0f} s."
    )
    ok = not data["model"]["errors"] and not data["first_line"]["errors"] and titled["model"][1] > 0
    return body, {
        "16. model titles: added first token p99 within 10% of first_line": ok and within(m_ttft, f_ttft),
        "16. model titles: added inter-token gap p99 within 10% of first_line": ok and within(m_gap, f_gap),
    }


def main() -> None:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    text, met = run(size="smoke" if args.smoke else "quick" if args.quick else "full")
    print(text)
    for name, ok in met.items():
        print(f"- {'met' if ok else 'not met'}: {name}")


if __name__ == "__main__":
    main()
