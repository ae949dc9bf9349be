"""bench/refine_sample.py's table: built from a trajectory of the weakest-first replay with an
evaluator that reports the stored H200 speedups (no GPU, no compiler)."""

from __future__ import annotations

from cudaperf.refine import make_backend, read_trajectory, refine_many
from cudaperf.reward import RewardScorer
from cudaperf.tasks.io import load_sample
from tests.script_helpers import load_script

from .helpers import report
from .test_loop import measured_evaluator


def test_table_rows_rise_with_the_faster_kernels(tmp_path):
    bench = load_script("bench/refine_sample.py")
    tasks = [t for t in load_sample() if t.id.endswith(("matmul", "saxpy"))]
    sc = RewardScorer(
        tasks, evaluator=measured_evaluator([]), analyzer=lambda c: [report(0.5)], analyze="always"
    )
    out = tmp_path / "trajectories.jsonl"
    be = make_backend("scripted:weakest-first", tasks=tasks)
    refine_many(tasks, be, sc, turns=4, samples=2, out=out)
    meta = {
        "model": be.name,
        "turns": 4,
        "samples": 2,
        "mode": "full",
        "gpu": "test",
        "elapsed_s": 1.0,
    }
    table = bench.build_table(tasks, read_trajectory(out), meta)
    rows = {r["task"]: r for r in table["tasks"]}
    mm = rows["sample/c2cuda/matmul"]["turns"]
    assert [t["speedup"] > 1.0 for t in mm] == [False, True, True, True]
    assert mm[0]["baseline"] == "naive" and mm[0]["reply_head"] == "Implementation `naive`."
    best = [t["best_so_far"] for t in mm]
    assert best[0] < best[1] < best[2] == best[3]
    assert rows["sample/c2cuda/saxpy"]["summary"]["best_turn"] == 2
    means = [p["mean_best_so_far"] for p in table["per_turn"]]
    assert means[0] < means[1] < means[2] and [p["tasks"] for p in table["per_turn"]] == [2] * 4
    md = bench.markdown(table)
    assert "| c2cuda/matmul |" in md and "no improvement" in md and "mean best so far" in md
    bench.plot(table, tmp_path / "p.png")
    assert (tmp_path / "p.png").stat().st_size > 1000


def test_pick_takes_one_task_per_family_of_the_split(tmp_path):
    import json

    from cudaperf.tasks.io import save_tasks

    bench = load_script("bench/refine_sample.py")
    tasks = load_sample()
    save_tasks(tasks, tmp_path / "tasks.jsonl")
    fams = sorted({t.family for t in tasks})
    held = fams[:3]
    doc = {"families": {f: ("test" if f in held else "train") for f in fams}}
    (tmp_path / "splits.json").write_text(json.dumps(doc))
    args = bench.parse_args(
        [
            "--out-dir",
            str(tmp_path / "o"),
            "--tasks",
            str(tmp_path / "tasks.jsonl"),
            "--min-impls",
            "2",
        ]
    )
    got = bench.pick(args)
    assert [t.family for t in got] == held
    args = bench.parse_args(
        [
            "--out-dir",
            "o",
            "--tasks",
            str(tmp_path / "tasks.jsonl"),
            "--split",
            "train",
            "--limit",
            "2",
            "--min-impls",
            "3",
        ]
    )
    got = bench.pick(args)
    assert len(got) <= 2 and all(len(t.implementations) >= 3 for t in got)
    assert all(doc["families"][t.family] == "train" for t in got)
    assert bench.pick(bench.parse_args(["--out-dir", "o"])) == load_sample()
