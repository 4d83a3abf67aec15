"""Benchmark 17: the capacity model (issue 40): per-component costs on one core, and what a box carries.

``python -m bench.capacity [--quick | --smoke]``

Measured here, each component on its own (the worker pinned to core 0; the client, the model
server and redis-server on core 1, where there are two cores):

- **worker**: CPU per turn start (1-token turns) and per token (long replies minus short), with
  ``RUN_BACKEND=redis`` (``/proc/<pid>/stat`` deltas, the worker's idle rate subtracted);
- **Redis**: commands and bytes in/out per event (``INFO commandstats`` and ``INFO stats``
  deltas around the run; an event is one entry of a run's log, one ``XADD``) and redis-server's
  own CPU per event and per turn (its process CPU delta);
- **SQLite**: statements, transactions and write-lock time per turn (an in-process app with
  both connections traced and their write transactions timed), WAL frames per turn (a reader
  holds a snapshot during the run, so the WAL cannot restart and its growth counts every
  frame), and the durable writer's capacity: events per second it commits on one core (its
  native thread's CPU time over group commits of 200-event flushes).

From these, ``model()`` computes what one box of 8, 16 and 64 cores carries with the Redis
backend and which resource saturates first; ``check()`` compares the model's prediction with
what 1 and 2 workers measure here. The arithmetic lives in this module so it can be rerun.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import tempfile
import threading
import time
from typing import Dict, Tuple

from .common import (
    HOST,
    app_server,
    cpu_seconds,
    model_process,
    origin,
    table,
    worker_pid,
)
from .targets_load import turns

#: (short turns, long turns, long tokens, durable events, validation turns)
SIZES = {
    "full": (400, 20, 2000, 200_000, 600),
    "quick": (150, 8, 1000, 50_000, 200),
    "smoke": (30, 2, 200, 5_000, 40),
}
#: the sizing's typical turn: a 500-token reply streamed at 50 tokens/s (10 s), a new turn every
#: time (a follow-up's start costs what a new chat's does, within the noise of benchmark 8)
TYPICAL_TOKENS, TYPICAL_RATE = 500, 50.0
#: streams one worker holds with on-time heartbeats (benchmark 8: 5,000 detached streams held)
HELD_PER_WORKER = 5000
BOXES = (8, 16, 64)
#: the turn shapes sized: (tokens, tokens/s); the typical turn, and a short one where the start dominates
SHAPES = ((TYPICAL_TOKENS, TYPICAL_RATE), (50, TYPICAL_RATE))
#: worker CPU per turn start and per token of benchmark 8's run of 2026-12-02 16:38 (a quieter box)
QUIET_WORKER = (2.53e-3, 6.3e-6)
VALIDATION_TOKENS, VALIDATION_CLIENTS = 20, 16


def _pin(pid: int, cores: set) -> None:
    try:
        os.sched_setaffinity(pid, cores)
    except OSError:
        pass


def _pin_tree(pid: int, cores: set) -> None:
    """Pin a process and its threads (their affinity is per thread)."""
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            _pin(int(task), cores)
    except OSError:
        pass


class Redis:
    """``INFO`` deltas and process CPU of one redis-server."""

    def __init__(self, url: str, pid: int):
        import redis

        self.client = redis.Redis.from_url(url)
        self.pid = pid

    def snapshot(self) -> Dict[str, float]:
        stats = self.client.info("stats")
        commands = self.client.info("commandstats")
        out = {
            "in": float(stats["total_net_input_bytes"]),
            "out": float(stats["total_net_output_bytes"]),
            "cpu": cpu_seconds(self.pid),
            "commands": float(sum(v["calls"] for k, v in commands.items() if k not in ("cmdstat_info",))),
            "xadd": float(commands.get("cmdstat_xadd", {}).get("calls", 0)),
        }
        return out

    @staticmethod
    def delta(a: Dict[str, float], b: Dict[str, float]) -> Dict[str, float]:
        return {k: b[k] - a[k] for k in a}


class WalCounter:
    """WAL frames written between ``start`` and ``stop``: a reader's open snapshot keeps the WAL from restarting."""

    def __init__(self, path: str):
        self.path = path
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.page = self.conn.execute("pragma page_size").fetchone()[0]

    def _size(self) -> int:
        try:
            return os.path.getsize(self.path + "-wal")
        except OSError:
            return 0

    def start(self) -> None:
        self.conn.execute("begin")
        self.conn.execute("select count(*) from sessions").fetchone()
        self.before = self._size()

    def stop(self) -> int:
        frames = (self._size() - self.before) // (self.page + 24)
        self.conn.execute("commit")
        return frames


