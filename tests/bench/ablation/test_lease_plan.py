"""bench/ablation/lease_plan.py over boards made here (status.py's rows): the chunk to train
and the bench runs to continue, in PROTOCOL.md's session-30 (6) order."""

from __future__ import annotations

import json
import os
import subprocess

from tests.script_helpers import load_script
from tests.trajectory_helpers import summary_line

KEYS = ("ablation/train-unseen", "ablation/heldout", "ablation-t4/train-unseen")


def _rows(steps: dict[str, int], ckpt: dict[str, int] | None = None, bench=None) -> list[dict]:
    """A board: every planned run with `steps` (0 when absent), its checkpoint (`ckpt`, else
    its steps), bench progress from `bench` ({run: {key: prog}}, else "-")."""
    ckpt, bench = ckpt or {}, bench or {}
    rows = []
    for seed in (0, 1, 2):
        for arm in ("unified", "outcome_only"):
            run = f"abl_{arm}_s{seed}"
            n = steps.get(run, 0)
            row = {"run": run, "arm": arm, "seed": seed, "steps": n}
            row["checkpoint"] = ckpt.get(run, n or None)
            row["bench"] = {k: bench.get(run, {}).get(k, "-") for k in KEYS}
            rows.append(row)
    start = {"run": "sft_pairs_s0", "arm": "start", "seed": 0, "steps": None, "checkpoint": None}
    done = {"ablation/train-unseen": "60/60", "ablation/heldout": "60/60"}
    start["bench"] = {k: bench.get("sft_pairs_s0", done).get(k, "0/60") for k in KEYS}
    return [*rows, start]


def _plan(tmp_path, rows):
    mod = load_script("bench/ablation/lease_plan.py")
    return mod, mod.plan(rows, tmp_path)


def test_the_unfinished_run_trains_before_a_new_one(tmp_path):
    run = tmp_path / "bench/results/ablation/abl_outcome_only_s0"
    run.mkdir(parents=True)
    for k in (1, 2):
        (run / f"grpo_report_lease{k}.json").write_text("{}")
    rows = _rows({"abl_unified_s0": 60, "abl_outcome_only_s0": 30})
    mod, p = _plan(tmp_path, rows)
    t = p["train"]
    assert t["run"] == "abl_outcome_only_s0" and (t["from_step"], t["to_step"]) == (30, 45)
    assert (
        t["here"] == "bash bench/ablation/restore_weights.sh abl_outcome_only_s0_ckpt30 grpo_ckpt"
    )
    carry, cmd = t["calls"][0]
    assert carry == [".models/grpo_ckpt"] and "PRESET=outcome_only SEED=0" in cmd
    assert "RUN=abl_outcome_only_s0 bash bench/train_h200.sh restore &&" in cmd
    assert "--lease 3 " in t["after"] and t["warning"] is None
    text = mod.show(p)
    assert text.index("train abl_outcome_only_s0 steps 31-45") < text.index("bench abl_unified_s0")
    # each of the lease's two bench runs, not the training chunk
    assert text.count("(only on an H100") == 2
    assert text.index("(only on an H100") > text.index("-- train abl_outcome_only_s0")
    # what to do when the chunk's process dies (session 39: a NaN update at step 41)
    died = "If a bgwatch says 'abl_outcome_only_s0 DIED without a report' (no grpo_report.json)"
    assert died in text and text.index(died) < text.index("bench abl_unified_s0")
    assert "cp -r <that watch's folder>/ckpt .models/grpo_ckpt" in t["recover"]


def test_a_new_run_starts_from_the_sft_start_in_seed_then_arm_order(tmp_path):
    rows = _rows({"abl_unified_s0": 60, "abl_outcome_only_s0": 60})
    _, p = _plan(tmp_path, rows)
    t = p["train"]
    assert t["run"] == "abl_unified_s1" and (t["from_step"], t["to_step"]) == (0, 15)
    assert t["here"] == "bash bench/ablation/restore_weights.sh sft_pairs_s0 sft_final"
    carry, cmd = t["calls"][0]
    assert carry == [".models/sft_final"] and cmd.startswith("bash bench/train_h200.sh restoresft")
    assert "PRESET=unified SEED=1" in cmd and "--lease 1 " in t["after"]


