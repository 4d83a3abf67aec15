"""Micro-benchmark: which HTTP client should carry the provider requests (issue 39, item 3).

The same streaming POST to ``bench.model_server`` (a subprocess: its CPU is not counted), under
gevent's monkey patch as in the worker, through each candidate, every body read in large reads and
parsed by the same SSE reader (``llm.stream_reader.sse_batches``), so that only the HTTP client
differs:

- **odysseus**: ``llm.http.Transport``, the app's own socket client (what a turn uses);
- **urllib3**: urllib3 2.x alone, a ``PoolManager`` and ``HTTPResponse.read1`` (the largest reads
  its public API gives);
- **httpx**: an ``httpx.Client`` and ``Response.iter_raw``;
- **requests**: ``Session.post(stream=True)`` and ``iter_content(None)``.

Three figures per client, each the median over rounds in which the clients take turns (the box is
shared and noisy, so no client gets a quieter minute than another):

- CPU per streamed token: one zero-paced reply of ``--tokens`` tokens, read to its end;
- CPU per request: ``--requests`` one-token replies one after another on a kept-alive connection
  (send, head, body, back to the pool): what a turn start costs the HTTP client;
- CPU per paced token: ``--streams`` replies at once, one token every 5 ms each, as a worker reads
  its models' replies (a wait for the socket per token: the wake-up path).

``python -m bench.http_paths [--tokens 20000] [--requests 500] [--streams 50] [--rounds 5] [--only odysseus,urllib3]``
"""

from __future__ import annotations

import sys

if "--no-gevent" not in sys.argv:  # the worker runs under gevent's monkey patch: measure that
    from gevent import monkey

    monkey.patch_all()

import argparse
import json
import statistics
import time
from typing import Callable, Dict, Iterable, Iterator, List

from odysseus.cancel import CancelToken
from odysseus.llm.http import Timeouts, Transport
from odysseus.llm.stream_reader import sse_batches

from .common import HOST, model_server

READ_SIZE = 65536
PACING = 0.005  # seconds between a paced reply's tokens
HEADERS = {"Authorization": "Bearer bench-key"}

#: a client: (url, body) -> the body's raw chunks, read to the end (its connection then reusable)
Client = Callable[[str, dict], Iterator[bytes]]


def odysseus_client() -> Client:
    """The app's transport (``llm.http.Transport``)."""
    transport = Transport("bench", Timeouts(connect=10, first_token=60, idle=60), HEADERS)

    def post(url: str, body: dict) -> Iterator[bytes]:
        stream = transport.open(url, body, CancelToken())
        try:
            stream.mark_output()
            yield from stream.chunks()
            stream.finish()
        finally:
            stream.close()

    return post


def urllib3_client() -> Client:
    """urllib3 2.x without requests: a pool manager, ``read1`` of up to ``READ_SIZE``."""
    import urllib3

    pool = urllib3.PoolManager(maxsize=64, retries=False, timeout=urllib3.Timeout(connect=10, read=60))
    headers = {**HEADERS, "Content-Type": "application/json"}

    def post(url: str, body: dict) -> Iterator[bytes]:
        data = json.dumps(body).encode()
        response = pool.request("POST", url, body=data, headers=headers, preload_content=False)
        try:
            while True:
                chunk = response.read1(READ_SIZE)
                if not chunk:
                    break
                yield chunk
        finally:
            response.release_conn()

    return post


def httpx_client() -> Client:
    """httpx's synchronous client and ``iter_raw``."""
    import httpx

    client = httpx.Client(timeout=httpx.Timeout(60, connect=10), headers=HEADERS)

    def post(url: str, body: dict) -> Iterator[bytes]:
        with client.stream("POST", url, json=body) as response:
            yield from response.iter_raw(READ_SIZE)

    return post


def requests_client() -> Client:
    """``requests``: what the provider path fell back to before issue 39."""
    import requests

    session = requests.Session()

    def post(url: str, body: dict) -> Iterator[bytes]:
        with session.post(url, json=body, headers=HEADERS, stream=True, timeout=(10, 60)) as response:
            yield from response.iter_content(None)

    return post