async def _idle(pid: int, seconds: float = 1.0) -> float:
    c0, t0 = cpu_seconds(pid), time.perf_counter()
    await asyncio.sleep(seconds)
    return (cpu_seconds(pid) - c0) / (time.perf_counter() - t0)


async def _measured(pid: int, idle: float, redis: Redis, coro) -> Dict[str, float]:
    """Worker CPU (idle rate subtracted), Redis deltas and the wall time of ``coro`` plus a settle."""
    r0, c0, t0 = redis.snapshot(), cpu_seconds(pid), time.perf_counter()
    failures, _wall = await coro
    await asyncio.sleep(0.5)  # saves and the Redis writer's last pipeline end after the last byte
    elapsed = time.perf_counter() - t0
    out = Redis.delta(r0, redis.snapshot())
    out["worker"] = max(0.0, cpu_seconds(pid) - c0 - idle * elapsed)
    out["failures"] = failures
    return out


def worker_and_redis(size: str, redis_url: str, redis_pid: int, model_port: int, prefix: str) -> Dict[str, float]:
    """Per turn and per token: worker CPU, Redis commands, bytes and CPU, WAL frames (one worker, Redis backend)."""
    short_n, long_n, long_tokens, _events, _v = SIZES[size]
    env = {
        "ODYSSEUS_RUN_BACKEND": "redis",
        "ODYSSEUS_REDIS_URL": redis_url,
        "ODYSSEUS_REDIS_PREFIX": prefix,
        "ODYSSEUS_TITLE_MODE": "first_line",
    }
    redis = Redis(redis_url, redis_pid)
    with app_server(model_port, env) as app:
        pid = worker_pid(app)
        _pin_tree(pid, {0})
        headers = origin(app)

        async def go() -> Dict[str, float]:
            await turns(app.port, headers, 30, 4, "warm tokens=1 delay=0")
            _pin_tree(pid, {0})  # threads started since (the writer's, Redis's) follow
            idle = await _idle(pid)
            wal = WalCounter(os.path.join(app.data_dir, "odysseus.db"))
            wal.start()
            short = await _measured(pid, idle, redis, turns(app.port, headers, short_n, 4, "short tokens=1 delay=0"))
            frames = wal.stop()
            long = await _measured(
                pid, idle, redis, turns(app.port, headers, long_n, 1, f"long tokens={long_tokens} delay=0")
            )
            return {"short": short, "long": long, "frames": frames, "idle": idle}  # type: ignore[dict-item]

        got = asyncio.run(go())
    short, long = got["short"], got["long"]
    per_turn = {k: v / short_n for k, v in short.items()}
    long_turn = {k: v / long_n for k, v in long.items()}
    per_token = {k: max(0.0, (long_turn[k] - per_turn[k]) / (long_tokens - 1)) for k in per_turn}
    events_turn = per_turn["xadd"]
    events_long = long_turn["xadd"]
    return {
        "worker_turn": per_turn["worker"],
        "worker_token": per_token["worker"],
        "events_turn": events_turn,
        "events_token": (events_long - events_turn) / (long_tokens - 1),
        "redis_cmds_event": (short["commands"] + long["commands"]) / max(1.0, short["xadd"] + long["xadd"]),
        "redis_cmds_turn": per_turn["commands"],
        "redis_in_event": long["in"] / max(1.0, long["xadd"]),
        "redis_out_event": long["out"] / max(1.0, long["xadd"]),
        "redis_in_turn": per_turn["in"],
        "redis_cpu_turn": per_turn["cpu"],
        # all of Redis's CPU over all events (the marginal difference is below /proc's 10 ms tick)
        "redis_cpu_event": (short["cpu"] + long["cpu"]) / max(1.0, short["xadd"] + long["xadd"]),
        "wal_frames_turn": got["frames"] / short_n,
        "failures": short["failures"] + long["failures"],
        "idle": got["idle"],  # type: ignore[dict-item]
    }