def test_both_arms_of_seed_1_stop_at_step_40_as_arm_a_did(tmp_path):
    """PROTOCOL.md session-39 (5): the task order follows the resume points, so arm B seed 1
    trains 31-40 and then 41-45, as arm A seed 1 had to; other seeds keep 15-step chunks."""
    done = {"abl_unified_s0": 60, "abl_outcome_only_s0": 60, "abl_unified_s1": 60}
    for kept, span, env in (
        (30, (30, 40), "POOLFITS=1 STEPS=40 RANKER="),
        (40, (40, 45), "CHUNK=15 TOTAL=60"),
        (45, (45, 60), "CHUNK=15 TOTAL=60"),
    ):
        _, p = _plan(tmp_path, _rows(done | {"abl_outcome_only_s1": kept}))
        t = p["train"]
        assert t["run"] == "abl_outcome_only_s1" and (t["from_step"], t["to_step"]) == span
        assert env in t["calls"][0][1] and ("CHUNK=" in t["calls"][0][1]) is (kept != 30)
    _, p = _plan(tmp_path, _rows(done | {"abl_outcome_only_s1": 60, "abl_unified_s2": 30}))
    assert (p["train"]["from_step"], p["train"]["to_step"]) == (30, 45)  # seed 2: no stop


def test_steps_beyond_the_kept_checkpoint_are_warned_about(tmp_path):
    rows = _rows({"abl_unified_s0": 60, "abl_outcome_only_s0": 37}, {"abl_outcome_only_s0": 30})
    mod, p = _plan(tmp_path, rows)
    assert p["train"]["from_step"] == 30 and p["train"]["to_step"] == 45
    assert "reached step 37 but the newest checkpoint in history is 30" in p["train"]["warning"]
    assert "WARNING: abl_outcome_only_s0: steps.jsonl reached step 37" in mod.show(p)


def test_benches_go_primary_subset_then_test_families_then_four_turn_runs(tmp_path):
    bench = {
        "abl_unified_s0": {"ablation/train-unseen": "60/60", "ablation/heldout": "12/60"},
        "abl_outcome_only_s0": {"ablation/train-unseen": "16/60"},
        "sft_pairs_s0": {"ablation/train-unseen": "60/60", "ablation/heldout": "60/60"},
    }
    steps = {"abl_unified_s0": 60, "abl_outcome_only_s0": 60, "abl_unified_s1": 60}
    _, p = _plan(tmp_path, _rows(steps, bench=bench))
    got = [(b["run"], b["key"]) for b in p["benches"]]
    assert got == [
        ("abl_outcome_only_s0", "ablation/train-unseen"),
        ("abl_unified_s1", "ablation/train-unseen"),
        ("abl_unified_s0", "ablation/heldout"),
        ("abl_outcome_only_s0", "ablation/heldout"),
        ("abl_unified_s1", "ablation/heldout"),
        ("sft_pairs_s0", "ablation-t4/train-unseen"),
        ("abl_unified_s0", "ablation-t4/train-unseen"),
        ("abl_outcome_only_s0", "ablation-t4/train-unseen"),
        ("abl_unified_s1", "ablation-t4/train-unseen"),
    ]
    first = p["benches"][0]
    carry, cmd = first["calls"][0]
    assert carry == [".models/ckpt_outcome_only_s0"]
    assert "GRPO_ADAPTER=/root/work/abl_outcome_only_s0/checkpoint-60" in cmd
    assert cmd.endswith("bench_suite.sh ablation train-unseen/grpo") and "TURNS=4" not in cmd
    sft = p["benches"][5]
    carry, cmd = sft["calls"][0]
    assert carry == [".models/sft_final"] and "TURNS=4 TURNS_FROM=1 SFT_ADAPTER=" in cmd
    assert cmd.endswith("bench_suite.sh ablation train-unseen/sft")
    assert "--into bench/results/ablation/bench/sft_pairs_s0" in sft["after"]


