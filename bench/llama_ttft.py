"""Benchmark 13: time to first token through Odysseus against a real llama.cpp llama-server directly.

tests/llamacpp.py's llama-server (built from the pinned llama-cpp-python sdist; ``make
llama-server``) serves the tiny test model. The same short question is asked, one at a time,
of llama-server's ``/v1/chat/completions`` directly and of Odysseus's ``/api/chat_stream`` (a new
chat each time, the way a user starts one), in alternating order so that the machine's load
falls on both alike. Reported: the median and p90 time from sending the request to the first
byte of reply text, and what Odysseus adds to it (absolute and as a ratio). Skipped, with the
reason, when llama-server is not built.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from typing import Callable, Dict, List, Tuple

import requests

from .common import app_server, ms, origin, table  # (common puts tests/ on sys.path)

import llamacpp  # noqa: E402  (tests/llamacpp.py)

ROUNDS = {"full": 60, "quick": 15, "smoke": 4}
MAX_TOKENS = 8


def _first_text(response: requests.Response, has_text: Callable[[bytes], bool]) -> float:
    """Read the stream to its end; the moment (perf_counter) its first line with reply text arrived."""
    first = None
    for line in response.iter_lines():
        if first is None and has_text(line):
            first = time.perf_counter()
    if first is None:
        raise RuntimeError("no reply text in the stream")
    return first


def _direct_has_text(line: bytes) -> bool:
    if not line.startswith(b"data: {"):
        return False
    for choice in json.loads(line[6:]).get("choices") or []:
        if (choice.get("delta") or {}).get("content"):
            return True
    return False


def _odysseus_has_text(line: bytes) -> bool:
    return line.startswith(b"data: {") and b'"delta"' in line and b'"thinking"' not in line


def _direct(url: str, question: str) -> float:
    body = {
        "model": "tiny",
        "stream": True,
        "max_tokens": MAX_TOKENS,
        "messages": [{"role": "user", "content": question}],
    }
    started = time.perf_counter()
    with requests.post(url + "/v1/chat/completions", json=body, stream=True, timeout=60) as response:
        response.raise_for_status()
        return _first_text(response, _direct_has_text) - started


def _odysseus(url: str, headers: Dict[str, str], question: str) -> float:
    started = time.perf_counter()
    body = {"message": question, "max_tokens": MAX_TOKENS}
    with requests.post(url + "/api/chat_stream", json=body, headers=headers, stream=True, timeout=60) as response:
        response.raise_for_status()
        return _first_text(response, _odysseus_has_text) - started


def measure(size: str = "full") -> Dict[str, List[float]]:
    """Start llama-server and the app; ask both in alternating order; the TTFT samples per path."""
    samples: Dict[str, List[float]] = {"llama-server directly": [], "through Odysseus": []}
    with tempfile.TemporaryDirectory(prefix="odysseus-bench-llama-") as work:
        with llamacpp.running(work, ctx_size=4096, parallel=1) as llama:
            with app_server(llama.port) as app:
                headers = origin(app)
                calls: List[Tuple[str, Callable[[str], float]]] = [
                    ("llama-server directly", lambda q: _direct(llama.url, q)),
                    ("through Odysseus", lambda q: _odysseus(app.url, headers, q)),
                ]
                for warm in range(3):
                    for _, call in calls:
                        call(f"warm-up {warm}")
                for index in range(ROUNDS[size]):
                    order = calls if index % 2 == 0 else calls[::-1]
                    for name, call in order:
                        samples[name].append(call(f"question number {index}"))
    return samples


def report(samples: Dict[str, List[float]]) -> Tuple[str, Dict[str, bool]]:
    """The side-by-side table (no target: the issue asks for the number, measured)."""
    direct = statistics.median(samples["llama-server directly"])
    rows = []
    for name, values in samples.items():
        p50 = statistics.median(values)
        p90 = sorted(values)[int(0.9 * (len(values) - 1))]
        added = f"+{ms(p50 - direct)} ms ({p50 / direct:.2f}x)" if name != "llama-server directly" else "-"
        rows.append([name, str(len(values)), f"{ms(p50)} ms", f"{ms(p90)} ms", added])
    return table(["path", "turns", "first token p50", "p90", "added (p50)"], rows), {}


def run(quick: bool = False) -> Tuple[str, Dict[str, bool]]:
    """For ``bench.run_all``."""
    if not llamacpp.available():
        return "skipped: llama-server is not built (`make llama-server`)", {}
    return report(measure("quick" if quick else "full"))


def main() -> None:
    """Command line entry point: ``python -m bench.llama_ttft [--quick|--smoke]``."""
    size = "quick" if "--quick" in sys.argv else "smoke" if "--smoke" in sys.argv else "full"
    print(report(measure(size))[0])


if __name__ == "__main__":
    main()