CLIENTS: Dict[str, Callable[[], Client]] = {
    "odysseus": odysseus_client,
    "urllib3": urllib3_client,
    "httpx": httpx_client,
    "requests": requests_client,
}


def body_of(tokens: int) -> dict:
    """The request asking the bench model for ``tokens`` tokens at once."""
    return {"model": "bench", "stream": True, "messages": [{"role": "user", "content": f"tokens={tokens} delay=0"}]}


def events_in(chunks: Iterable[bytes]) -> int:
    """How many SSE events the chunks hold (parsed as every adapter parses them)."""
    return sum(len(batch) for batch in sse_batches(chunks))


def per_token(client: Client, url: str, tokens: int) -> float:
    """CPU seconds per token of one zero-paced reply of ``tokens`` tokens."""
    body = body_of(tokens)
    started = time.process_time()
    events = events_in(client(url, body))
    spent = time.process_time() - started
    if events < tokens:
        raise SystemExit(f"expected {tokens}+ events, got {events}")
    return spent / tokens


def per_request(client: Client, url: str, requests: int) -> float:
    """CPU seconds per one-token request, one after another on a kept-alive connection."""
    body = body_of(1)
    started = time.process_time()
    for _ in range(requests):
        if events_in(client(url, body)) < 1:
            raise SystemExit("a one-token reply without events")
    return (time.process_time() - started) / requests


def per_paced_token(client: Client, url: str, streams: int, tokens: int = 200) -> float:
    """CPU seconds per token of ``streams`` concurrent replies paced at ``PACING`` (greenlets: gevent only)."""
    import gevent

    body = {**body_of(tokens), "messages": [{"role": "user", "content": f"tokens={tokens} delay={PACING}"}]}
    started = time.process_time()
    jobs = [gevent.spawn(lambda: events_in(client(url, body))) for _ in range(streams)]
    gevent.joinall(jobs, raise_error=True)
    spent = time.process_time() - started
    if any(job.value < tokens for job in jobs):
        raise SystemExit("a paced reply came short")
    return spent / (streams * tokens)


def main() -> None:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=20_000)
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--streams", type=int, default=50, help="concurrent paced replies (0: skip)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--only", default=",".join(CLIENTS), help="comma-separated clients, in this order")
    parser.add_argument("--no-gevent", action="store_true", help="without gevent's monkey patch")
    args = parser.parse_args()
    names = [name for name in args.only.split(",") if name]
    with model_server() as port:
        url = f"http://{HOST}:{port}/v1/chat/completions"
        clients = {name: CLIENTS[name]() for name in names}
        for client in clients.values():  # warm-up: connections, imports, caches
            per_token(client, url, 1000)
            per_request(client, url, 20)
        paced = args.streams > 0 and not args.no_gevent
        token_cpu: Dict[str, List[float]] = {name: [] for name in names}
        request_cpu: Dict[str, List[float]] = {name: [] for name in names}
        paced_cpu: Dict[str, List[float]] = {name: [] for name in names}
        for _ in range(args.rounds):
            for name, client in clients.items():
                token_cpu[name].append(per_token(client, url, args.tokens))
                request_cpu[name].append(per_request(client, url, args.requests))
                if paced:
                    paced_cpu[name].append(per_paced_token(client, url, args.streams))
    print(
        f"tokens per reply: {args.tokens}, one-token requests per round: {args.requests}, "
        f"paced streams: {args.streams if paced else 0}, rounds: {args.rounds}"
    )
    columns = [("CPU/token us", token_cpu, 1e6), ("CPU/request us", request_cpu, 1e6)]
    if paced:
        columns.append(("CPU/paced token us", paced_cpu, 1e6))
    print(f"{'client':<10}" + "".join(f" {title:>18} {'vs first':>9}" for title, _, _ in columns))
    for name in names:
        cells = []
        for _title, figures, scale in columns:
            value, base = statistics.median(figures[name]), statistics.median(figures[names[0]])
            cells.append(f" {value * scale:>18.2f} {value / base:>8.2f}x")
        print(f"{name:<10}" + "".join(cells))


if __name__ == "__main__":
    main()