def test_nothing_left_and_a_missing_repository(tmp_path, capsys):
    done = {k: "60/60" for k in KEYS}
    runs = [f"abl_{a}_s{s}" for s in (0, 1, 2) for a in ("unified", "outcome_only")]
    rows = _rows(dict.fromkeys(runs, 60), bench={r: done for r in [*runs, "sft_pairs_s0"]})
    mod, p = _plan(tmp_path, rows)
    assert (p["train"], p["benches"], p["oversize"]) == (None, [], [])
    assert mod.show(p).startswith("Nothing left")
    assert mod.main(["--root", str(tmp_path / "nowhere")]) == 2
    assert "no such folder" in capsys.readouterr().err
    assert mod.main(["--json"]) == 0  # this repository's own board
    assert set(json.loads(capsys.readouterr().out)) == {
        "train",
        "probe",
        "benches",
        "machine",
        "tree_mib",
        "oversize",
        "no_training",
        "h200",
    }


def _repo(tmp_path, tree_mib: float, parts: int = 3, part_mib: float = 30, whl_mib: float = 9):
    """A git checkout whose tree is `tree_mib` (one sparse untracked file: what a device call
    carries), with `parts` GGUF parts and .whl of the given sizes, ignored as here."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".gitignore").write_text("/.models/\n/.whl/\n")
    for name, mib in [("big.bin", tree_mib), (".whl/w.whl", whl_mib)] + [
        (f".models/smollm2.gguf.xz.part{k:02d}", part_mib) for k in range(parts)
    ]:
        f = tmp_path / name
        f.parent.mkdir(parents=True, exist_ok=True)
        f.touch()
        os.truncate(f, int(mib * (1 << 20)))
    return tmp_path


def test_each_gguf_part_found_here_gets_a_call_and_the_wheels_ride_with_the_first(tmp_path):
    mod = load_script("bench/ablation/lease_plan.py")
    root = _repo(tmp_path, tree_mib=20)
    tree = mod.tree_bytes(root)
    assert 20 * (1 << 20) <= tree < 20 * (1 << 20) + 4096  # big.bin + .gitignore, not .models
    calls = mod.machine_calls(root, tree)
    assert [c for c, _ in calls] == [
        [".whl", ".models/smollm2.gguf.xz.part00"],
        [".models/smollm2.gguf.xz.part01"],
        [".models/smollm2.gguf.xz.part02"],
    ]
    assert [cmd.split("train_h200.sh ")[1] for _, cmd in calls] == ["probe", "part", "model"]
    # a tree with no room for the wheels beside part00: they go first, in a call of their own
    calls = mod.machine_calls(root, tree + 20 * (1 << 20))
    assert [c for c, _ in calls][:2] == [[".whl"], [".models/smollm2.gguf.xz.part00"]]
    assert calls[0][1] == "source scripts/device_env.sh" and len(calls) == 4


def test_a_call_carrying_more_than_the_device_takes_is_warned_about(tmp_path):
    rows = _rows({"abl_unified_s0": 60, "abl_outcome_only_s0": 30})
    root = _repo(tmp_path, tree_mib=25, parts=2, part_mib=45)  # session 37's refusal
    ckpt = root / ".models/grpo_ckpt/adapter_model.safetensors"
    ckpt.parent.mkdir(parents=True)
    ckpt.touch()
    os.truncate(ckpt, 37 * (1 << 20))
    mod, p = _plan(root, rows)
    assert p["tree_mib"] == 25.0
    assert len(p["oversize"]) == 2  # part00 and part01 with the tree; the checkpoint fits
    assert p["oversize"][0].startswith("carry .models/smollm2.gguf.xz.part00 (PROBE_TESTS=0")
    assert "70.0 MiB with the tree (25.0 MiB), over 63 MiB" in p["oversize"][0]
    assert "WARNING: carry .models/smollm2.gguf.xz.part01" in mod.show(p)
    os.truncate(ckpt, 39 * (1 << 20))
    _, p = _plan(root, rows)
    assert len(p["oversize"]) == 3 and p["oversize"][2].startswith("carry .models/grpo_ckpt")


def test_without_parts_or_git_the_plan_names_two_parts_and_checks_nothing(tmp_path):
    rows = _rows({"abl_unified_s0": 60, "abl_outcome_only_s0": 30})
    mod, p = _plan(tmp_path, rows)
    assert p["tree_mib"] is None and p["oversize"] == []
    assert [c for c, _ in p["machine"]] == [
        [".whl"],
        [".models/smollm2.gguf.xz.part00"],
        [".models/smollm2.gguf.xz.part01"],
    ]


def test_a_lease_too_short_for_the_slowest_chunk_plans_bench_runs_only(tmp_path, capsys):
    run = tmp_path / "bench/results/ablation/abl_unified_s1"
    run.mkdir(parents=True)
    for k, secs in [(1, 875.3), (2, 1003.1)]:
        (run / f"grpo_report_lease{k}.json").write_text(json.dumps({"seconds": secs}))
    bench = {"abl_unified_s0": {"ablation/train-unseen": "60/60"}}
    rows = _rows(
        {"abl_unified_s0": 60, "abl_outcome_only_s0": 60, "abl_unified_s1": 30}, bench=bench
    )
    mod = load_script("bench/ablation/lease_plan.py")
    need = mod.SETUP_S + 1003.1 + mod.CHUNK_MARGIN_S
    p = mod.plan(rows, tmp_path, left=need)
    assert p["train"]["run"] == "abl_unified_s1" and p["no_training"] == ""
    p = mod.plan(rows, tmp_path, left=need - 1)
    assert p["train"] is None and p["benches"][0]["run"] == "abl_outcome_only_s0"
    assert p["no_training"].startswith(f"{need - 1:.0f} s left is under a chunk's {need:.0f} s")
    text = mod.show(p)
    assert text.startswith("Training: ") and "-- train" not in text
    assert mod.plan(rows, tmp_path)["train"] is not None  # no --left: the chunk as before
    assert mod.main(["--root", str(tmp_path), "--left", "-1"]) == 2
    assert "give the device seconds left" in capsys.readouterr().err


def test_a_lease_that_cannot_train_names_the_h200_reference_runs_left(tmp_path):
    """No H100 bench run may go to an H200 (bench compare refuses another card): a lease that
    cannot train gets #42's scripted reference runs for that card, only those not finished."""
    rows = _rows(
        {"abl_unified_s0": 60}, bench={"abl_unified_s0": {"ablation/train-unseen": "60/60"}}
    )
    mod = load_script("bench/ablation/lease_plan.py")
    p = mod.plan(rows, tmp_path)  # a chunk to train: the lease trains, on either card
    assert p["train"] is not None and p["h200"] is None
    rows = _rows({r: 60 for r in ("abl_unified_s0", "abl_outcome_only_s0")})
    rows = [r | {"steps": 60} for r in rows[:-1]] + rows[-1:]  # every run trained
    runs = tmp_path / mod.REFERENCE_ROOT / "ablation"
    done = runs / "heldout/naive"
    done.mkdir(parents=True)
    (done / "run.json").write_text(json.dumps({"tasks": ["a"]}))
    (done / "trajectories.jsonl").write_text(summary_line("a"))
    p = mod.plan(rows, tmp_path)
    assert p["train"] is None
    ref = p["h200"]
    assert "heldout/naive" not in ref["calls"][0][1]  # finished: not run again
    assert ref["calls"][0][1].endswith(
        "bench_suite.sh ablation heldout/best train-unseen/naive train-unseen/best"
    )
    assert ref["calls"][0][0] == [".whl"] and "ROOT=bench/results/bench/h200" in ref["calls"][0][1]
    text = mod.show(p)
    assert "If the machine is an H200" in text and "--into bench/results/bench/h200" in text
    for st in mod.REFERENCE_STEPS:
        d = runs / st
        d.mkdir(parents=True, exist_ok=True)
        (d / "run.json").write_text(json.dumps({"tasks": ["a"]}))
        (d / "trajectories.jsonl").write_text(summary_line("a"))
    assert mod.plan(rows, tmp_path)["h200"] is None


