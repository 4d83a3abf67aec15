"""Many held streams from several client processes, so the load client is not the bottleneck.

One asyncio process cannot read 5,000 streams' heartbeats on time on a small box (its own
event loop falls behind, and a late read looks like a late heartbeat). ``spread`` starts
``procs`` copies of this module (``python -m bench.client_procs``); child ``k`` opens the
streams ``k, k + procs, k + 2 * procs, ...`` of one shared ramp that starts at the same
wall-clock moment in every child, reads them with ``bench.client.request`` and prints one
JSON line: its streams' results (without bodies) and its own CPU seconds.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from dataclasses import asdict
from typing import Dict, List, Optional, Tuple

from .client import Result, request
from .model_server import raise_nofile

#: seconds between starting the children and the first stream (their interpreters start meanwhile)
LEAD = 2.0
#: the fields of a Result a child sends back (the body stays in the child)
FIELDS = ("status", "tokens", "max_gap", "max_gap_at", "heartbeats", "dones", "error", "first_byte", "total")


def default_procs() -> int:
    """One client process per core, at least two (a child per core keeps each loop light)."""
    return max(2, os.cpu_count() or 2)


async def spread(
    host: str,
    port: int,
    path: str,
    body: dict,
    headers: Dict[str, str],
    n: int,
    ramp_per_second: float,
    procs: int,
    timeout: float = 120.0,
) -> Tuple[List[Result], float]:
    """``n`` streams started at ``ramp_per_second`` over ``procs`` processes; their results and the children's CPU s."""
    start_at = time.time() + LEAD
    spec = {
        "host": host,
        "port": port,
        "path": path,
        "body": body,
        "headers": headers,
        "n": n,
        "ramp": ramp_per_second,
        "procs": procs,
        "start_at": start_at,
        "timeout": timeout,
    }
    children = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bench.client_procs",
            json.dumps({**spec, "index": k}),
            stdout=asyncio.subprocess.PIPE,
            cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        )
        for k in range(procs)
    ]
    results: List[Result] = []
    cpu = 0.0
    try:
        for child in children:
            out, _ = await child.communicate()
            try:
                data = json.loads(out.decode().strip().splitlines()[-1])
            except (ValueError, IndexError):
                results += [Result(error=f"client process {child.pid} exited {child.returncode}")] * len(
                    range(children.index(child), n, procs)
                )
                continue
            cpu += data["cpu"]
            results += [Result(**r) for r in data["results"]]
    finally:
        for child in children:  # only if the caller was cancelled: end our own children, by pid
            if child.returncode is None:
                child.kill()
                await child.wait()
    return results, cpu


async def _child(spec: dict) -> List[Result]:
    index, procs, ramp = spec["index"], spec["procs"], spec["ramp"]

    async def one(i: int) -> Result:
        await asyncio.sleep(max(0.0, spec["start_at"] + i / ramp - time.time()))
        return await request(
            spec["host"], spec["port"], "POST", spec["path"], spec["body"], spec["headers"], timeout=spec["timeout"]
        )

    return list(await asyncio.gather(*(one(i) for i in range(index, spec["n"], procs))))


def main(argv: Optional[List[str]] = None) -> None:
    """Child entry point: one JSON spec as the argument, one JSON line of results on stdout."""
    raise_nofile()
    spec = json.loads((argv or sys.argv[1:])[0])
    cpu0 = time.process_time()
    results = asyncio.run(_child(spec))
    rows = [asdict(r) for r in results]
    row = {"cpu": time.process_time() - cpu0, "results": [{k: r[k] for k in FIELDS} for r in rows]}
    sys.stdout.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