def sqlite_per_turn(model_port: int, turns: int) -> Dict[str, float]:
    """Statements, transactions and write-lock seconds per 1-token turn, in-process (both connections traced)."""
    from odysseus import create_app
    from odysseus.llm.base import ProviderConfig
    from odysseus.runs import durable as durable_module

    counts = {"statements": 0, "writes": 0, "commits": 0}
    held = [0.0]
    lock = threading.Lock()

    def traced(sql: str) -> None:
        head = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else ""
        with lock:
            counts["statements"] += 1
            if head in ("INSERT", "UPDATE", "DELETE", "REPLACE"):
                counts["writes"] += 1
            elif head == "COMMIT":
                counts["commits"] += 1

    with tempfile.TemporaryDirectory(prefix="odysseus-bench-sqlite-") as tmp:
        app = create_app(
            {
                "DATA_DIR": tmp,
                "AUTH": "none",
                "TITLE_MODE": "first_line",
                "PROVIDERS": [
                    ProviderConfig(
                        name="m", kind="openai", base_url=f"http://{HOST}:{model_port}/v1", default_model="bench"
                    )
                ],
            }
        )
        try:
            store = app.extensions["odysseus.store"]
            engine = app.extensions["odysseus.runs"]
            durable = engine.durable
            client = app.test_client()

            def turn() -> None:
                response = client.post(
                    "/api/chat_stream", json={"message": "sql tokens=1 delay=0"}, headers=origin_local
                )
                response.get_data()
                engine.runs[response.headers["X-Odysseus-Run-Id"]].settled.wait(10)

            origin_local = {"Origin": "http://localhost"}
            for _ in range(5):
                turn()
            durable.flush(timeout=10)
            # time every write transaction: the hub's (Locked.tx) and the native writer's
            real_tx = type(store.locked).tx

            from contextlib import contextmanager

            @contextmanager
            def timed_tx(self):
                t0 = time.thread_time()  # CPU time: on a loaded box, wall time would count others' turns
                try:
                    with real_tx(self) as db:
                        yield db
                finally:
                    held[0] += time.thread_time() - t0

            type(store.locked).tx = timed_tx  # type: ignore[method-assign]
            natives = ("_flush_native", "_final_native", "_write_native")
            real_native = {name: getattr(durable_module.DurableLog, name) for name in natives}

            def wrap(fn):
                def timed(self, *args):
                    t0 = time.thread_time()
                    try:
                        return fn(self, *args)
                    finally:
                        held[0] += time.thread_time() - t0

                return timed

            for name, fn in real_native.items():
                setattr(durable_module.DurableLog, name, wrap(fn))
            store.locked.trace(traced)
            durable._native.call(lambda: durable._db().set_trace_callback(traced))
            try:
                for _ in range(turns):
                    turn()
                durable.flush(timeout=10)
            finally:
                store.locked.trace(None)
                durable._native.call(lambda: durable._db().set_trace_callback(None))
                type(store.locked).tx = real_tx  # type: ignore[method-assign]
                for name, fn in real_native.items():
                    setattr(durable_module.DurableLog, name, fn)
        finally:
            from apphelpers import close_app

            close_app(app)
    return {
        "statements_turn": counts["statements"] / turns,
        "writes_turn": counts["writes"] / turns,
        "commits_turn": counts["commits"] / turns,
        "lock_turn": held[0] / turns,
    }


