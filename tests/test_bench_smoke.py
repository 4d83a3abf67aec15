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