def test_a_lease_runs_a_second_bench_job_when_the_first_ends_with_a_chunk_to_spare(tmp_path):
    """The next bench job left comes with its calls and the device seconds it needs when the
    first ends: a whole chunk at the slowest committed rate of its mode/subset (over every
    committed run of it, complete chunks only), the DEADLINE margin and the job's start; the
    rest are only listed. Without a committed chunk of its mode/subset, no number is made up."""
    bench = {"abl_unified_s0": {"ablation/train-unseen": "60/60"}}
    rows = _rows({"abl_unified_s0": 60, "abl_outcome_only_s0": 60}, bench=bench)
    mod = load_script("bench/ablation/lease_plan.py")
    p = mod.plan(rows, tmp_path)
    first, second, *rest = p["benches"]
    assert (first["run"], first["key"]) == ("abl_outcome_only_s0", "ablation/train-unseen")
    assert (second["run"], second["key"]) == ("abl_unified_s0", "ablation/heldout")
    assert "needs_left_s" not in first and all("needs_left_s" not in b for b in rest)
    assert (
        second["needs_left_s"] is None
        and "no committed chunk of ablation/heldout" in (second["when"])
    )
    timing = [  # per task: 10 s and 12 s (complete), 40 s (cut: not counted)
        {"tasks": 16, "complete": True, "wall_s": 160.0, "generate_s": 60.0},
        {"tasks": 8, "complete": False, "wall_s": 320.0, "generate_s": 60.0},
    ]
    other = [{"tasks": 16, "complete": True, "wall_s": 192.0, "generate_s": 50.0}]
    for run, lines in [
        ("sft_pairs_s0/ablation/heldout/sft", timing),
        ("abl_unified_s0/ablation/train-unseen/grpo", [{**other[0], "wall_s": 999.0}]),
        ("abl_outcome_only_s0/ablation/heldout/grpo", other),
    ]:
        folder = tmp_path / "bench/results/ablation/bench" / run
        folder.mkdir(parents=True)
        (folder / "timing.jsonl").write_text("".join(json.dumps(t) + "\n" for t in lines))
    p = mod.plan(rows, tmp_path)
    second = p["benches"][1]
    need = 16 * 12.0 + mod.DEADLINE_MARGIN_S + mod.BENCH_START_S  # not train-unseen's 999 s
    assert second["needs_left_s"] == need
    text = mod.show(p)
    calls = [line for line in text.splitlines() if "device_bg.sh start" in line]
    assert len(calls) == 2 and "start unified_s0_tf --" in calls[1]
    # bench_suite's own 540 s default would end a job that spans several watch calls early
    assert all("BUDGET_S=<device s left - 100> " in c and "BG_BUDGET_S" in c for c in calls)
    assert f"only if {need:.0f} device s or more are left when the job above ends" in text
    assert text.count("merge_bench.py") == 2
    later = text[text.index("Bench runs after those") :]
    assert f"  {second['what']}" not in later and all(f"  {b['what']}" in later for b in rest)


