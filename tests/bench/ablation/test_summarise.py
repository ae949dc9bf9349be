"""bench/ablation/summarise.py over two small synthetic run folders (steps + completions)."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import pytest

from tests.script_helpers import load_script


def _script():
    return load_script("bench/ablation/summarise.py")


TASKS = [["a", "b"], ["c", "a"]]  # step 0 draws a, b; step 1 draws c and a again


def _run(folder: Path, ok: list[list[int]], scores: list[list[float]], gz: bool) -> Path:
    """Two steps of two groups; ok[step][group] correct turn-1 samples of 4 (turn 2 all wrong)."""
    folder.mkdir(parents=True)
    steps, samples = [{"kind": "layout", "processes": 1}], []
    for s, tasks in enumerate(TASKS):
        for g, task in enumerate(tasks):
            for i in range(4):
                good = i < ok[s][g]
                serial = " k<<<1, 1>>>(x);" if i == 3 else ""
                samples.append(
                    {
                        "step": s,
                        "task": task,
                        "turn": 1,
                        "score": scores[s][g] if good else 0.0,
                        "status": "ok" if good else "compile_error",
                        "text": f"{task}{s}{i}{serial}",
                    }
                )
                samples.append(
                    {
                        "step": s,
                        "task": task,
                        "turn": 2,
                        "score": 0.0,
                        "status": "wrong_output",
                        "text": f"{task}{s}{i}b",
                    }
                )
        share = sum(ok[s]) / 16
        steps += [
            {
                "kind": "rollout",
                "step": s,
                "processes": 1,
                "rows": 16,
                "groups": 2,
                "groups_2_correct": sum(k >= 2 for k in ok[s]) / 2,
                "status_share": {"ok": share, "compile_error": 0.5 - share, "wrong_output": 0.5},
                "outcome_mean": 0.3,
                "speed_mean": 0.1,
                "score_by_turn": [0.6, 0.1],
                "generate_s": 5.0,
                "eval_s": 3.0,
                "canary": [{"task": "k", "config": "small", "median_us": 10.0 + 2 * s}],
            },
            {"kind": "step", "step": s + 1, "step_s": 10.0},
        ]
    (folder / "steps.jsonl").write_text("".join(json.dumps(r) + "\n" for r in steps))
    text = "".join(json.dumps(r) + "\n" for r in samples)
    if gz:
        with gzip.open(folder / "completions.jsonl.gz", "wt") as fh:
            fh.write(text)
    else:
        (folder / "completions.jsonl").write_text(text)
    return folder


def test_two_arms_summarised_paired_and_the_detectable_effect(tmp_path, capsys):
    mod = _script()
    a = _run(tmp_path / "A", ok=[[4, 1], [2, 3]], scores=[[1.0, 1.0], [1.0, 1.0]], gz=False)
    b = _run(tmp_path / "B", ok=[[2, 2], [0, 4]], scores=[[1.0, 1.0], [1.0, 2.0]], gz=True)
    out = tmp_path / "s.json"
    rc = mod.main(
        [
            "--run",
            f"unified={a}",
            "--run",
            f"outcome_only={b}",
            "--out",
            str(out),
            "--plot",
            str(tmp_path / "s.png"),
        ]
    )
    assert rc == 0 and (tmp_path / "s.png").stat().st_size > 0
    res = json.loads(out.read_text())
    ra, rb = res["runs"]
    assert ra["groups_2_correct"] == {
        "first_step": 0.5,
        "last_step": 1.0,
        "pooled": 0.75,
        "groups": 4,
        "with_2_correct": 3,
    }
    assert ra["per_step"][0]["outcome_only_score"] == 0.4  # outcome + speed, not the arm's score
    assert ra["turn2_below_turn1_steps"] == 2
    # task a: step 0 (A: 4 of 8 samples correct, turn 2 wrong) -> step 1 (A: 3 of 8)
    assert ra["first_last_ok_by_task"] == {
        "tasks": 1,
        "first_mean": 0.5,
        "last_mean": 0.375,
        "diff_mean": -0.125,
        "diff_se": None,
        "rose": 0,
        "fell": 1,
    }
    # turn-1 sample 3 of each group launches one thread: A's groups had 4, 1, 2, 3 correct
    assert ra["serial_launch"] == {"samples": 4, "correct": 1}
    assert ra["correct_without_launch"] == 10 - 1  # A's 10 correct samples, one with <<<1, 1>>>
    assert ra["canaries"]["k:small"] == {"step1_us": 10.0, "max_rel_change": 0.2}
    pair = res["pairs"][0]
    assert pair["steps_with_the_same_tasks"] == 2
    assert pair["ok_diff_by_step"] == {
        "1": round((0.5 - 0.25 + 0.125 - 0.25) / 2, 4),
        "2": round((0.25 - 0.0 + 0.375 - 0.5) / 2, 4),
    }
    # B's turn-1 scores per (step, task): [1,1,0,0] twice (sum of squares 1 each), [0,0,0,0]
    # and [2,2,2,2] (0): pooled variance 2 / 12 degrees of freedom
    de = res["detectable_effect"]
    var_w = 2 / 12
    assert de["within_task_sd"] == round(math.sqrt(var_w), 4)
    floor = de["by_assumed_seed_sd"][0]
    se = math.sqrt(2 * var_w / (4 * 60) / 3)
    assert floor["se_of_mean_diff"] == round(se, 4)
    assert floor["mde_normal"] == round((1.959964 + 0.841621) * se, 4)
    assert floor["mde_t2"] == round((4.302653 + 1.060660) * se, 4)
    assert "outcome_only" in capsys.readouterr().out


def test_steps_reads_only_a_runs_first_steps(tmp_path, capsys):
    """A pilot read from the start of a main run: step 1's rows and its samples (logged at
    step 0), nothing of step 2."""
    a = _run(tmp_path / "A", ok=[[4, 1], [2, 3]], scores=[[1.0, 1.0], [1.0, 1.0]], gz=False)
    b = _run(tmp_path / "B", ok=[[2, 2], [0, 4]], scores=[[1.0, 1.0], [1.0, 2.0]], gz=True)
    out = tmp_path / "s.json"
    runs = ["--run", f"unified={a}", "--run", f"outcome_only={b}", "--out", str(out)]
    assert _script().main([*runs, "--steps", "1"]) == 0
    res = json.loads(out.read_text())
    ra = res["runs"][0]
    assert res["steps"] == 1 and ra["steps"] == 1
    assert ra["groups_2_correct"]["groups"] == 2 and ra["groups_2_correct"]["pooled"] == 0.5
    assert ra["correct_without_launch"] == 5 - 1  # step 0's 5 correct turn-1 samples only
    assert ra["first_last_ok_by_task"]["tasks"] == 0  # task a recurs only at step 2
    # B's step-0 groups [1,1,0,0] twice: pooled within-group variance 2 / 6
    assert res["detectable_effect"]["within_task_sd"] == round(math.sqrt(2 / 6), 4)
    assert _script().main([*runs, "--steps", "0"]) == 2
    assert "--steps 0" in capsys.readouterr().err


@pytest.mark.parametrize("spec", ["unified", "=x", "unified=/no/such/folder"])
def test_a_bad_run_argument_is_one_line(tmp_path, capsys, spec):
    rc = _script().main(["--run", spec, "--out", str(tmp_path / "s.json")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.startswith("summarise: --run") and "\n" not in err


def test_a_folder_without_completions_is_named(tmp_path, capsys):
    run = _run(tmp_path / "A", ok=[[4, 1], [2, 3]], scores=[[1.0] * 2] * 2, gz=False)
    (run / "completions.jsonl").unlink()
    rc = _script().main(["--run", f"unified={run}", "--out", str(tmp_path / "s.json")])
    assert rc == 2 and "no completions.jsonl" in capsys.readouterr().err


def test_several_seeds_pool_the_detectable_effect_per_run_and_plot_as_a_band(tmp_path):
    """Two outcome_only runs that drew the same (step, task) with opposite results: within each
    run every group is constant (variance 0); merging the runs' groups would make it 0.25."""
    mod = _script()
    b0 = _run(tmp_path / "b0", ok=[[4, 4], [4, 4]], scores=[[1.0, 1.0], [1.0, 1.0]], gz=True)
    b1 = _run(tmp_path / "b1", ok=[[0, 0], [0, 0]], scores=[[1.0, 1.0], [1.0, 1.0]], gz=True)
    a0 = _run(tmp_path / "a0", ok=[[4, 1], [2, 3]], scores=[[1.0, 1.0], [1.0, 1.0]], gz=False)
    a1 = _run(tmp_path / "a1", ok=[[2, 1], [2, 1]], scores=[[1.0, 1.0], [1.0, 1.0]], gz=False)
    out = tmp_path / "s.json"
    runs = [f"unified={a0}", f"unified={a1}", f"outcome_only={b0}", f"outcome_only={b1}"]
    argv = [x for r in runs for x in ("--run", r)]
    assert mod.main([*argv, "--out", str(out), "--plot", str(tmp_path / "s.png")]) == 0
    de = json.loads(out.read_text())["detectable_effect"]
    assert de["runs"] == 2 and de["groups"] == 8 and de["within_task_sd"] == 0.0
    assert (tmp_path / "s.png").stat().st_size > 0
    rows = [mod.run_summary("unified", a0)["per_step"], mod.run_summary("unified", a1)["per_step"]]
    steps, mean, half = mod._band(rows, "groups_2_correct")
    # a0: steps 1, 2 have 1 and 2 groups of 2 with >= 2 correct; a1: 1 and 1
    assert steps == [1, 2] and mean == [0.5, 0.75]
    assert half == [0.0, pytest.approx(1.96 * math.sqrt(0.125 / 2))]
