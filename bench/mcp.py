"""Benchmark 15: what MCP servers cost a turn's start, and what the broker adds to one call.

- **Turn start.** ``Toolbox.for_turn`` (the registry an agent turn is offered) of an in-process app
  with two warm MCP servers (tests/mcp_servers/hostile.py, 13 tools each; one limited to named
  users, so the permission check reads the account) against the same app with no MCP server: the
  median and p99 of the difference are what MCP adds to a warm start (issue 34: <= 1 ms).
- **One call.** ``echo`` on the same server, called N times one after another: directly (the
  official SDK's ``ClientSession`` over ``stdio_client``, in this process, the server started the
  same way) and through Odysseus (``McpService.call``: the worker's client, the broker child, the
  stdio guard). The difference of the medians is the latency the broker path adds.

Run: ``python -m bench.mcp [--quick]``.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from typing import Dict, List, Tuple

from .common import ROOT

HOSTILE = os.path.join(ROOT, "tests", "mcp_servers", "hostile.py")
SERVER = {"command": sys.executable, "args": [HOSTILE, "normal"], "sandbox": False, "approval": "auto"}


def _ms(values: List[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def turn_start(samples: int) -> Dict[str, float]:
    """for_turn's time with two warm MCP servers, and without any."""
    from odysseus import create_app

    def app_with(servers: dict):
        return create_app(
            {
                "DATA_DIR": tempfile.mkdtemp(prefix="bench-mcp-"),
                "PROVIDERS": [],
                "AUTH": "none",
                "MCP_START_TIMEOUT": 60.0,
                "MCP_SERVERS": servers,
            }
        )

    with_mcp = app_with({"one": SERVER, "two": {**SERVER, "users": ["local"]}})
    without = app_with({})
    try:
        timings: Dict[str, List[float]] = {"with": [], "without": []}
        for name, app in (("with", with_mcp), ("without", without)):
            toolbox = app.extensions["odysseus.agent"].toolbox
            registry, _ = toolbox.for_turn("local", None)  # warm: the servers start and list their tools here
            if name == "with":
                assert sum(1 for n in registry.names() if n.startswith("mcp__")) == 26, registry.names()
            for _ in range(samples):
                started = time.perf_counter()
                toolbox.for_turn("local", None)
                timings[name].append(time.perf_counter() - started)
        added = statistics.median(timings["with"]) - statistics.median(timings["without"])
        return {
            "with_median_ms": _ms(timings["with"], 0.5),
            "with_p99_ms": _ms(timings["with"], 0.99),
            "without_median_ms": _ms(timings["without"], 0.5),
            "added_median_ms": added * 1000,
            "added_p99_ms": _ms(timings["with"], 0.99) - _ms(timings["without"], 0.99),
        }
    finally:
        for app in (with_mcp, without):
            app.extensions["odysseus.runs"].close()
            app.extensions["odysseus.store"].close()


async def _direct(calls: int) -> List[float]:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(command=SERVER["command"], args=SERVER["args"])
    timings = []
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            await session.list_tools()
            for _ in range(5):
                await session.call_tool("echo", {"text": "warm"})
            for _ in range(calls):
                started = time.perf_counter()
                await session.call_tool("echo", {"text": "bench"})
                timings.append(time.perf_counter() - started)
    return timings


def through_odysseus(calls: int) -> List[float]:
    """``McpService.call`` of echo, after the server is warm."""
    from odysseus.cancel import CancelToken
    from odysseus.mcp.service import McpService

    config = {
        "DATA_DIR": tempfile.mkdtemp(prefix="bench-mcp-"),
        "MCP_START_TIMEOUT": 60.0,
        "MCP_SERVERS": {"s": SERVER},
    }
    service = McpService(config)
    spec = service.servers()["s"]
    try:
        for _ in range(5):
            service.call(spec, "echo", {"text": "warm"}, CancelToken(), lambda data: None)
        timings = []
        for _ in range(calls):
            started = time.perf_counter()
            service.call(spec, "echo", {"text": "bench"}, CancelToken(), lambda data: None)
            timings.append(time.perf_counter() - started)
        return timings
    finally:
        service.close()


def measure(quick: bool) -> Dict[str, Dict[str, float]]:
    """Both measurements."""
    samples, calls = (200, 50) if quick else (2000, 300)
    direct = asyncio.run(_direct(calls))
    ours = through_odysseus(calls)
    return {
        "start": turn_start(samples),
        "call": {
            "direct_median_ms": _ms(direct, 0.5),
            "direct_p95_ms": _ms(direct, 0.95),
            "ours_median_ms": _ms(ours, 0.5),
            "ours_p95_ms": _ms(ours, 0.95),
            "added_median_ms": _ms(ours, 0.5) - _ms(direct, 0.5),
        },
    }


def report(data: Dict[str, Dict[str, float]]) -> Tuple[str, Dict[str, bool]]:
    """Markdown rows and the issue's target."""
    start, call = data["start"], data["call"]
    lines = [
        "| measurement | median | p99 / p95 | against |",
        "|---|---|---|---|",
        f"| agent turn's tool list, 2 warm MCP servers (26 tools) | {start['with_median_ms']:.3f} ms | "
        f"p99 {start['with_p99_ms']:.3f} ms | no MCP server {start['without_median_ms']:.3f} ms |",
        f"| added by MCP to a warm turn start | {start['added_median_ms']:+.3f} ms | "
        f"p99 {start['added_p99_ms']:+.3f} ms | target <= 1 ms |",
        f"| one MCP call (echo), through the broker | {call['ours_median_ms']:.2f} ms | "
        f"p95 {call['ours_p95_ms']:.2f} ms | the SDK directly {call['direct_median_ms']:.2f} ms "
        f"(p95 {call['direct_p95_ms']:.2f} ms) |",
        f"| added by the broker path to one call | {call['added_median_ms']:+.2f} ms | - | - |",
    ]
    return "\n".join(lines), {"MCP adds <= 1 ms to a warm turn start": start["added_median_ms"] <= 1.0}


def run(quick: bool = False) -> Tuple[str, Dict[str, bool]]:
    """For ``bench.run_all``."""
    return report(measure(quick))


def main() -> None:
    """Command line entry point: ``python -m bench.mcp [--quick]``."""
    text, verdicts = report(measure("--quick" in sys.argv))
    print(text)
    for name, ok in verdicts.items():
        print(f"- {'met' if ok else 'not met'}: {name}")


if __name__ == "__main__":
    main()