def durable_capacity(events: int, per_flush: int = 200, per_run: int = 10) -> float:
    """Events per second of native-thread CPU the durable writer commits, in flushes of ``per_flush`` events.

    ``per_run`` consecutive events of a run per flush (they share a row, ``event_packs``): the typical
    turn's 50 tokens/s over the 0.2 s flush interval make 10."""
    from odysseus import create_app
    from odysseus.events import Event
    from odysseus.runs.durable import DurableLog
    from odysseus.runs.run_log import encode_payload

    with tempfile.TemporaryDirectory(prefix="odysseus-bench-durable-") as tmp:
        app = create_app({"DATA_DIR": tmp, "AUTH": "none"})
        path = app.extensions["odysseus.store"].path
        from apphelpers import close_app

        close_app(app)  # the schema is there; the writer alone uses the file now
        log = DurableLog(path, {"EVENT_FLUSH_INTERVAL": 3600}, "bench")
        runs = [f"run{i}" for i in range(per_flush // per_run)]  # the runs streaming at once
        seq = {r: 0 for r in runs}
        cpu = [0.0]

        def flush_timed() -> None:
            t0 = time.thread_time()
            log._flush_native()
            cpu[0] += time.thread_time() - t0

        sent = 0
        while sent < events:
            for i in range(per_flush):
                run = runs[i // per_run]
                seq[run] += 1
                event = Event("delta", {"delta": f"tk{seq[run]} "}).numbered(seq[run])
                log.enqueue(run, (event, encode_payload(event.data)))
            log._native.call(flush_timed, timeout=60)
            sent += per_flush
        log.close()
    return sent / cpu[0] if cpu[0] else float("nan")


def validation(size: str, redis_url: str, model_port: int, prefix: str, workers: int) -> Dict[str, float]:
    """Measured turns/s and events/s with ``workers`` workers (20-token turns, 16 clients), and the CPU of it all."""
    turns_n = SIZES[size][4]
    env = {
        "ODYSSEUS_RUN_BACKEND": "redis",
        "ODYSSEUS_REDIS_URL": redis_url,
        "ODYSSEUS_REDIS_PREFIX": prefix,
        "ODYSSEUS_TITLE_MODE": "first_line",
        "ODYSSEUS_WORKERS": str(workers),
    }
    import redis as redis_lib

    client = redis_lib.Redis.from_url(redis_url)
    with app_server(model_port, env) as app:
        headers = origin(app)
        asyncio.run(turns(app.port, headers, 40, 8, "warm tokens=1 delay=0"))
        pids = app.worker_pids()
        x0 = client.info("commandstats").get("cmdstat_xadd", {}).get("calls", 0)
        c0 = sum(cpu_seconds(p) for p in pids)
        failures, wall = asyncio.run(
            turns(app.port, headers, turns_n, VALIDATION_CLIENTS, f"rate tokens={VALIDATION_TOKENS} delay=0")
        )
        cpu = sum(cpu_seconds(p) for p in pids) - c0
        x1 = client.info("commandstats").get("cmdstat_xadd", {}).get("calls", 0)
    return {
        "turns_s": turns_n / wall,
        "events_s": (x1 - x0) / wall,
        "worker_cpu_s": cpu,
        "worker_cpu_turn": cpu / turns_n,
        "failures": failures,
        "wall": wall,
    }


# ------------------------------------------------------------------ the model


def turn_costs(m: Dict[str, float], tokens: int) -> Dict[str, float]:
    """Per turn of ``tokens`` tokens: worker CPU s, Redis CPU s, SQLite write-lock s, events."""
    events = m["events_turn"] + (tokens - 1) * m["events_token"]
    return {
        "worker": m["worker_turn"] + (tokens - 1) * m["worker_token"],
        "redis": m["redis_cpu_turn"] + (events - m["events_turn"]) * m["redis_cpu_event"],
        "sqlite": m["lock_turn"] + (events - m["events_turn"]) / m["durable_events_s"],
        "events": events,
    }


def box(m: Dict[str, float], cores: int, tokens: int = TYPICAL_TOKENS, rate: float = TYPICAL_RATE) -> Dict:
    """What one box of ``cores`` cores carries: one core left to Redis (its one thread), the rest workers."""
    c = turn_costs(m, tokens)
    workers = max(1, cores - 1)
    limits = {
        f"worker cores ({workers})": workers / c["worker"],
        "Redis's one thread": 1.0 / c["redis"],
        "SQLite's one writer": 1.0 / c["sqlite"],
    }
    bound = min(limits, key=lambda k: limits[k])
    turns_s = limits[bound]
    duration = tokens / rate
    streams = min(turns_s * duration, workers * HELD_PER_WORKER)
    return {
        "cores": cores,
        "turns_s": turns_s,
        "bound": bound,
        "limits": limits,
        "streams": streams,
        "events_s": turns_s * c["events"],
    }


def predict_here(
    m: Dict[str, float], workers: int, harness_cpu_turn: float, tokens: int, cores: float
) -> Tuple[float, float]:
    """Predicted turns/s and events/s on ``cores`` cores (what this box gave the run): ``workers`` workers
    and the harness (client, model server, Redis) share them."""
    c = turn_costs(m, tokens)
    worker_bound = workers / c["worker"]
    shared_bound = cores / (c["worker"] + harness_cpu_turn)  # everything on the same cores
    turns_s = min(worker_bound, shared_bound, 1.0 / c["redis"], 1.0 / c["sqlite"])
    return turns_s, turns_s * c["events"]


def sqlite_wall(m: Dict[str, float], tokens: int = TYPICAL_TOKENS) -> Tuple[float, float]:
    """(turns/s at which SQLite's one writer saturates, worker cores that reach it) for the typical turn."""
    c = turn_costs(m, tokens)
    turns_s = 1.0 / c["sqlite"]
    return turns_s, turns_s * c["worker"]


def run(quick: bool = False, size: str = "") -> Tuple[str, Dict[str, bool]]:
    """Run benchmark 17; its Markdown body and (no) targets."""
    from redisserver import RedisServer, redis_available

    size = size or ("quick" if quick else "full")
    if not redis_available():
        return "redis-server is not installed: skipped.", {}
    started, load0 = time.monotonic(), os.getloadavg()[0]
    others = {1} if (os.cpu_count() or 1) > 1 else {0}
    _pin(0, others)  # this process (the client) off the worker's core
    with tempfile.TemporaryDirectory(prefix="odysseus-bench-capacity-") as tmp, model_process() as (model_port, mpid):
        _pin_tree(mpid, others)
        redis = RedisServer(tmp).start()
        try:
            assert redis.proc is not None
            _pin_tree(redis.proc.pid, others)
            m = worker_and_redis(size, redis.url, redis.proc.pid, model_port, f"cap{os.getpid()}a:")
            m.update(sqlite_per_turn(model_port, max(20, SIZES[size][0] // 4)))
            m["durable_events_s"] = durable_capacity(SIZES[size][3])
            _pin(0, set(range(os.cpu_count() or 1)))  # validation: everything shares the box, as served
            checks = {}
            for workers in (1, 2):
                h0 = time.process_time() + cpu_seconds(mpid) + cpu_seconds(redis.proc.pid)
                v = validation(size, redis.url, model_port, f"cap{os.getpid()}v{workers}:", workers)
                harness = time.process_time() + cpu_seconds(mpid) + cpu_seconds(redis.proc.pid) - h0
                v["harness_turn"] = harness / SIZES[size][4]  # includes the warm-up: a slight overestimate
                v["cores_got"] = (v["worker_cpu_s"] + harness) / v["wall"]
                checks[workers] = v
        finally:
            redis.stop()
    load1 = os.getloadavg()[0]
    return report(m, checks, size, load0, load1, time.monotonic() - started), {}


def scaled(m: Dict[str, float], factor: float) -> Dict[str, float]:
    """The costs ``m`` with every CPU time multiplied by ``factor`` (and the writer's rate divided by it)."""
    out = dict(m)
    for key in ("worker_turn", "worker_token", "redis_cpu_turn", "redis_cpu_event", "lock_turn"):
        out[key] = m[key] * factor
    out["durable_events_s"] = m["durable_events_s"] / factor
    return out


def sizing_table(m: Dict[str, float]) -> str:
    """The sizing table for ``BOXES`` and each of ``SHAPES`` from the costs ``m``."""
    rows = []
    for cores in BOXES:
        for tokens, rate in SHAPES:
            b = box(m, cores, tokens, rate)
            rows.append(
                [
                    cores,
                    f"{tokens} tokens, {tokens / rate:g} s",
                    f"{b['turns_s']:,.0f}",
                    b["bound"],
                    f"{b['streams']:,.0f}",
                    f"{b['events_s']:,.0f}",
                    " / ".join(f"{v:,.0f}" for v in b["limits"].values()),
                ]
            )
    return table(
        [
            "cores",
            "turn",
            "turns/s",
            "saturates first",
            "concurrent streams",
            "events/s",
            "limits: workers / Redis / SQLite (turns/s)",
        ],
        rows,
    )


def crossover(m: Dict[str, float]) -> float:
    """The reply length (tokens) below which SQLite's one writer saturates before Redis's one thread."""
    per_token_redis = m["events_token"] * m["redis_cpu_event"]
    per_token_sqlite = m["events_token"] / m["durable_events_s"]
    if per_token_redis <= per_token_sqlite:
        return float("inf")
    return 1 + (m["lock_turn"] - m["redis_cpu_turn"]) / (per_token_redis - per_token_sqlite)


def report(
    m: Dict[str, float], checks: Dict[int, Dict[str, float]], size: str, load0: float, load1: float, secs: float
):
    """The measured costs, the sizing table and the check against this box, as Markdown."""
    us = 1e6
    costs = table(
        ["component", "cost", "how"],
        [
            ["worker CPU per turn start", f"{m['worker_turn'] * 1000:.2f} ms", "1-token turns, 4 clients, pinned"],
            ["worker CPU per token", f"{m['worker_token'] * us:.1f} µs", "long replies minus 1-token turns"],
            [
                "run-log events per 1-token turn / per token",
                f"{m['events_turn']:.1f} / {m['events_token']:.3f}",
                "XADD calls",
            ],
            [
                "Redis commands per event",
                f"{m['redis_cmds_event']:.2f}",
                f"{m['redis_cmds_turn']:.1f} per 1-token turn",
            ],
            [
                "Redis bytes in / out per event",
                f"{m['redis_in_event']:.0f} / {m['redis_out_event']:.0f} B",
                f"{m['redis_in_turn']:.0f} B in per 1-token turn",
            ],
            [
                "Redis CPU per event / per 1-token turn",
                f"{m['redis_cpu_event'] * us:.2f} µs / {m['redis_cpu_turn'] * us:.0f} µs",
                "redis-server's process CPU",
            ],
            [
                "SQLite per 1-token turn",
                f"{m['statements_turn']:.1f} statements ({m['writes_turn']:.1f} writes), "
                f"{m['commits_turn']:.2f} transactions, {m['wal_frames_turn']:.1f} WAL frames",
                "both connections traced (in-process); WAL growth under a held snapshot (served)",
            ],
            [
                "SQLite write lock held per 1-token turn",
                f"{m['lock_turn'] * 1000:.2f} ms",
                "the start's transaction + the writer's share (in-process, one client)",
            ],
            [
                "durable writer capacity",
                f"{m['durable_events_s']:,.0f} events/s",
                "native-thread CPU, 200-event flushes, 10 events per run",
            ],
        ],
    )
    sizing = sizing_table(m)
    inflation = m["worker_turn"] / QUIET_WORKER[0]
    quiet = sizing_table(scaled(m, 1 / inflation))
    wall_turns, wall_cores = sqlite_wall(m)
    typical_events = turn_costs(m, TYPICAL_TOKENS)["events"]
    short_turns, short_cores = sqlite_wall(m, 1)
    cross = crossover(m)
    order = (
        "SQLite's writer saturates before Redis's thread at every reply length."
        if cross == float("inf")
        else f"Below {cross:.0f} tokens per reply SQLite's writer saturates before Redis's thread, above it after."
    )
    check_rows = []
    for workers, v in checks.items():
        p_turns, p_events = predict_here(m, workers, v["harness_turn"], VALIDATION_TOKENS, v["cores_got"])
        check_rows.append(
            [
                workers,
                f"{p_turns:,.0f}",
                f"{v['turns_s']:,.0f}",
                f"{v['turns_s'] / p_turns:.2f}x",
                f"{p_events:,.0f}",
                f"{v['events_s']:,.0f}",
                f"{v['worker_cpu_turn'] * 1000:.2f}",
                f"{v['harness_turn'] * 1000:.2f}",
                f"{v['cores_got']:.2f}",
                int(v["failures"]),
            ]
        )
    check = table(
        [
            "workers",
            "predicted turns/s",
            "measured turns/s",
            "measured / predicted",
            "predicted events/s",
            "measured events/s",
            "worker CPU per turn (ms)",
            "harness CPU per turn (ms)",
            "cores the run got",
            "failures",
        ],
        check_rows,
    )
    return (
        f"Per component (one worker, `RUN_BACKEND=redis`, worker pinned to core 0):\n\n{costs}\n\n"
        f"Sizing (a typical turn: {TYPICAL_TOKENS} tokens at {TYPICAL_RATE:g} tokens/s, "
        f"a {TYPICAL_TOKENS / TYPICAL_RATE:g} s stream, and a short one; cores - 1 workers, one core left to "
        f"Redis; the model runs elsewhere; concurrent streams = turns/s x stream time, capped at "
        f"{HELD_PER_WORKER:,} per worker):"
        f"\n\n{sizing}\n\n"
        f"The same with every CPU cost divided by {inflation:.2f}, this run's worker CPU per turn start against "
        f"benchmark 8's quiet run ({QUIET_WORKER[0] * 1000:.2f} ms; this box's load inflates CPU times, assumed "
        f"alike for every component):\n\n{quiet}\n\n"
        f"SQLite's one writer saturates at {wall_turns:,.0f} typical turns/s ({wall_turns * typical_events:,.0f} "
        f"events/s), which {wall_cores:.1f} worker cores reach; at {short_turns:,.0f} 1-token turns/s, which "
        f"{short_cores:.1f} worker cores reach. {order}\n\n"
        f"The model against this box ({VALIDATION_TOKENS}-token turns, {VALIDATION_CLIENTS} "
        f"clients, client, model server and Redis on the same {os.cpu_count()} cores: predicted = min(workers / "
        f"worker CPU, cores / (worker + harness CPU), Redis, SQLite)):\n\n{check}\n\n"
        f"Load average {load0:.2f} at the start, {load1:.2f} at the end ({size} sizes). "
        f"Duration: {secs:.0f} s."
    )


def main() -> None:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    text, _ = run(size="smoke" if args.smoke else "quick" if args.quick else "full")
    print(text)


if __name__ == "__main__":
    main()
