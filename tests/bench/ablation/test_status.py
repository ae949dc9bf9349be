"""bench/ablation/status.py over a small repository made here: steps from steps.jsonl,
checkpoints from git history (also once removed from the tree), bench progress from run
folders."""

from __future__ import annotations

import gzip
import json
import subprocess

from tests.script_helpers import load_script
from tests.trajectory_helpers import summary_line as _summary
from tests.trajectory_helpers import turn_line as _turn


def _git(root, *args):
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


def _repo(tmp_path):
    root = tmp_path / "repo"
    res = root / "bench/results/ablation"
    run = res / "abl_unified_s0"
    run.mkdir(parents=True)
    rows = [{"kind": "step", "step": s} for s in (1, 2, 2, 3)] + [{"kind": "rollout", "step": 9}]
    report = {"seconds": 30.0, "options": {"max_steps": 3}, "resumed_from": None}
    (run / "grpo_report_lease1.json").write_text(json.dumps(report))
    resumed = {**report, "options": {"max_steps": 6}, "resumed_from": "/w/r/checkpoint-3"}
    (run / "grpo_report_lease2.json").write_text(json.dumps(resumed))  # steps 4-6 in 30 s
    (run / "steps.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"kind": "st')
    _git(root, "init", "-q")
    _git(root, "config", "user.email", "t@t")
    _git(root, "config", "user.name", "t")
    for step in (15, 30):
        w = res / f"weights/abl_unified_s0_ckpt{step}"
        w.mkdir(parents=True)
        (w / "SHA256SUMS").write_text("x\n")
        _git(root, "add", "-A")
        _git(root, "commit", "-qm", f"ckpt {step}")
        _git(root, "rm", "-rq", str(w.relative_to(root)))
        _git(root, "commit", "-qm", "removed")
    bench = res / "bench/abl_unified_s0/ablation/train-unseen/grpo"
    bench.mkdir(parents=True)
    (bench / "run.json").write_text(json.dumps({"tasks": {"a": {}, "b": {}, "c": {}}}))
    (bench / "trajectories.jsonl").write_text(
        _turn("a") + _summary("a") + _turn("b") + _summary("b")
    )
    chunks = [
        {"tasks": 2, "complete": True, "wall_s": 20.0},
        {"tasks": 1, "complete": False, "wall_s": 99.0},
    ]
    packed = res / "bench/sft_pairs_s0/ablation/heldout/sft"  # a finished run, packed
    packed.mkdir(parents=True)
    (packed / "run.json").write_text(json.dumps({"tasks": {"a": {}}}))
    (packed / "trajectories.jsonl.gz").write_bytes(gzip.compress(_summary("a").encode()))
    (bench / "timing.jsonl").write_text("".join(json.dumps(c) + "\n" for c in chunks))
    return root


def test_the_board_reads_steps_checkpoints_and_bench_progress(tmp_path, capsys):
    root = _repo(tmp_path)
    script = load_script("bench/ablation/status.py")
    out = tmp_path / "status.json"
    assert (
        script.main(["--root", str(root), "--out", str(out), "--plot", str(tmp_path / "s.png")])
        == 0
    )
    rows = {r["run"]: r for r in json.loads(out.read_text())["runs"]}
    a = rows["abl_unified_s0"]
    assert a["steps"] == 3 and a["checkpoint"] == 30  # distinct steps; newest kept in history
    assert a["bench"] == {
        "ablation/train-unseen": "2/3",
        "ablation/heldout": "-",
        "ablation-t4/train-unseen": "-",
    }
    assert (
        rows["abl_outcome_only_s2"]["steps"] == 0
        and rows["abl_outcome_only_s2"]["checkpoint"] is None
    )
    assert rows["sft_pairs_s0"]["steps"] is None
    assert rows["sft_pairs_s0"]["bench"]["ablation/heldout"] == "1/1"  # read from the .gz
    assert "abl_unified_s0       3/60   30" in capsys.readouterr().out
    est = json.loads(out.read_text())["estimate"]
    assert est["seconds_per_step"] == 10.0  # 30 s for steps 1-3, 30 s for steps 4-6
    assert est["training_steps_left"] == 57 + 5 * 60 and est["training_s"] == 3570.0
    assert est["bench_seconds_per_task"] == {"ablation/train-unseen": 10.0}  # complete chunks
    assert est["bench_s"] == 1 * 10.0 + 6 * 60 * 10.0  # one task left there, 60 in six more
    assert len(est["bench_without_a_cost"]) == 2 * 7 - 1  # heldout of sft_pairs_s0 is done
    assert "abl_unified_s1 ablation/heldout" in est["bench_without_a_cost"]
    assert (tmp_path / "s.png").stat().st_size > 0
    assert script.main(["--root", str(tmp_path / "nowhere")]) == 2
    assert "no such folder" in capsys.readouterr().err


def test_four_turn_runs_are_priced_by_the_task_turns_left(tmp_path):
    """A 4-turn run's tasks begin from their 1-turn run (PROTOCOL.md, session-31 note (5)):
    3 task-turns for a task with no record, 4 less its turns for an unfinished one, none for
    a finished one, at the seconds per scored task-turn of the chunks that count them."""
    root = _repo(tmp_path)
    t4 = root / "bench/results/ablation/bench/abl_unified_s0/ablation-t4/train-unseen/grpo"
    t4.mkdir(parents=True)
    (t4 / "run.json").write_text(json.dumps({"tasks": {"a": {}, "b": {}, "c": {}}}))
    recs = [_turn("a", 1), _turn("a", 2), *[_turn("b", t) for t in (1, 2, 3)]]
    recs.append(_summary("b", 3))  # stopped early (no valid reward)
    (t4 / "trajectories.jsonl").write_text("".join(recs))
    chunks = [
        {"tasks": 2, "turns": 4, "complete": False, "wall_s": 40.0},
        {"tasks": 2, "complete": False, "wall_s": 99.0},  # written before turns were counted
    ]
    (t4 / "timing.jsonl").write_text("".join(json.dumps(c) + "\n" for c in chunks))
    script = load_script("bench/ablation/status.py")
    assert script.turns_left(t4) == 2 + 0 + 3
    out = tmp_path / "status.json"
    assert script.main(["--root", str(root), "--out", str(out)]) == 0
    est = json.loads(out.read_text())["estimate"]
    assert est["bench_seconds_per_task_turn_4_turn_runs"] == 10.0
    four = 5 * 10.0 + 6 * 60 * 3 * 10.0  # this run, then 5 more planned runs and the start's
    assert est["bench_s"] == 1 * 10.0 + 6 * 60 * 10.0 + four
    assert not [k for k in est["bench_without_a_cost"] if "ablation-t4" in k]


def test_files_bench_did_not_write_are_named_not_counted(tmp_path, capsys):
    # Read as `cudaperf bench report` reads them: a trajectory whose records are not bench's
    # shows "?" (it used to count any line holding '"type":"summary"'), and a timing file
    # with a bad line before its last stops the estimate with one line naming it.
    root = _repo(tmp_path)
    bench = root / "bench/results/ablation/bench/abl_unified_s0/ablation/train-unseen/grpo"
    (bench / "trajectories.jsonl").write_text('{"type":"summary"}\n' + _summary("a"))
    script = load_script("bench/ablation/status.py")
    assert script.bench_progress(bench) == "?"
    (bench / "trajectories.jsonl").write_text(_summary("a"))
    assert script.bench_progress(bench) == "1/3"
    (bench / "timing.jsonl").write_text('{"tasks": 2, "wall_s": 1}\nnot json\n{"tasks": 1}\n')
    assert script.main(["--root", str(root)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "timing.jsonl" in err[0] and err[0].startswith("status: ")


def test_a_bench_run_is_finished_only_when_every_selected_task_is():
    script = load_script("bench/ablation/status.py")
    assert script.finished_all("60/60") and not script.finished_all("16/60")
    assert not script.finished_all("-") and not script.finished_all("?")  # the plot read "?"