def test_a_training_lease_runs_the_decode_warm_probe_once_before_its_bench_jobs(tmp_path):
    """The probe runs after the chunk, before the bench jobs (they take every second left),
    and only until its results are committed; a lease that cannot train has no time for it."""
    bench = {"abl_unified_s0": {"ablation/train-unseen": "0/60"}}
    rows = _rows({"abl_unified_s0": 60, "abl_outcome_only_s0": 45}, bench=bench)
    mod, p = _plan(tmp_path, rows)
    assert p["probe"] is not None
    (carry, cmd), *more = p["probe"]["calls"]
    assert not carry and not more and "--expandable" in cmd and "$OUT/warm_default.json" in cmd
    text = mod.show(p)
    train, warm = text.index("-- train abl_outcome_only_s0"), text.index("-- decode_warm")
    assert train < warm < text.index("-- bench abl_unified_s0")
    assert f"cp <its folder>/warm_*.json {mod.PROBE_DIR}/" in text
    run = tmp_path / "bench/results/ablation/abl_outcome_only_s0"
    run.mkdir(parents=True)
    (run / "grpo_report_lease1.json").write_text(json.dumps({"seconds": 1000.0}))
    assert mod.plan(rows, tmp_path, left=1500)["probe"] is not None
    assert mod.plan(rows, tmp_path, left=100)["probe"] is None  # no chunk fits: no probe
    done = tmp_path / mod.PROBE_DIR / "warm_default.json"
    done.parent.mkdir(parents=True)
    done.write_text("{}")
    p = mod.plan(rows, tmp_path)
    assert p["probe"] is None and "decode_warm" not in mod.show(p)
