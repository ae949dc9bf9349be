"""bench/two_gpu_report.py over synthetic outputs of bench/two_gpu.sh (two $OUT folders)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.script_helpers import load_script


def _script():
    return load_script("bench/two_gpu_report.py")


def _run(folder: Path, name: str, canary: list[float], procs: int = 1) -> None:
    d = folder / name
    d.mkdir(parents=True)
    lines = [{"kind": "layout", "processes": procs, "eval_gpus": [1] if name == "split" else [0]}]
    for s, us in enumerate(canary):
        tasks = [[f"t{s}a"], [f"t{s}b"]] if procs == 2 else [[f"t{s}a", f"t{s}b"]]
        lines += [
            {
                "kind": "rollout",
                "step": s,
                "rows": 16,
                "processes": procs,
                "generate_s": 2.0,
                "eval_s": 1.0,
                "canary_s": 0.5,
                "return_mean": 0.1 * s,
                "tasks_by_process": tasks,
                "canary": [{"task": "k", "config": "small", "median_us": us}],
            },
            {
                "kind": "step",
                "step": s + 1,
                "step_s": 5.0 if procs == 1 else 6.0,
                "optimizer_s": 0.2,
            },
        ]
    (d / "steps.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


def _command(folder: Path, name: str, started: int, seconds: int) -> None:
    c = {
        "stage": name,
        "name": name,
        "rc": 0,
        "seconds": seconds,
        "started": started,
        "command": f"python3 -m cudaperf {name}",
    }
    with (folder / "commands.jsonl").open("a") as f:
        f.write(json.dumps(c) + "\n")


def test_the_record_compares_layouts_processes_and_throughput(tmp_path):
    pytest.importorskip("matplotlib")
    a, b = tmp_path / "call1", tmp_path / "call2"
    _run(a, "split", [10.0, 10.2, 10.1, 9.9])
    _run(a, "shared", [10.1, 10.0, 10.2, 10.1])
    _run(b, "ddp2", [12.0, 12.5, 12.2, 12.1], procs=2)
    (b / "env.json").write_text(json.dumps({"gpus": [{"name": "NVIDIA H200"}] * 2}))
    for g, rate in (("0", 500.0), ("01", 900.0)):
        (b / f"measure_gpus{g}").mkdir()
        (b / f"measure_gpus{g}" / "summary.json").write_text(json.dumps({"impls_per_min": rate}))
    _command(a, "split", 100, 300)
    _command(b, "bench_gpusall", 200, 120)
    out = tmp_path / "rec.json"
    assert (
        _script().main([str(a), str(b), "--out", str(out), "--plot", str(tmp_path / "p.png")]) == 0
    )
    rec = json.loads(out.read_text())
    assert [c["name"] for c in rec["commands"]] == ["split", "bench_gpusall"]  # both calls'
    diff = rec["layout"]["canary_difference"]["k/small"]
    assert diff["split_us"] == pytest.approx(10.05) and not diff["differs_beyond_noise"]
    ddp = rec["ddp"]
    assert ddp["groups_whole_and_apart"] and ddp["same_fields_as_one_process"]
    assert (
        ddp["ddp2_rows_per_s"] == pytest.approx(16 / 6, abs=1e-3)
        and ddp["one_process_step_s_mean"] == 5
    )
    assert rec["throughput"]["measure_2gpu_vs_1gpu"] == pytest.approx(1.8)
    assert rec["throughput"]["bench_gpusall"]["seconds"] == 120
    assert rec["not_run"] == ["bench run on GPU 0 alone"]
    assert (tmp_path / "p.png").stat().st_size > 1000


def test_a_group_split_across_processes_and_a_slower_layout_are_reported(tmp_path):
    _run(tmp_path, "split", [10.0, 10.1, 10.0, 10.1])
    _run(tmp_path, "shared", [13.0, 13.1, 13.0, 13.2])
    _run(tmp_path, "ddp2", [1.0, 1.0], procs=2)
    steps = tmp_path / "ddp2" / "steps.jsonl"
    steps.write_text(steps.read_text().replace('"t0b"', '"t0a"'))  # one task in both processes
    out = tmp_path / "rec.json"
    _script().main([str(tmp_path), "--out", str(out)])
    rec = json.loads(out.read_text())
    assert rec["layout"]["canary_difference"]["k/small"]["differs_beyond_noise"]
    assert rec["ddp"]["groups_whole_and_apart"] is False
