"""Benchmark 6: the durable run log (every event written through to SQLite) against none.

Side by side in one run, two app servers on one model server: the default (write-through
on) and ``ODYSSEUS_DURABLE_EVENTS=false``. Trials alternate between them.

1. **Cost**: events per second of one 20,000-token run at zero pacing (one subscriber), and
   the time to the first token and to the last byte of a 200-token reply at one stream.
2. **Unrelated requests under heavy writing**: ten concurrent replies of 16 MB each (4,000
   tokens of 4 KB at zero pacing) while one client sends ``GET /api/health`` and ``GET
   /api/sessions`` (a small JSON route that reads SQLite) back to back; their p50/p95/max.
3. **Text lost on kill -9**: five paced runs (200 tokens/s), the server killed with SIGKILL
   mid-reply and restarted on the same data; per run, what the client had received minus
   the partial saved by recovery, in characters and in time at the token rate, against
   ``EVENT_FLUSH_INTERVAL``.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import threading
import time
from typing import Dict, List, Tuple

import requests

from .client import request
from .common import HOST, ROOT, LiveServer, median, model_server, ms, origin, pct, raise_nofile, table

CONFIGS = (("write-through", {}), ("no write-through", {"ODYSSEUS_DURABLE_EVENTS": "false"}))
BIG_TOKENS, BIG_SIZE, BIG_STREAMS = 4000, 4000, 10  # 16 MB per reply
FLUSH = 0.2
KILL_DELAY = 0.005  # 200 tokens/s


def _start(model_port: int, data_dir: str, env: Dict[str, str]) -> LiveServer:
    settings = {
        "OPENAI_BASE_URL": f"http://{HOST}:{model_port}/v1",
        "OPENAI_API_KEY": "x",
        "OPENAI_MODEL": "bench",
        "ODYSSEUS_AUTH": "none",
        "ODYSSEUS_WORKERS": "1",
        "ODYSSEUS_LOG_LEVEL": "warning",
        "ODYSSEUS_RUN_MAX_BYTES": str(64 * 1024 * 1024),
        "ODYSSEUS_EVICT_GRACE": "5",
        "ODYSSEUS_EVENT_FLUSH_INTERVAL": str(FLUSH),
        **env,
    }
    return LiveServer(data_dir, settings).start(timeout=30)


async def _one(port: int, headers: Dict[str, str], prompt: str):
    return await request(HOST, port, "POST", "/api/chat_stream", {"message": prompt}, headers, timeout=300)


# ---------------------------------------------------------------- 1. cost
async def cost(servers: Dict[str, LiveServer], rate_trials: int, ttft_rounds: int) -> Dict[str, Dict]:
    out = {name: {"rates": [], "ttft": [], "total": [], "errors": 0} for name in servers}
    names = list(servers)
    for name in names:  # warm-up
        await _one(servers[name].port, origin(servers[name]), "warm tokens=2000 delay=0")
    for index in range(rate_trials):
        for name in names if index % 2 == 0 else names[::-1]:
            t0 = time.perf_counter()
            result = await _one(servers[name].port, origin(servers[name]), "rate tokens=20000 delay=0")
            if result.error or result.tokens != 20000:
                out[name]["errors"] += 1
                continue
            out[name]["rates"].append(result.tokens / (time.perf_counter() - t0))
    for index in range(ttft_rounds):
        for name in names if index % 2 == 0 else names[::-1]:
            result = await _one(servers[name].port, origin(servers[name]), "ttft tokens=200 delay=0")
            if result.error or result.first_token is None or result.tokens != 200:
                out[name]["errors"] += 1
                continue
            out[name]["ttft"].append(result.first_token)
            out[name]["total"].append(result.total)
    return out


# ---------------------------------------------------------------- 2. unrelated requests
def poller(port: int) -> None:
    """``python -m bench.durable --poll PORT``: GET health and the sessions list back to back (one new
    connection each, 20 ms apart) until stdin closes, then print the latencies as JSON.

    Its own process, so the harness reading 160 MB of replies does not delay its clock.
    """
    import http.client
    import sys

    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    lat: Dict[str, List[float]] = {"health": [], "sessions": []}
    paths = (("health", "/api/health"), ("sessions", "/api/sessions?limit=5"))
    i = 0
    while not stop.is_set():
        name, path = paths[i % 2]
        t0 = time.perf_counter()
        try:
            conn = http.client.HTTPConnection(HOST, port, timeout=30)
            conn.request("GET", path)
            response = conn.getresponse()
            response.read()
            conn.close()
            if response.status == 200:
                lat[name].append(time.perf_counter() - t0)
        except OSError:
            pass
        i += 1
        time.sleep(0.02)
    print(json.dumps(lat))


async def heavy(server: LiveServer) -> Dict:
    """Ten 16 MB replies at once; an unrelated client (another process) polls health and the sessions list."""
    import subprocess
    import sys

    headers = origin(server)
    prompt = f"big tokens={BIG_TOKENS} delay=0 size={BIG_SIZE}"
    probe = subprocess.Popen(
        [sys.executable, "-m", "bench.durable", "--poll", str(server.port)],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    await asyncio.sleep(0.3)
    t0 = time.perf_counter()
    results = await asyncio.gather(*[_one(server.port, headers, prompt) for _ in range(BIG_STREAMS)])
    wall = time.perf_counter() - t0
    out, _ = probe.communicate("", timeout=60)
    bad = sum(1 for r in results if r.error or r.status != 200 or r.tokens != BIG_TOKENS)
    return {"lat": json.loads(out), "wall": wall, "errors": bad, "mb": sum(r.size for r in results) / 1e6}


# ---------------------------------------------------------------- 3. kill -9
class _Reader(threading.Thread):
    def __init__(self, url: str, prompt: str):
        super().__init__(daemon=True)
        self.response = requests.post(
            url + "/api/chat_stream", json={"message": prompt}, stream=True, timeout=60, headers={"Origin": url}
        )
        self.session = self.response.headers["X-Odysseus-Session-Id"]
        self.parts: List[str] = []
        self.start()

    def run(self) -> None:
        try:
            for line in self.response.iter_lines():
                if line.startswith(b'data: {"delta"'):
                    self.parts.append(json.loads(line[6:])["delta"])
        except Exception:  # noqa: BLE001 - the server is killed under it
            pass


def kill_trial(model_port: int, after: float) -> List[Tuple[int, int, int]]:
    """(chars received, chars saved, tokens lost) per run for one kill ``after`` seconds into five paced runs."""
    with tempfile.TemporaryDirectory(prefix="odysseus-bench-kill-") as data_dir:
        server = _start(model_port, data_dir, {})
        readers = [_Reader(server.url, f"kill{i} tokens=2000 delay={KILL_DELAY}") for i in range(5)]
        time.sleep(after)
        server.kill()
        received = ["".join(r.parts) for r in readers]  # read right after the kill: what each client had
        for r in readers:
            r.response.close()
        server.stop()
        again = _start(model_port, data_dir, {})
        try:
            out = []
            for r, got in zip(readers, received, strict=False):
                messages = requests.get(f"{again.url}/api/sessions/{r.session}/messages", timeout=10).json()["messages"]
                saved = "".join(m["content"] for m in messages if m["role"] == "assistant")
                if not got.startswith(saved):
                    raise AssertionError("the saved partial is not a prefix of what the client received")
                out.append((len(got), len(saved), got[len(saved) :].count(" ")))  # a token ends in a space
            return out
        finally:
            again.stop()


def run(quick: bool = False) -> Tuple[str, Dict[str, bool]]:
    """Run the three parts; the Markdown section body and the targets."""
    started = time.monotonic()
    raise_nofile()
    rate_trials, ttft_rounds, heavy_trials = (2, 20, 1) if quick else (6, 150, 2)
    kill_after = (1.0,) if quick else (0.7, 1.3, 1.9)
    with model_server() as model_port:
        with (
            tempfile.TemporaryDirectory(prefix="odysseus-bench-d1-") as d1,
            tempfile.TemporaryDirectory(prefix="odysseus-bench-d2-") as d2,
        ):
            servers = {name: _start(model_port, d, env) for (name, env), d in zip(CONFIGS, (d1, d2), strict=False)}
            try:
                costs = asyncio.run(cost(servers, rate_trials, ttft_rounds))
                heavies: Dict[str, List[Dict]] = {name: [] for name in servers}
                names = list(servers)
                for index in range(heavy_trials):
                    for name in names if index % 2 == 0 else names[::-1]:
                        heavies[name].append(asyncio.run(heavy(servers[name])))
                        # let the writer finish the big final saves before the other server's turn
                        time.sleep(1.0)
            finally:
                for server in servers.values():
                    server.stop()
        kills = [pair for after in kill_after for pair in kill_trial(model_port, after)]

    on, off = CONFIGS[0][0], CONFIGS[1][0]
    rows = []
    for name in servers:
        c = costs[name]
        rows.append(
            [
                name,
                f"{median(c['rates']):,.0f}",
                ms(median(c["ttft"])),
                ms(pct(c["ttft"], 0.99)),
                ms(median(c["total"])),
                ms(pct(c["total"], 0.99)),
                c["errors"],
            ]
        )
    rate_ratio = median(costs[on]["rates"]) / median(costs[off]["rates"])
    added_ttft = median(costs[on]["ttft"]) - median(costs[off]["ttft"])
    part1 = table(
        [
            "log",
            "events/s (20,000 tokens)",
            "first token med",
            "first token p99",
            "last byte med",
            "last byte p99",
            "errors",
        ],
        rows,
    )
    part1 += (
        f"\n\nWrite-through delivers {rate_ratio:.2f}x the events/s of no write-through and adds "
        f"{added_ttft * 1000:.2f} ms to the median first token of a 200-token reply "
        f"({len(costs[on]['rates'])} rate trials, {len(costs[on]['ttft'])} replies per configuration)."
    )

    rows = []
    p95 = {}
    for name in servers:
        lat = {k: [x for h in heavies[name] for x in h["lat"][k]] for k in ("health", "sessions")}
        walls = [h["wall"] for h in heavies[name]]
        p95[name] = max(pct(lat["health"], 0.95), pct(lat["sessions"], 0.95))
        rows.append(
            [
                name,
                f"{median(walls):.1f}",
                f"{sum(h['mb'] for h in heavies[name]) / len(walls):.0f}",
                sum(h["errors"] for h in heavies[name]),
                len(lat["health"]),
                ms(median(lat["health"])),
                ms(pct(lat["health"], 0.95)),
                ms(max(lat["health"])),
                len(lat["sessions"]),
                ms(median(lat["sessions"])),
                ms(pct(lat["sessions"], 0.95)),
                ms(max(lat["sessions"])),
            ]
        )
    part2 = table(
        [
            "log",
            "wall (s)",
            "MB streamed",
            "errors",
            "health n",
            "health med",
            "health p95",
            "health max",
            "sessions n",
            "sessions med",
            "sessions p95",
            "sessions max",
        ],
        rows,
    )
    part2 += (
        f"\n\n{BIG_STREAMS} concurrent replies of {BIG_TOKENS * BIG_SIZE / 1e6:.0f} MB each "
        f"({heavy_trials} trial(s) per configuration, alternating); latencies in ms."
    )

    lost = [got - saved for got, saved, _ in kills]
    lost_s = [tokens * KILL_DELAY for _, _, tokens in kills]
    part3 = table(
        [
            "runs",
            "chars received (med)",
            "chars lost med",
            "chars lost max",
            "lost as time med (ms)",
            "lost as time max (ms)",
            "flush interval (ms)",
        ],
        [
            [
                len(kills),
                f"{median([g for g, _, _ in kills]):.0f}",
                f"{median(lost):.0f}",
                max(lost),
                f"{median(lost_s) * 1000:.0f}",
                f"{max(lost_s) * 1000:.0f}",
                f"{FLUSH * 1000:.0f}",
            ]
        ],
    )
    part3 += (
        f"\n\nFive runs at {1 / KILL_DELAY:.0f} tokens/s, killed with "
        f"SIGKILL after {', '.join(f'{a:g}' for a in kill_after)} s; every saved partial was a prefix of what its "
        "client had received."
    )

    targets = {
        "write-through keeps at least 80% of the events/s of no write-through": rate_ratio >= 0.8,
        "write-through adds at most 1 ms to the median first token": added_ttft <= 0.001,
        "p95 of unrelated requests during ten 16 MB replies under 100 ms with write-through": p95[on] < 0.1,
        "text lost on kill -9 at most one flush interval (+ one token in flight)": max(lost_s) <= FLUSH + KILL_DELAY,
    }
    body = "\n\n".join(
        [
            "**Cost of the write-through log**",
            part1,
            "**Unrelated requests during ten 16 MB replies**",
            part2,
            "**Text lost on kill -9**",
            part3,
            f"Duration: {time.monotonic() - started:.0f} s.",
        ]
    )
    return body, targets


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] == ["--poll"]:
        poller(int(sys.argv[2]))
    else:
        text, met = run(quick=os.environ.get("QUICK") == "1")
        print(text)
        print(met)
