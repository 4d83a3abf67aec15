"""``make bench-peers``: Odysseus against the gateways users compare it with, on one model server, interleaved.

``python -m bench.peers [--quick] [--no-write] [--skip-open-webui]``

LiteLLM proxy (and Open WebUI, when it installs within ``INSTALL_TIMEOUT``) are installed
into their own virtualenvs under the git-ignored ``.bench-peers/``, configured to use the
bench model server (OpenAI-compatible) and started on loopback ports. Each round sends one
batch of N concurrent paced replies (5 ms per token, 200 tokens) to every path in a
rotating order: the model server itself (the physical limit), Odysseus (gunicorn, one
gevent worker), LiteLLM, Open WebUI. Reported per path and N (1, 10, 100): time to first
token and to the last byte (median, p99), the time added to direct, and the CPU per reply
of that path's processes (the gateway's process tree from /proc; for direct, the model
server's own). A gateway that cannot be installed or started is a row saying why.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import secrets
import subprocess
import tempfile
import time
from contextlib import ExitStack
from typing import Dict, List, Tuple

from . import peer_gateways as gw
from .client import request
from .common import HOST, app_server, machine, median, model_process, ms, origin, pct, table, tree_cpu_seconds

TOKENS, PACING = 200, 0.005
LEVELS = {"full": ((1, 15), (10, 6), (100, 2)), "quick": ((1, 3), (10, 2), (100, 1))}


def _cpu(path: gw.Path) -> float:
    return sum(tree_cpu_seconds(p) for p in path.pids)


async def idle_rates(paths: List[gw.Path], seconds: float = 3.0) -> Dict[str, float]:
    """Each path's CPU (cores) while nothing is asked of it: timers, heartbeats, background tasks."""
    before = {p.name: _cpu(p) for p in paths}
    await asyncio.sleep(seconds)
    return {p.name: max(0.0, (_cpu(p) - before[p.name]) / seconds) for p in paths}


async def _batch(path: gw.Path, n: int, idle: float = 0.0) -> Tuple[List, float]:
    """``n`` simultaneous replies on one path; the results and its processes' CPU seconds, less the idle rate."""
    prompt = f"peers tokens={TOKENS} delay={PACING}"
    cpu0, t0 = _cpu(path), time.perf_counter()
    results = await asyncio.gather(
        *(request(HOST, path.port, "POST", path.url, path.body(prompt), path.headers, timeout=120) for _ in range(n))
    )
    await asyncio.sleep(0.2)  # after-work (saves, logs) ends after the last byte
    return list(results), _cpu(path) - cpu0 - idle * (time.perf_counter() - t0)


async def measure(paths: List[gw.Path], levels) -> Dict[Tuple[int, str], Dict]:
    """Per (N, path name): ttft, total, cpu per reply, errors; ``(0, "idle")``: each path's idle CPU rate."""
    out: Dict[Tuple[int, str], Dict] = {}
    for path in paths:
        await _batch(path, 1)  # first requests: imports, connections, caches
    idle = await idle_rates(paths)
    out[(0, "idle")] = idle
    for n, rounds in levels:
        for path in paths:
            out[(n, path.name)] = {"ttft": [], "total": [], "cpu": 0.0, "replies": 0, "errors": 0, "sample_error": ""}
            await _batch(path, min(n, 10))  # warm-up
        for index in range(rounds):
            order = paths[index % len(paths) :] + paths[: index % len(paths)]
            for path in order:
                results, cpu = await _batch(path, n, idle[path.name])
                bucket = out[(n, path.name)]
                bucket["cpu"] += cpu
                bucket["replies"] += n
                for r in results:
                    if r.error or r.status != 200 or r.first_token is None or r.tokens != TOKENS:
                        bucket["errors"] += 1
                        bucket["sample_error"] = bucket["sample_error"] or (
                            r.error or f"status {r.status}, {r.tokens} tokens"
                        )
                        continue
                    bucket["ttft"].append(r.first_token)
                    bucket["total"].append(r.total)
    return out


