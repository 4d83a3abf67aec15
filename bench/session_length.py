"""Micro-benchmark: a turn's worker CPU as its session grows (every turn reads the session's history).

One gunicorn worker and the bench model server; one client sends one-token turns into ONE session,
one after another, in blocks of 100. Each turn adds two messages, so a block starts where the last
ended; the worker's CPU per turn is printed per block. A turn reads up to
``HISTORY_CONTEXT_MESSAGES`` (1,000) of the session's newest messages, builds the model's context
from them and trims it to the window, so the CPU per turn grows with the session until that cap.

Run: ``python -m bench.session_length [--turns 500]``.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import List, Tuple

from .client import request
from .common import HOST, app_server, cpu_seconds, model_server, origin, worker_pid

BLOCK = 100


async def _turns(port: int, headers: dict, session: str, count: int) -> None:
    for _ in range(count):
        r = await request(
            HOST, port, "POST", "/api/chat_stream", {"message": "more tokens=1 delay=0", "session": session}, headers
        )
        if r.status != 200 or r.dones != 1:
            raise RuntimeError(f"turn failed: {r.status} {r.error}")


def measure(turns: int = 500) -> List[Tuple[int, float]]:
    """(messages in the session when the block started, worker CPU ms per turn) per block of 100 turns."""
    out: List[Tuple[int, float]] = []
    with model_server() as model_port, app_server(model_port, {"ODYSSEUS_MAX_STREAMS_PER_USER": "100000"}) as app:
        headers, pid = origin(app), worker_pid(app)
        first = asyncio.run(request(HOST, app.port, "POST", "/api/chat_stream", {"message": "start tokens=1"}, headers))
        session = first.headers["x-odysseus-session-id"]
        for block in range(max(1, turns // BLOCK)):
            cpu0 = cpu_seconds(pid)
            asyncio.run(_turns(app.port, headers, session, BLOCK))
            time.sleep(0.2)  # the last turn's final save
            out.append((2 + block * 2 * BLOCK, (cpu_seconds(pid) - cpu0) / BLOCK * 1000))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=500)
    args = parser.parse_args()
    for messages, ms in measure(args.turns):
        print(f"session of {messages:5d} messages: {ms:6.2f} ms of worker CPU per turn")


if __name__ == "__main__":
    main()
