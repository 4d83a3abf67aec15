"""Micro-benchmark: what one chat turn start costs the worker (SQL statements, commits, CPU).

An in-process app (``create_app``) against the bench model server answers
``POST /api/chat_stream`` turns one after another, each a one-token reply. For every turn:

- the SQL run on the request-path connection and on the durable writer's connection
  (``set_trace_callback`` on both; trigger lines ``-- ...`` and a statement's repeats while
  its triggers run are counted once), split into statements, ``sqlite_master`` lookups
  (sqlite-utils introspection) and commits;
- the request thread's CPU until the response is returned (``time.thread_time``): the start
  path before the first byte;
- the whole process's CPU per complete turn (``time.process_time`` over all turns), which
  includes the durable log's writes, the final save and reading the one-token reply.

``--held N`` first puts N finished runs into the engine's memory (what a busy replay window
holds) to show whether a start's cost grows with them.

Run: ``python -m bench.turn_start [--turns 300] [--held 20000]``.
"""

from __future__ import annotations

import argparse
import collections
import os
import tempfile
import threading
import time
from typing import Dict, List

from .common import HOST, median, model_server, pct

MESSAGE = "bench tokens=1"


def _normalise(statements: List[str]) -> List[str]:
    out: List[str] = []
    for statement in statements:
        text = " ".join(statement.split()).lower()
        if not text.startswith("--") and (not out or out[-1] != text):
            out.append(text)
    return out


def summarize(statements: List[str]) -> Dict[str, int]:
    """Counts of one turn's SQL: statements, selects, sqlite_master lookups, writes, commits."""
    norm = _normalise(statements)
    return {
        "statements": len(norm),
        "selects": sum(1 for s in norm if s.startswith(("select", "with"))),
        "sqlite_master": sum(1 for s in norm if "sqlite_master" in s or s.startswith("pragma table_")),
        "writes": sum(1 for s in norm if s.startswith(("insert", "update", "delete", "replace"))),
        "commits": sum(1 for s in norm if s == "commit"),
    }


def hold_finished_runs(engine, n: int) -> None:
    """Put ``n`` finished, reader-less runs into the engine's memory (a busy replay window), as
    ``RunEngine._finalize`` leaves a run: held, finished, its eviction scheduled an ``EVICT_GRACE`` away."""
    from odysseus.events import Event
    from odysseus.runs.run import Run
    from odysseus.runs.run_log import RunLog

    with engine._lock:
        for i in range(n):
            log = RunLog(100, 1 << 16, engine.budget)
            log.append(Event("delta", {"delta": "x"}))
            run = Run(
                run_id=f"run_held{i}",
                session_id=f"s_held{i}",
                owner="held",
                mode="chat",
                model="bench",
                client_message_id=None,
                user_message_id=None,
                log=log,
                terminal_type="chat_terminal",
            )
            run.status, run.finalized, run.finished_at = "done", True, time.time()
            run.settled.set()
            engine.runs[run.run_id] = run
            engine._finished[run.run_id] = run
            engine.by_session[(run.owner, run.session_id)] = run
            engine._schedule_evict(run)


def measure(turns: int = 300, held: int = 0, warmup: int = 20) -> Dict[str, float]:
    """Run ``turns`` sequential one-token turns and return per-turn SQL counts and CPU."""
    from odysseus import create_app
    from odysseus.llm.base import ProviderConfig

    with model_server(tokens=1) as port, tempfile.TemporaryDirectory(prefix="odysseus-turn-") as data_dir:
        provider = ProviderConfig(
            name="openai",
            kind="openai",
            base_url=f"http://{HOST}:{port}/v1",
            api_key="x",
            models=["bench"],
            default_model="bench",
        )
        app = create_app(
            {
                "DATA_DIR": data_dir,
                "AUTH": "none",
                "PROVIDERS": [provider],
                "EVENT_FLUSH_INTERVAL": 0.2,
                "EVICT_GRACE": 3600,
                "PROCESS_MAX_BYTES": 1 << 34,
                "MAX_STREAMS_PER_USER": 1000,
            }
        )
        engine, store = app.extensions["odysseus.runs"], app.extensions["odysseus.store"]
        client = app.test_client()
        headers = {"Origin": "http://localhost"}
        hold_finished_runs(engine, held)
        trace: List[str] = []  # the request thread's statements (the start path)
        turn_trace: List[str] = []  # the run's own statements on the request-path connection
        writer_trace: List[str] = []
        main = threading.get_ident()
        # set once: changing a trace callback while another thread runs a statement deadlocks on the GIL
        store.locked.trace(lambda sql: (trace if threading.get_ident() == main else turn_trace).append(sql))
        engine.durable._native.call(lambda: engine.durable._db().set_trace_callback(writer_trace.append))
        start_cpu: List[float] = []
        per_turn = collections.defaultdict(list)
        cpu0 = wall0 = 0.0
        for index in range(warmup + turns):
            if index == warmup:
                engine.durable.flush()
                trace.clear()
                turn_trace.clear()
                writer_trace.clear()
                cpu0, wall0 = time.process_time(), time.monotonic()
            measured = index >= warmup
            t0 = time.thread_time()
            response = client.post("/api/chat_stream", json={"message": MESSAGE}, headers=headers, buffered=False)
            spent = time.thread_time() - t0
            body = b"".join(response.response)
            response.close()
            if (
                response.status_code != 200
                or b'"type": "done"' not in body
                and b"event: done" not in body
                and b"done" not in body
            ):
                raise RuntimeError(f"turn failed: {response.status_code} {body[:300]!r}")
            run_id = response.headers.get("X-Odysseus-Run-Id")
            run = engine.runs.get(run_id) if run_id else None
            if run is not None:
                run.settled.wait(10)
            if measured:
                start_cpu.append(spent)
                for key, value in summarize(trace).items():
                    per_turn[key].append(value)
            trace.clear()
        engine.durable.flush()
        total_cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
        store.locked.trace(None)
        writer, in_turn = summarize(writer_trace), summarize(turn_trace)
        engine.durable._native.call(lambda: engine.durable._db().set_trace_callback(None))
        engine.close()
        store.close()
    out = {f"request_{k}": median(v) for k, v in per_turn.items()}
    out.update({f"turn_{k}_per_turn": v / turns for k, v in in_turn.items()})
    out.update({f"writer_{k}_per_turn": v / turns for k, v in writer.items()})
    out.update(
        {
            "held": held,
            "turns": turns,
            "start_cpu_ms_median": median(start_cpu) * 1000,
            "start_cpu_ms_p90": pct(start_cpu, 0.9) * 1000,
            "process_cpu_ms_per_turn": total_cpu / turns * 1000,
            "turns_per_second": turns / wall,
        }
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--held", type=int, default=0)
    args = parser.parse_args()
    os.environ.setdefault("ODYSSEUS_LOG_LEVEL", "warning")
    for key, value in measure(args.turns, args.held).items():
        print(f"{key:34s} {value:.3f}" if isinstance(value, float) else f"{key:34s} {value}")


if __name__ == "__main__":
    main()
