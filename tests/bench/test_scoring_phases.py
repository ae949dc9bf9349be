"""bench/scoring_phases.py on a real run folder of the sample set (scripted model, stored
measurements) whose results were given known phases: each evaluation counted once, nvcc apart
from the worker's phases, timeouts apart, the rest only where timing.jsonl covers every task."""

from __future__ import annotations

import json

import pytest

from tests.report.test_run import TASKS, bench
from tests.script_helpers import load_script

phases = load_script("bench/scoring_phases.py")


def _run(tmp_path):
    """A finished 2-sample, 1-turn run of the sample set; every evaluation given compile 1 s
    and draw 0.5 s, the first task's made a 120 s timeout; its timing.jsonl replaced."""
    out = tmp_path / "r"
    bench(out, "scripted:best", turns=1)
    path = out / "trajectories.jsonl"
    recs = [json.loads(x) for x in path.read_text().splitlines()]
    first = recs[0]["task_id"]
    for rec in recs:
        for s in rec.get("samples", []):
            r = s.get("result")
            if r is None:
                continue
            r["cached"] = False
            r["cache_key"] = f"{rec['task_id']}/{r['candidate_hash']}"  # as the evaluator keys it
            r["phases"] = {"compile": 1.0, "draw": 0.5}
            if rec["task_id"] == first:  # a hang: no phase past the build
                r |= {"status": "timeout", "wall_s": 120.0, "phases": {"compile": 1.0}}
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return out


def _timing(out, chunks):
    (out / "timing.jsonl").write_text("".join(json.dumps(c) + "\n" for c in chunks))


def test_phases_once_per_evaluation_timeouts_and_the_rest(tmp_path):
    out = _run(tmp_path)
    n = len(TASKS)
    _timing(
        out, [{"tasks": n, "complete": True, "wall_s": 400.0, "generate_s": 9.0, "score_s": 300.0}]
    )
    r = phases.phases_of(out)
    assert r["evaluations"] == n  # scripted:best: both samples of a task share one evaluation
    assert r["statuses"]["timeout"] == 2 and sum(r["statuses"].values()) == 2 * n
    assert r["compile_s_sum"] == n * 1.0 and r["compile_s_per_evaluation"] == 1.0
    assert r["worker_phases"] == {"draw": (n - 1) * 0.5} == {"draw": r["worker_s_sum"]}
    assert r["timeouts"] == 2 and r["timeout_s"] == 240.0  # each sample's wait
    assert r["outside_phases_s"] == pytest.approx(300.0 - (n - 1) * 0.5 - 240.0, abs=0.05)
    assert r["scorer_clocks"] is None  # chunks timed before the scorer's clocks


def test_clocks_are_summed_and_no_rest_where_timing_misses_tasks(tmp_path, capsys):
    out = _run(tmp_path)
    clocks = {"evaluate_s": 150.0, "analyse_s": 20.0, "rank_s": 1.0}
    chunk = {"tasks": 1, "complete": True, "wall_s": 200.0, "generate_s": 9.0, "score_s": 180.0}
    _timing(out, [chunk | clocks, chunk | clocks])
    r = phases.phases_of(out)
    assert r["scorer_clocks"] == {"evaluate_s": 300.0, "analyse_s": 40.0, "rank_s": 2.0}
    assert r["outside_phases_s"] is None and r["timed_tasks"] == 2
    dest = tmp_path / "p.json"
    assert phases.main([str(out), str(tmp_path), "--out", str(dest)]) == 0
    doc = json.loads(dest.read_text())
    assert [x["run"] for x in doc["runs"]] == [str(out)]  # the folder of no run left out
    assert f"timing.jsonl has 2 of {len(TASKS)} tasks" in capsys.readouterr().out


def test_no_run_among_the_arguments_is_one_line(tmp_path):
    with pytest.raises(SystemExit, match="no timed `bench run` folder"):
        phases.main([str(tmp_path), "--out", str(tmp_path / "p.json")])