def report(data: Dict[Tuple[int, str], Dict], names: List[str], missing: Dict[str, str]) -> str:
    """The Markdown table: direct first at every N, then each gateway's added time."""
    rows = []
    idle = data.get((0, "idle"), {})
    for n in sorted({k[0] for k in data if k[0]}):
        direct = data[(n, "direct")]
        d_ttft, d_total = median(direct["ttft"]), median(direct["total"])
        for name in names:
            d = data[(n, name)]
            ttft, total = median(d["ttft"]), median(d["total"])
            added_p99 = pct(d["ttft"], 0.99) - pct(direct["ttft"], 0.99)
            added = "" if name == "direct" else f"+{ms(ttft - d_ttft)} (p99 +{ms(added_p99)})"
            cpu = max(0.0, d["cpu"]) / max(1, d["replies"])
            errors = d["errors"] if not d["sample_error"] else f"{d['errors']} ({d['sample_error'][:50]})"
            rows.append(
                [
                    n,
                    name,
                    len(d["ttft"]),
                    ms(ttft),
                    added,
                    ms(total),
                    "" if name == "direct" else f"+{ms(total - d_total)}",
                    f"{cpu * 1000:.2f}",
                    errors,
                ]
            )
        for name, reason in missing.items():
            rows.append([n, name, 0, "not measured", "", "", "", "", reason])
    header = [
        "streams",
        "path",
        "n",
        "first token p50",
        "added p50 (p99)",
        "last byte p50",
        "added last byte p50",
        "CPU per reply",
        "errors",
    ]
    return table(header, rows) + (
        "\n\n(milliseconds; 200 tokens at 5 ms per token; CPU per reply = the "
        "user+system CPU of the path's processes over all its batches, less its idle "
        "rate, / replies, counted in /proc clock ticks of 10 ms; for direct the model "
        "server's. Idle CPU, % of a core: "
        + ", ".join(f"{name} {rate * 100:.1f}%" for name, rate in idle.items())
        + ")"
    )


def run(quick: bool = False, with_open_webui: bool = True) -> str:
    """Install, start, measure, stop; the Markdown section."""
    started = time.monotonic()
    missing: Dict[str, str] = {}
    versions: List[str] = []
    with ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="odysseus-bench-peers-"))
        model_port, model_pid = stack.enter_context(model_process())
        paths = [gw.Path("direct", model_port, "/v1/chat/completions", {}, [model_pid], gw.openai_body)]
        app = stack.enter_context(app_server(model_port, {"ODYSSEUS_MAX_STREAMS_PER_USER": "100000"}))
        paths.append(
            gw.Path(
                "Odysseus",
                app.port,
                "/api/chat_stream",
                origin(app),
                [app.proc.pid],
                lambda prompt: {"message": prompt},
            )
        )
        peers = [gw.LITELLM] + ([gw.OPEN_WEBUI] if with_open_webui else [])
        for peer in peers:
            reason = gw.install(peer)
            if reason is None:
                try:
                    paths.append(stack.enter_context(peer.start(model_port, tmp, secrets.token_hex(24))))
                    versions.append(f"{peer.name} {peer.spec.split('==')[1]}")
                    continue
                except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
                    reason = f"did not start: {str(exc)[:200]}"
            missing[peer.name] = reason.replace("|", "/").replace("\n", " ")
        data = asyncio.run(asyncio.wait_for(measure(paths, LEVELS["quick" if quick else "full"]), 1200))
    text = report(data, [p.name for p in paths], missing)
    facts = machine()
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return "\n".join(
        [
            f"# Peers: run of {when}{' (quick)' if quick else ''}",
            "",
            f"Machine: {facts['cores']} cores ({facts['cpu']}), {facts['memory']} memory, {facts['os']}, Python "
            f"{facts['python']}; {facts['libraries']}; {', '.join(versions) or 'no peer started'}. Load average at the "
            f"start: {facts['load']} (other processes share the machine; the client, the model server and every "
            "gateway run on it, each gateway with its default single process/worker).",
            "",
            text,
            "",
            f"Duration: {time.monotonic() - started:.0f} s (installs included).",
            "",
        ]
    )


def main() -> None:
    """Command line entry point."""
    from .run_all import write_result  # a dated file under bench/results/, as `make bench` writes

    parser = argparse.ArgumentParser(description="Odysseus against LiteLLM proxy and Open WebUI.")
    parser.add_argument("--quick", action="store_true", help="a few rounds per level")
    parser.add_argument("--no-write", action="store_true", help="print only; write no file under bench/results/")
    parser.add_argument("--skip-open-webui", action="store_true", help="LiteLLM only (Open WebUI's install is large)")
    args = parser.parse_args()
    text = run(args.quick, with_open_webui=not args.skip_open_webui)
    print(text)
    if not args.no_write:
        print(f"written to {write_result(text, 'peers')}")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
