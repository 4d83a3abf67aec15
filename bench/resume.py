"""Benchmark 4: resuming a finished 10,000-event run, from the start and from a cursor near the end.

One run of about 10,000 log events is made and left in its replay window. Then
``GET /api/chat/resume/<session>`` is timed, alternating "from the start" and
``?after=<count - 10>``: time to the first byte (the ``: connected`` comment), to the
first event frame (``id:``) and to the last byte (the stream ends at ``close``).
"""

from __future__ import annotations

import asyncio
import time
from typing import Dict, Tuple

import requests

from .client import request
from .common import HOST, app_server, median, model_server, ms, pct, table

EVENTS = 10_000
TRIALS = 100


async def measure(app_port: int, session: str, count: int, trials: int) -> Dict[str, Dict]:
    """Samples per kind."""
    kinds = {
        "from the start": f"/api/chat/resume/{session}",
        f"after={count - 10}": f"/api/chat/resume/{session}?after={count - 10}",
    }
    out = {k: {"first_byte": [], "first_event": [], "total": [], "errors": 0, "tokens": set()} for k in kinds}
    for index in range(trials + 3):
        order = list(kinds.items()) if index % 2 == 0 else list(reversed(kinds.items()))
        for kind, path in order:
            result = await request(HOST, app_port, "GET", path)
            if index < 3:
                continue  # warm-up
            bucket = out[kind]
            if result.error or result.status != 200 or result.first_event is None:
                bucket["errors"] += 1
                continue
            bucket["first_byte"].append(result.first_byte)
            bucket["first_event"].append(result.first_event)
            bucket["total"].append(result.total)
            bucket["tokens"].add(result.tokens)
    return out


def report(data: Dict[str, Dict], count: int) -> Tuple[str, Dict[str, bool]]:
    """The Markdown table and the target."""
    rows = []
    for kind, d in data.items():
        rows.append(
            [
                kind,
                len(d["total"]),
                ms(median(d["first_byte"])),
                ms(pct(d["first_byte"], 0.99)),
                ms(median(d["first_event"])),
                ms(pct(d["first_event"], 0.99)),
                ms(median(d["total"])),
                ms(pct(d["total"], 0.99)),
                d["errors"],
                ",".join(str(t) for t in sorted(d["tokens"])),
            ]
        )
    worst_byte = max(pct(d["first_byte"], 0.99) for d in data.values())
    worst_event = max(pct(d["first_event"], 0.99) for d in data.values())
    text = table(
        [
            "resume",
            "n",
            "first byte med",
            "first byte p99",
            "first event med",
            "first event p99",
            "last byte med",
            "last byte p99",
            "errors",
            "tokens received",
        ],
        rows,
    )
    text += f"\n\n(milliseconds; the run's log holds {count} events)"
    return text, {
        "resume first byte p99 <= 20 ms": worst_byte <= 0.020,
        "resume first event p99 <= 20 ms": worst_event <= 0.020,
    }


def run(quick: bool = False) -> Tuple[str, Dict[str, bool]]:
    """Run the benchmark and return its Markdown section body and targets."""
    env = {"ODYSSEUS_EVICT_GRACE": "900"}
    with model_server() as model_port, app_server(model_port, env) as app:
        started = time.monotonic()
        tokens = EVENTS - 8  # run_started, model_info, usage, metrics, message_saved, terminal, done, close
        with requests.post(
            app.url + "/api/chat_stream",
            json={"message": f"long tokens={tokens} delay=0"},
            headers={"Origin": app.url},
            stream=True,
            timeout=60,
        ) as response:
            session = response.headers["X-Odysseus-Session-Id"]
            for _ in response.iter_content(chunk_size=None):
                pass
        count = requests.get(f"{app.url}/api/chat/stream_status/{session}", timeout=10).json()["event_count"]
        data = asyncio.run(measure(app.port, session, count, 10 if quick else TRIALS))
        text, targets = report(data, count)
    return text + f"\n\nDuration: {time.monotonic() - started:.0f} s.", targets


if __name__ == "__main__":
    body, met = run(quick=True)
    print(body)
    print(met)
