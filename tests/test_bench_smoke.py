"""The issue-22 targets benchmark (bench/targets.py) in its smoke mode: real servers, the report's shape."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _targets(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "bench.targets", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.slow
def test_smoke_run_measures_each_selected_part_against_the_model_server():
    done = _targets("--smoke", "--only", "paced,cpu", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    data = json.loads(done.stdout)
    assert data["mode"] == "smoke"
    assert list(data["parts"]) == ["paced", "cpu"]  # selected parts only, in the order asked
    targets = []
    for key, part in data["parts"].items():
        assert part["seconds"] > 0
        for target, measured, note, met in part["rows"]:
            assert measured != "failed", f"{key}: {note}"
            assert met in (True, False, None)
            targets.append(target)
    assert any("first token p99" in t for t in targets)
    assert any("reply time within 5%" in t for t in targets)
    assert any("per streamed token" in t for t in targets)
    assert any("per turn start" in t for t in targets)
    assert any("intake" in t for t in targets)
    paced = data["parts"]["paced"]["rows"][0]
    assert "errors direct/app 0/0" in paced[2]  # every smoke stream on both paths carried all its tokens
    cpu = {row[0]: row[1] for row in data["parts"]["cpu"]["rows"]}
    per_token = next(v for k, v in cpu.items() if "per streamed token" in k)
    assert per_token.endswith("µs") and float(per_token.split()[0]) >= 0


def test_unknown_part_is_refused_before_anything_starts():
    done = _targets("--smoke", "--only", "paced,nonsense", timeout=60)
    assert done.returncode != 0
    assert "unknown parts ['nonsense']" in done.stderr


def test_a_failing_part_is_a_failed_row_and_the_others_still_run(monkeypatch):
    from bench import targets

    def broken(size):
        raise RuntimeError("model server did not start")

    monkeypatch.setitem(targets.PARTS, "paced", broken)
    monkeypatch.setitem(targets.PARTS, "burst", lambda size: [("a target", "1 ms", "note | with a bar", True)])
    data = targets.measure(["paced", "burst"], "smoke")
    assert data["parts"]["paced"]["rows"] == [["paced", "failed", "RuntimeError: model server did not start", False]]
    text, verdicts = targets.report(data)
    lines = text.splitlines()
    assert lines[0].startswith("| part | target | measured |")
    assert len([ln for ln in lines if ln.startswith("| paced") or ln.startswith("| burst")]) == 2
    assert "note / with a bar" in text  # a cell never breaks the table
    assert verdicts == {"issue 22 (paced): paced": False, "issue 22 (burst): a target": True}


@pytest.mark.slow
def test_the_openai_api_benchmark_measures_every_path_side_by_side():
    done = subprocess.run(
        [sys.executable, "-m", "bench.openai_api", "--smoke"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [line.split("|")[1:-1] for line in done.stdout.splitlines() if line.startswith("| 1") and "`" in line]
    paths = [cells[1].strip() for cells in rows]
    assert paths == ["`direct`", "`/api/chat_stream`", "`/v1/chat/completions`", "`/v1/responses`"] * 2
    assert all(cells[-1].strip() == "0" for cells in rows)  # every reply on every path carried all its tokens
    assert done.stdout.count("within 10 % of /api/chat_stream") == 8


@pytest.mark.slow
def test_the_llama_server_benchmark_measures_both_paths_side_by_side():
    import llamacpp

    if not llamacpp.available():
        if llamacpp.required():
            pytest.fail("llama-server is not built (make llama-server)")
        pytest.skip("llama-server is not built (make llama-server)")
    done = subprocess.run(
        [sys.executable, "-m", "bench.llama_ttft", "--smoke"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [line.split("|")[1:-1] for line in done.stdout.splitlines() if line.startswith("| ") and "ms" in line]
    assert [cells[0].strip() for cells in rows] == ["llama-server directly", "through Odysseus"]
    assert all(cells[1].strip() == "4" for cells in rows)
    assert "x)" in rows[1][4]  # the added time, as a ratio too


@pytest.mark.slow
def test_the_titles_benchmark_compares_both_title_modes_and_titles_really_ran():
    done = subprocess.run(
        [sys.executable, "-m", "bench.titles", "--smoke"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = {cells[0].strip(): cells for cells in (ln.split("|")[1:-1] for ln in done.stdout.splitlines()) if cells}
    model, line = rows["`TITLE_MODE=model`"], rows["`TITLE_MODE=first_line`"]
    assert model[-1].strip() == line[-1].strip() == rows["direct"][-1].strip() == "0"  # no stream failed
    titled, sessions = map(int, model[7].split("/"))
    assert sessions >= 20 and titled == sessions  # every new chat got its title from the model
    assert line[7].strip().startswith("0/")  # first_line never asks
    added = float(model[2]) - float(rows["direct"][2])  # app p99 minus direct p99, each rounded to 0.01 ms
    assert model[3].strip()[0] in "+-" and abs(float(model[3]) - added) <= 0.011
    assert "- met" in done.stdout or "- not met" in done.stdout


def test_the_capacity_model_names_the_resource_that_saturates_first():
    from bench import capacity

    costs = {
        "worker_turn": 2e-3,
        "worker_token": 10e-6,
        "events_turn": 10.0,
        "events_token": 1.0,
        "redis_cpu_turn": 100e-6,
        "redis_cpu_event": 5e-6,
        "lock_turn": 1e-3,
        "durable_events_s": 1_000_000.0,
    }
    turn = capacity.turn_costs(costs, 101)
    assert turn["events"] == 110 and turn["worker"] == 2e-3 + 100 * 10e-6  # 3 ms of worker CPU
    assert abs(turn["sqlite"] - 1.1e-3) < 1e-12 and abs(turn["redis"] - 600e-6) < 1e-12
    small = capacity.box(costs, 2, tokens=101, rate=10.0)  # 1 worker: 333 turns/s; SQLite 909, Redis 1,667
    assert small["bound"].startswith("worker cores") and abs(small["turns_s"] - 1 / 3e-3) < 1e-6
    assert abs(small["streams"] - small["turns_s"] * 10.1) < 1e-6 and small["events_s"] == small["turns_s"] * 110
    big = capacity.box(costs, 64, tokens=101, rate=10.0)  # 63 workers would carry 21,000: the writer is the wall
    assert big["bound"] == "SQLite's one writer" and abs(big["turns_s"] - 1 / 1.1e-3) < 1e-6
    wall_turns, wall_cores = capacity.sqlite_wall(costs, tokens=101)
    assert abs(wall_turns - 1 / 1.1e-3) < 1e-6 and abs(wall_cores - 3 / 1.1) < 1e-9  # 2.7 worker cores reach it
    sizing = capacity.sizing_table(costs)
    assert "| 8 | 500 tokens, 10 s | 385 | Redis's one thread |" in sizing  # 1 / 2.595 ms, before 7 workers' 1,001
    assert "| 8 | 50 tokens, 1 s | 953 | SQLite's one writer |" in sizing  # 1 / 1.049 ms: short turns hit SQLite
    # Redis costs 5 µs an event, SQLite's writer 1 µs: SQLite is the wall below 1 + (1 - 0.1 ms) / 4 µs tokens
    assert abs(capacity.crossover(costs) - 226) < 1e-9
    assert capacity.crossover({**costs, "durable_events_s": 100_000.0}) == float("inf")  # SQLite always first


@pytest.mark.slow
def test_the_capacity_benchmark_measures_every_component_and_prints_the_sizing():
    done = subprocess.run(
        [sys.executable, "-m", "bench.capacity", "--smoke"], cwd=ROOT, capture_output=True, text=True, timeout=400
    )
    if "redis-server is not installed" in done.stdout:
        pytest.skip("redis-server is not installed")
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    for component in ("worker CPU per turn start", "Redis commands per event", "SQLite per 1-token turn"):
        assert f"| {component} |" in out
    assert "durable writer capacity" in out and "events/s" in out
    sizing = [ln for ln in out.splitlines() if ln.startswith(("| 8 |", "| 16 |", "| 64 |"))]
    assert len(sizing) == 12  # two tables (this run's costs, scaled to a quiet box), three boxes, two turn shapes
    assert all(any(r in ln for r in ("worker cores", "Redis's one thread", "SQLite's one writer")) for ln in sizing)
    checks = [ln.split("|")[1:-1] for ln in out.splitlines() if ln.startswith(("| 1 |", "| 2 |"))]
    assert len(checks) == 2 and all(cells[-1].strip() == "0" for cells in checks)  # no failed turn
