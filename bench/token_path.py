"""Micro-benchmark: worker CPU per streamed token, in seconds, on the real per-token path.

One process reads a zero-paced reply of ``--tokens`` tokens from ``bench.model_server`` (a
subprocess, so its CPU is not counted) through the real OpenAI-compatible adapter and
``stream_route`` (HTTP reads, SSE parsing, text repair, metrics), then does what the run
engine does with every event (``RunEngine._drive``'s append: the run log's numbering and JSON, the
run's accumulated state, the durable queue) and encodes the chat projection's frame for one
subscriber. Reported: ``time.process_time()`` per token (median of the trials) and the
events per second that CPU allows.

``python -m bench.token_path [--tokens 20000] [--trials 5] [--no-gevent]``
"""

from __future__ import annotations

import sys

if "--no-gevent" not in sys.argv:  # the worker runs under gevent's monkey patch: measure that
    from gevent import monkey

    monkey.patch_all()

import argparse
import collections
import statistics
import time
from typing import List

from odysseus.cancel import CancelToken
from odysseus.events import DELTA, PROVIDER_ONLY
from odysseus.llm.base import ChatRequest, ProviderConfig
from odysseus.llm.llm_core import Candidate, stream_route
from odysseus.llm.openai_compat import OpenAICompatProvider
from odysseus.runs.run import Run
from odysseus.runs.run_log import RunLog, greenlets_only
from odysseus.sse import chat_frame

from .common import model_server


def one_turn(provider: OpenAICompatProvider, tokens: int) -> float:
    """CPU seconds for one reply of ``tokens`` tokens, read, logged and projected."""
    log = RunLog(max_events=tokens * 2 + 100, max_bytes=1 << 30)
    run = Run(
        run_id="r",
        session_id="s",
        owner="o",
        mode="chat",
        model="bench",
        client_message_id=None,
        user_message_id=None,
        log=log,
        terminal_type="chat_terminal",
    )
    pending: collections.deque = collections.deque()
    request = ChatRequest(model="bench", messages=[{"role": "user", "content": f"fast tokens={tokens} delay=0"}])
    deltas = 0
    sent = 0
    inline = greenlets_only()
    started = time.process_time()
    for event in stream_route([Candidate(provider, "bench")], request, CancelToken()):
        if event.type in PROVIDER_ONLY:
            run.observe(event)
            continue
        if inline:  # what RunEngine._drive does per event among greenlets (no lock: see _drive)
            entry = log.append(event)
            run.observe(event)
        else:
            with run.lock:  # RunEngine._append, with native threads
                entry = log.append(event)
                run.observe(event)
        pending.append((run.run_id, entry[0].seq, entry[0].type, entry[1]))
        frame = chat_frame(*entry)
        sent += len(frame or "")
        deltas += event.type == DELTA
    spent = time.process_time() - started
    if deltas != tokens:
        raise SystemExit(f"expected {tokens} deltas, got {deltas}")
    return spent


def main() -> None:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=20_000)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--no-gevent", action="store_true", help="without gevent's monkey patch")
    args = parser.parse_args()
    with model_server() as port:
        cfg = ProviderConfig(name="bench", kind="openai", base_url=f"http://127.0.0.1:{port}/v1", models=["bench"])
        provider = OpenAICompatProvider(cfg, {})
        one_turn(provider, 1000)  # warm-up: the connection, imports, caches
        spent: List[float] = [one_turn(provider, args.tokens) for _ in range(args.trials)]
    per_token = statistics.median(spent) / args.tokens
    print(f"tokens per trial: {args.tokens}, trials: {args.trials}")
    trials = ", ".join(f"{s / args.tokens * 1e6:.2f}" for s in spent)
    print(f"CPU per token: {per_token * 1e6:.2f} us (trials: {trials})")
    print(f"events/s this CPU allows: {1 / per_token:,.0f}")


if __name__ == "__main__":
    main()
