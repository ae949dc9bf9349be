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


def test_the_bound_is_the_share_of_evaluation_and_the_workers_serial_seconds(tmp_path):
    """`bound`: eval_s / step_s, eval_s per candidate evaluated, and the GPU worker's serial
    seconds (every evaluator phase but compile, which runs in parallel, and wait), medians."""
    recs = [{"kind": "layout", "process": 0}]
    for k, (step_s, ev, cands, phases) in enumerate(
        [
            (90.0, 60.0, 10, {"compile": 50.0, "call": 40.0}),  # the first step: not counted
            (40.0, 30.0, 10, {"compile": 25.0, "call": 5.0, "compare": 15.0}),
            (20.0, 10.0, 5, {"compile": 8.0, "copy": 2.0, "trace": 3.0}),
            (30.0, 12.0, 4, {"compile": 9.0, "call": 6.0, "wait": 10.0}),
        ]
    ):
        ro = {"kind": "rollout", "step": k, "rows": 32, "groups": 4, "eval_s": ev}
        ro |= {"candidates": cands, "eval_phases_s": phases}
        recs += [ro, {"kind": "step", "step": k + 1, "step_s": step_s}]
    (tmp_path / "steps.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    b = gs.summarise([tmp_path])["bound"]
    assert b["eval_share"] == 0.5  # 0.75, 0.5, 0.4
    assert b["candidates_per_step"] == 5
    assert b["eval_s_per_candidate"] == 3.0  # 3, 2, 3
    assert b["worker_serial_s"] == 6.0  # 20, 5, 6: compile and wait left out
    assert b["worker_serial_s_per_candidate"] == 1.5  # 2, 1, 1.5


def test_a_phase_has_one_colour_on_every_bar():
    """The plot's legend names each phase's colour once: the after bar must use the same ones
    (it once went on cycling matplotlib's colours, so 'after' read as other phases)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    side = {"warm_step_s_median": 10.0, "phases_median_s": {k: 2.0 for k in gs.PHASES}}
    fig = gs.figure({"before": side, "after": side}, ["before", "after"], plt)
    bars = fig.axes[0].patches
    n = len(gs.PHASES)
    assert len(bars) == 2 * n
    for j in range(n):
        assert bars[j].get_facecolor() == bars[n + j].get_facecolor()
    assert len({b.get_facecolor() for b in bars[:n]}) == n
    plt.close(fig)


def test_the_evaluators_of_both_sides_are_named_and_compared(tmp_path, capsys):
    """Each side lists its runs' evaluator fingerprints (env.txt); `same_evaluator` is true
    only when both sides name the same one, and a difference is said on stderr."""
    before = _run(tmp_path / "b", [(10.0, 4.0, 5.0), (9.0, 4.0, 4.0)])
    after = _run(tmp_path / "a", [(10.0, 4.0, 5.0), (8.0, 3.0, 4.0)])
    (before / "env.txt").write_text("NVIDIA H200\nevaluator aaaaaaaaaaaa\n")
    (after / "env.txt").write_text("NVIDIA H200\nevaluator aaaaaaaaaaaa\n")
    out = tmp_path / "o.json"
    argv = ["--before", str(before), "--after", str(after), "--out", str(out)]
    assert gs.main(argv) == 0
    doc = json.loads(out.read_text())
    assert doc["before"]["evaluators"] == ["aaaaaaaaaaaa"] and doc["same_evaluator"] is True
    assert "evaluators differ" not in capsys.readouterr().err
    (after / "env.txt").write_text("evaluator bbbbbbbbbbbb\n")
    assert gs.main(argv) == 0
    doc = json.loads(out.read_text())
    assert doc["after"]["evaluators"] == ["bbbbbbbbbbbb"] and doc["same_evaluator"] is False
    assert "evaluators differ" in capsys.readouterr().err
    (before / "env.txt").unlink()
    (after / "env.txt").write_text("evaluator aaaaaaaaaaaa\n")
    assert gs.main(argv) == 0
    assert json.loads(out.read_text())["same_evaluator"] is False  # before's is unknown
