"""Benchmark 8: issue 22's targets in one run, each against the model server itself: target / measured / met.

``python -m bench.targets [--quick | --smoke] [--only paced,burst,...] [--json]``

Parts (each starts its own model server and app and ends them by pid, bounded in time;
a part that fails or times out is a row saying so, never a hang):

- ``paced``: 100 streams in flight, one arrival every 10 ms, 5 ms per token, 200 tokens;
- ``burst``: 100 simultaneous arrivals of the same paced reply;
- ``cpu``: worker CPU (``/proc/<pid>/stat``) per turn and per token, intake events/s;
- ``held``: a turn's cost with 0 and 20,000 finished runs held in the replay window;
- ``detached``: detached streams held with on-time heartbeats (the client alone first);
- ``memory``: worker RSS after 10,000 runs are evicted;
- ``resume``: a resume's first event for a 100,000-event log;
- ``redis``: the Redis backend with 1 and 2 workers, turns/s and held streams.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from . import targets_load as load
from . import targets_scale as scale
from .common import table

Row = load.Row

#: Sample sizes per mode; the full mode stays within about 10 minutes, quick about a minute.
SIZES: Dict[str, Dict] = {
    "full": {
        "paced_streams": 100,
        "paced_tokens": 200,
        "paced_rounds": 4,
        "burst_streams": 100,
        "burst_rounds": 4,
        "cpu_short_turns": 300,
        "cpu_long_turns": 20,
        "cpu_long_tokens": 2000,
        "intake_tokens": 100_000,
        "held_samples": 30,
        "held_turns": 300,
        "held_runs": 20_000,
        "detached_levels": (2000, 5000),
        "hold_tokens": 12,
        "hold_delay": 2.5,  # ~30 s per stream: the ramp to 5,000 at 200/s takes 25 s
        "memory_runs": 10_000,
        "resume_events": 100_000,
        "resume_trials": 20,
        "redis_turns": 600,
        "redis_levels": (1000, 2000, 4000),
    },
    "quick": {
        "paced_streams": 100,
        "paced_tokens": 200,
        "paced_rounds": 1,
        "burst_streams": 100,
        "burst_rounds": 1,
        "cpu_short_turns": 100,
        "cpu_long_turns": 5,
        "cpu_long_tokens": 2000,
        "intake_tokens": 20_000,
        "held_samples": 10,
        "held_turns": 100,
        "held_runs": 1000,
        "detached_levels": (500,),
        "hold_tokens": 6,
        "hold_delay": 1.0,
        "memory_runs": 1000,
        "resume_events": 20_000,
        "resume_trials": 5,
        "redis_turns": 100,
        "redis_levels": (200,),
    },
    "smoke": {
        "paced_streams": 10,
        "paced_tokens": 20,
        "paced_rounds": 1,
        "burst_streams": 10,
        "burst_rounds": 1,
        "cpu_short_turns": 20,
        "cpu_long_turns": 2,
        "cpu_long_tokens": 500,
        "intake_tokens": 2000,
        "held_samples": 3,
        "held_turns": 20,
        "held_runs": 50,
        "detached_levels": (20,),
        "hold_tokens": 3,
        "hold_delay": 1.0,
        "memory_runs": 100,
        "resume_events": 1000,
        "resume_trials": 2,
        "redis_turns": 20,
        "redis_levels": (20,),
    },
}
#: key -> how to run it with a size (each bounds its own measurement with asyncio.wait_for)
PARTS: Dict[str, Callable[[Dict], List[Row]]] = {
    "paced": lambda s: load.run_part(load.paced, s, limit=180),
    "burst": lambda s: load.run_part(load.burst, s, limit=180),
    # the full intake reply (100,000 tokens) and its lifecycle events pass the default log cap
    "cpu": lambda s: load.run_part(load.cpu, s, {"ODYSSEUS_RUN_MAX_EVENTS": str(s["intake_tokens"] + 1000)}, limit=300),
    "held": lambda s: load.run_part(load.held, s, {"ODYSSEUS_EVICT_GRACE": "3600"}, limit=600),
    "detached": scale.detached,
    "memory": scale.rss,
    "resume": scale.replay,
    "redis": scale.redis_scaling,
}
#: the parts ``--smoke`` runs by default (a few seconds each)
SMOKE_PARTS = ("paced", "cpu", "held")


def _guarded(key: str, size: Dict) -> Tuple[List[Row], float]:
    """Run one part; any failure becomes one row (the processes are ended by the parts' context managers)."""
    fn = PARTS[key]
    started = time.monotonic()
    try:
        rows = fn(size)
    except (asyncio.TimeoutError, TimeoutError):
        rows = [(key, "failed", f"timed out after {time.monotonic() - started:.0f} s", False)]
    except Exception as exc:  # noqa: BLE001 -- one part's failure is reported, the others still run
        rows = [(key, "failed", f"{type(exc).__name__}: {str(exc)[:300]}", False)]
    return rows, time.monotonic() - started


def measure(parts: Sequence[str], mode: str = "full", log: Optional[Callable[[str], None]] = None) -> Dict:
    """Run the selected parts; ``{"mode", "parts": {key: {"rows": [...], "seconds": s}}}``."""
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        raise ValueError(f"unknown parts {unknown}; known: {', '.join(PARTS)}")
    size = SIZES[mode]
    out: Dict = {"mode": mode, "parts": {}}
    for key in parts:
        rows, seconds = _guarded(key, size)
        out["parts"][key] = {"rows": [list(r) for r in rows], "seconds": seconds}
        if log:
            log(f"   {key}: {seconds:.0f} s; " + "; ".join(f"{r[0]}: {r[1]}" for r in rows))
    return out


def _verdict(met: Optional[bool]) -> str:
    return "n/a" if met is None else ("yes" if met else "**no**")


def report(data: Dict) -> Tuple[str, Dict[str, bool]]:
    """The Markdown table (target / measured / details / met) and the verdicts for run_all."""
    rows, verdicts = [], {}
    for key, part in data["parts"].items():
        for target, measured, note, met in part["rows"]:
            rows.append([key, target, measured, note.replace("|", "/"), _verdict(met)])
            if met is not None:
                verdicts[f"issue 22 ({key}): {target}"] = bool(met)
    seconds = sum(p["seconds"] for p in data["parts"].values())
    text = table(["part", "target", "measured", "details (direct = the model server itself)", "met?"], rows)
    text += (
        f"\n\nMode: {data['mode']}; duration {seconds:.0f} s. The machine is shared: read ratios and "
        "the rows of one run against each other."
    )
    return text, verdicts


def run(quick: bool = False, parts: Optional[Sequence[str]] = None) -> Tuple[str, Dict[str, bool]]:
    """For ``bench.run_all``: every part (or ``parts``), full or quick."""
    return report(measure(list(parts or PARTS), "quick" if quick else "full", log=lambda s: print(s, flush=True)))


def main() -> None:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description="Issue 22's targets against the model server itself.")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--quick", action="store_true", help="about a minute per part set")
    group.add_argument("--smoke", action="store_true", help="tiny sizes, seconds (checks the harness, not targets)")
    parser.add_argument("--only", default="", help="comma-separated: " + ",".join(PARTS))
    parser.add_argument("--json", action="store_true", help="print the raw results as JSON")
    args = parser.parse_args()
    mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    parts = [p.strip() for p in args.only.split(",") if p.strip()] or list(SMOKE_PARTS if args.smoke else PARTS)
    data = measure(parts, mode, log=lambda s: print(s, file=sys.stderr, flush=True))
    print(json.dumps(data, indent=1) if args.json else report(data)[0])


if __name__ == "__main__":
    main()
