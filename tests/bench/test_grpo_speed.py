"""bench/grpo_speed.py: a GRPO step's time split into phases, before and after, from run logs."""

from __future__ import annotations

import json

import pytest

from tests.script_helpers import ROOT, load_script

gs = load_script("bench/grpo_speed.py")
PILOTS = [
    ROOT / "bench/results/ablation/pilot_2026-12-04",
    ROOT / "bench/results/ablation/pilot_outcome_only_2026-12-04",
]


def _run(folder, steps, rows=32, groups=4, phases=None):
    """A steps.jsonl: one process (layout record), then (step_s, generate_s, eval_s) steps."""
    folder.mkdir(parents=True, exist_ok=True)
    recs = [{"kind": "layout", "process": 0}]
    for k, (step_s, gen, ev) in enumerate(steps, 1):
        ro = {"kind": "rollout", "step": k - 1, "rows": rows, "groups": groups}
        ro |= {"generate_s": gen, "eval_s": ev, "analyse_s": 1.0, "completion_tokens": 1000}
        if phases:
            ro["eval_phases_s"] = phases[k - 1]
        recs += [ro, {"kind": "step", "step": k, "step_s": step_s}]
    (folder / "steps.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    return folder


def test_the_committed_pilots_give_the_issues_before_numbers():
    """Issue #44 quotes the pilots' warm steps at 76.5 s mean and a process's first step at
    188 s mean; the script reads the same from the committed logs (resumed processes found
    by their layout records)."""
    doc = gs.summarise(PILOTS)
    assert doc["warm_steps"] == 9 and doc["first_steps"] == 7
    assert doc["warm_step_s_mean"] == pytest.approx(76.52, abs=0.01)
    assert doc["first_step_s_mean"] == pytest.approx(188.1, abs=0.1)
    assert doc["shape"] == {"rows": 32, "groups": 4}
    ph = doc["phases_mean_s"]
    assert ph["eval_s"] > ph["generate_s"] > ph["canary_s"] > ph["analyse_s"] > 0
    assert doc["eval_phases_median_s"] == {}  # the pilots predate the evaluator's phases
    # each arm's first process prepared its 16-task pool (120.28 s, 108.86 s); the resumed
    # ones read it from the result cache, and still paid ~170 s for their first step
    assert doc["prepare_s_max"] == 120.28 and doc["prepare_s"] == 0.05
    assert doc["process_start_s"] == pytest.approx(170.57, abs=0.01)


def test_after_is_compared_with_before_phase_by_phase(tmp_path, capsys):
    after = _run(
        tmp_path / "after",
        [(60.0, 20.0, 30.0), (20.0, 8.0, 9.0), (22.0, 9.0, 10.0), (30.0, 10.0, 14.0)],
        phases=[{"call": 20.0}, {"call": 4.0, "time": 2.0}, {"call": 6.0}, {"call": 8.0}],
    )
    out, png = tmp_path / "speed.json", tmp_path / "speed.png"
    argv = ["--before", *map(str, PILOTS), "--after", str(after), "--out", str(out)]
    assert gs.main([*argv, "--plot", str(png)]) == 0
    doc = json.loads(out.read_text())
    a = doc["after"]
    assert a["warm_steps"] == 3 and a["first_step_s"] == 60.0  # the first step stands apart
    assert a["warm_step_s_median"] == 22.0 and a["samples_per_s"] == pytest.approx(32 / 22, 1e-3)
    assert a["phases_median_s"]["update_s"] == 2.0  # 22 - 9 - 10 - 1 (the rest of the step)
    assert a["generation_tokens_per_s"] == pytest.approx(1000 / 9, 1e-3)
    assert a["eval_phases_median_s"] == {"call": 6.0, "time": 2.0}
    for side in ("before", "after"):
        keys = ("warm_step_s_median", "first_step_s", "samples_per_s", "generation_tokens_per_s")
        assert all(doc[side][k] is not None for k in keys)
    assert png.stat().st_size > 10_000
    printed = capsys.readouterr().out
    assert "warm step s (median)" in printed and "22.00" in printed


@pytest.mark.parametrize("case", ["shape", "missing", "not_json", "no_step"])
def test_bad_input_is_one_line(tmp_path, capsys, case):
    before = _run(tmp_path / "b", [(10.0, 4.0, 5.0), (9.0, 4.0, 4.0)])
    after = tmp_path / "a"
    if case == "shape":
        _run(after, [(10.0, 4.0, 5.0), (9.0, 4.0, 4.0)], rows=64)
    elif case == "not_json":
        after.mkdir()
        (after / "steps.jsonl").write_text("{not json\n")
    elif case == "no_step":
        after.mkdir()
        (after / "steps.jsonl").write_text(json.dumps({"kind": "layout"}) + "\n")
    out = tmp_path / "o.json"
    assert gs.main(["--before", str(before), "--after", str(after), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    assert not out.exists()


def test_a_process_start_is_its_pool_preparation_and_its_first_step(tmp_path):
    """`prepare` records pair with the first step of their own process (the one after the same
    `layout` record); a process without one prepared nothing (0 s)."""
    recs = [
        {"kind": "layout", "process": 0},
        {"kind": "prepare", "seconds": 100.0},
        {"kind": "rollout", "step": 0, "rows": 32, "groups": 4, "generate_s": 5.0},
        {"kind": "step", "step": 1, "step_s": 40.0},
        {"kind": "rollout", "step": 1, "rows": 32, "groups": 4, "generate_s": 5.0},
        {"kind": "step", "step": 2, "step_s": 20.0},
        {"kind": "layout", "process": 0},  # resumed, no prepare record
        {"kind": "rollout", "step": 2, "rows": 32, "groups": 4, "generate_s": 5.0},
        {"kind": "step", "step": 3, "step_s": 30.0},
        {"kind": "layout", "process": 0},
        {"kind": "prepare", "seconds": 4.0},
        {"kind": "rollout", "step": 3, "rows": 32, "groups": 4, "generate_s": 5.0},
        {"kind": "step", "step": 4, "step_s": 50.0},
    ]
    (tmp_path / "steps.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    assert gs.first_steps(tmp_path / "steps.jsonl") == {1: 100.0, 3: 0.0, 4: 4.0}
    doc = gs.summarise([tmp_path])
    assert doc["first_steps"] == 3 and doc["warm_steps"] == 1
    assert doc["prepare_s"] == 4.0 and doc["prepare_s_max"] == 100.0
    assert doc["process_start_s"] == 54.0  # median of 140, 30 and 54
