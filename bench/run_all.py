"""``make bench``: run the benchmarks and write the results to a dated file under bench/results/.

``python -m bench.run_all [--quick] [--only overhead,resume] [--parts paced,cpu] [--no-write]``
"""

from __future__ import annotations

import argparse
import datetime
import os
import time
from typing import Callable, Dict, List, Optional, Tuple

from . import (
    backends,
    capacity,
    concurrency,
    durable,
    llama_ttft,
    mcp,
    memory,
    openai_api,
    overhead,
    page_load,
    resume,
    stack_floor,
    targets,
    throughput,
    titles,
)
from .common import ROOT, machine

BENCHMARKS: List[Tuple[str, str, Callable]] = [
    ("overhead", "1. Overhead against the physical limit", overhead.run),
    ("concurrency", "2. Concurrent detached runs", concurrency.run),
    ("throughput", "3. Event throughput", throughput.run),
    ("resume", "4. Resume a finished 10,000-event run", resume.run),
    ("memory", "5. Memory and eviction", memory.run),
    ("durable", "6. The durable run log", durable.run),
    ("backends", "7. Run backends: 1 worker in-process, 1 worker Redis, N workers Redis", backends.run),
    ("targets", "8. Issue 22's targets against the model server itself", targets.run),
    ("floor", "10. The stack's floor: the same turn from a bare Flask app", stack_floor.run),
    ("openai", "11. The OpenAI-compatible API (/v1) against /api/chat_stream", openai_api.run),
    ("llama", "13. Time to first token: through Odysseus against llama-server directly", llama_ttft.run),
    ("page", "14. The page's load in headless Chromium: bytes, requests, time to a usable composer", page_load.run),
    ("mcp", "15. MCP servers: what they add to a turn's start and to one call", mcp.run),
    ("titles", "16. Model titles against first-line titles under paced streams", titles.run),
    ("capacity", "17. The capacity model: per-component costs and a box's sizing", capacity.run),
]
RESULTS_DIR = os.path.join(ROOT, "bench", "results")


def section(selected: List[str], quick: bool, target_parts: Optional[List[str]] = None) -> str:
    """Run the selected benchmarks; one Markdown section for this run."""
    facts = machine()
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    parts = [
        f"# Run of {when}{' (quick)' if quick else ''}",
        "",
        f"Machine: {facts['cores']} cores ({facts['cpu']}), {facts['memory']} memory, {facts['os']}, "
        f"Python {facts['python']}; {facts['libraries']}. Load average at the start: {facts['load']} "
        "(other processes share the machine; the client and the model server run on it too).",
        "",
    ]
    verdicts: Dict[str, bool] = {}
    for key, title, fn in BENCHMARKS:
        if key not in selected:
            continue
        started = time.monotonic()
        print(f"== {title}", flush=True)
        if key == "targets" and target_parts:
            text, targets = fn(quick=quick, parts=target_parts)
        else:
            text, targets = fn(quick=quick)
        print(text, flush=True)
        print(f"   ({time.monotonic() - started:.0f} s)", flush=True)
        parts += [f"## {title}", "", text, ""]
        verdicts.update(targets)
    if verdicts:
        parts += ["## Targets", ""]
        parts += [f"- {'met' if ok else '**not met**'}: {name}" for name, ok in verdicts.items()]
        parts.append("")
    return "\n".join(parts)


def write_result(text: str, kind: str = "run") -> str:
    """Write one run's Markdown to ``bench/results/<date>-<HHMM>-<kind>.md``; answer its path.

    Dated runs are kept as files of their own; docs/benchmarks.md holds only the current table and
    the method, updated by hand from these files."""
    os.makedirs(RESULTS_DIR, exist_ok=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d-%H%M")
    path = os.path.join(RESULTS_DIR, f"{stamp}-{kind}.md")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text.rstrip("\n") + "\n")
    return path


def main() -> None:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description="Run the Odysseus benchmarks.")
    parser.add_argument("--quick", action="store_true", help="small sample sizes (a smoke run)")
    parser.add_argument("--only", default="", help="comma-separated: " + ",".join(k for k, _, _ in BENCHMARKS))
    parser.add_argument("--parts", default="", help="benchmark 8's parts, comma-separated: " + ",".join(targets.PARTS))
    parser.add_argument("--no-write", action="store_true", help="print only; write no file under bench/results/")
    args = parser.parse_args()
    selected = [k.strip() for k in args.only.split(",") if k.strip()] or [k for k, _, _ in BENCHMARKS]
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    text = section(selected, args.quick, parts or None)
    if not args.no_write:
        path = write_result(text, "run-quick" if args.quick else "run")
        print(f"written to {os.path.relpath(path, ROOT)}")


if __name__ == "__main__":
    main()
