"""bench/scoring_phases.py on hand-made run folders: phases summed per kind, timeouts apart,
the rest left only where timing.jsonl covers every task."""

from __future__ import annotations

import json

import pytest

from tests.script_helpers import load_script

phases = load_script("bench/scoring_phases.py")


def _sample(status, wall=1.0, **ph):
    if status is None:
        return {"index": 0, "code": None, "result": None}
    return {"index": 0, "code": "k", "result": {"status": status, "wall_s": wall, "phases": ph}}


def _run(tmp_path, chunks):
    run = tmp_path / "run"
    run.mkdir()
    recs = [
        {
            "type": "turn",
            "task_id": "a",
            "turn": 1,
            "samples": [
                _sample("ok", compile=2.0, draw=1.0, call=0.5, baseline=3.0),
                _sample(None),
            ],
        },
        {
            "type": "turn",
            "task_id": "b",
            "turn": 1,
            "samples": [
                _sample("timeout", wall=120.0, compile=1.0),
                _sample("compile_error", compile=1.0),
            ],
        },
        {"type": "summary", "task_id": "a"},
    ]
    (run / "trajectories.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    (run / "timing.jsonl").write_text("".join(json.dumps(c) + "\n" for c in chunks))
    return run


def test_phases_timeouts_and_the_rest(tmp_path):
    run = _run(tmp_path, [{"tasks": 2, "complete": True, "score_s": 200.0, "generate_s": 9.0}])
    r = phases.phases_of(run)
    assert r["candidates"] == 3 and r["statuses"] == {
        "ok": 1,
        "format_error": 1,
        "timeout": 1,
        "compile_error": 1,
    }
    assert r["compile_s_sum"] == 4.0 and r["compile_s_per_candidate"] == pytest.approx(
        1.333, abs=1e-3
    )
    assert r["worker_s_sum"] == 4.5 and r["worker_phases"] == {
        "baseline": 3.0,
        "call": 0.5,
        "draw": 1.0,
    }
    assert r["timeouts"] == 1 and r["timeout_s"] == 120.0
    assert r["outside_phases_s"] == pytest.approx(200.0 - 4.5 - 120.0)
    assert r["scorer_clocks"] is None  # a run timed before the scorer's clocks


def test_the_scorer_clocks_are_summed_where_every_chunk_has_them(tmp_path):
    clocks = {"evaluate_s": 150.0, "analyse_s": 20.0, "rank_s": 1.0}
    chunk = {"tasks": 1, "complete": True, "score_s": 100.0}
    run = _run(tmp_path, [chunk | clocks, chunk | clocks])
    assert phases.phases_of(run)["scorer_clocks"] == {
        "evaluate_s": 300.0,
        "analyse_s": 40.0,
        "rank_s": 2.0,
    }


def test_no_rest_where_timing_misses_tasks(tmp_path, capsys):
    run = _run(tmp_path, [{"tasks": 1, "complete": True, "score_s": 5.0}])
    assert phases.phases_of(run)["outside_phases_s"] is None
    out = tmp_path / "p.json"
    assert phases.main([str(run), "--out", str(out)]) == 0
    assert json.loads(out.read_text())["runs"][0]["timed_tasks"] == 1
    assert "timing.jsonl has 1 of 2 tasks" in capsys.readouterr().out


def test_no_run_among_the_arguments_is_one_line(tmp_path):
    with pytest.raises(SystemExit, match="no `bench run` folder"):
        phases.main([str(tmp_path), "--out", str(tmp_path / "p.json")])
