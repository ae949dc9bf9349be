"""`cudaperf train grpo` under torchrun (2 CPU processes, gloo) against one process: whole
groups per process, one steps.jsonl row per step with a one-process run's fields, resume."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.proc_helpers import kill_group
from tests.train.helpers import read_steps, write_task_file

pytest.importorskip("trl")

ARGS = [
    "--pool",
    "2",
    "--turns",
    "1",
    "--num-generations",
    "2",
    "--groups-per-step",
    "1",
    "--max-new-tokens",
    "8",
    "--compile-only",
    "--ranker",
    "none",
    "--val-families",
    "0",
    "--holdout-share",
    "0",
    "--save-steps",
    "1",
]


def _torchrun(tmp_path, tiny, tasks, *extra) -> list[dict]:
    out = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",  # a free port of its own: the fixed 29500 collides with other jobs
        "--nproc_per_node",
        "2",
        "-m",
        "cudaperf",
        "train",
        "grpo",
        "--model",
        str(tiny),
        "--tasks",
        str(tasks),
        *ARGS,
        "--out",
        str(out),
        *extra,
    ]
    env = {
        "PYTHONPATH": str(Path(__file__).parents[2] / "src"),
        "HOME": str(tmp_path),
        "PATH": f"{Path(shutil.which('nvcc')).parent}:/usr/bin:/bin",
        "OMP_NUM_THREADS": "1",
        "TRL_EXPERIMENTAL_SILENCE": "1",
    }
    # its own session, so that a hang kills the workers too and shows where they were
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        _, err = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        _, err = proc.communicate(timeout=60)
        pytest.fail(f"torchrun did not end in 300 s; its stderr ends:\n{err[-4000:]}")
    assert proc.returncode == 0, err[-3000:]
    return read_steps(out)


def _kind(logs, kind):
    return [r for r in logs if r["kind"] == kind]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="compile-only rewards need nvcc")
def test_two_processes_keep_groups_log_like_one_process_and_resume(tmp_path, tiny):
    from cudaperf.train.grpo import GrpoOptions, run_grpo

    tasks = write_task_file(tmp_path)
    logs = _torchrun(tmp_path, tiny, tasks, "--max-steps", "1")
    (roll,) = _kind(logs, "rollout")  # one row for the step, written once
    assert roll["processes"] == 2 and roll["rows"] == 4 and roll["groups"] == 2
    per = roll["tasks_by_process"]  # each process: its own group, all of that group's rows
    assert [len(p) for p in per] == [1, 1] and per[0] != per[1]
    assert len(_kind(logs, "step")) == 1 and len(_kind(logs, "prepare")) == 1
    (lay,) = _kind(logs, "layout")
    assert lay["processes"] == 2 and lay["eval_gpus"] is None  # CPUs: compile-only
    prep = _kind(logs, "prepare")[0]
    assert prep["tasks"] == 2 and prep["candidates"] == 2  # each naive kernel evaluated once
    ckpt = tmp_path / "run" / "checkpoint-1"
    assert {p.name for p in ckpt.glob("rng_state_*.pth")} == {"rng_state_0.pth", "rng_state_1.pth"}

    one = GrpoOptions(
        out=tmp_path / "one",
        model=str(tiny),
        tasks=tasks,
        pool=2,
        turns=1,
        num_generations=2,
        groups_per_step=1,
        max_steps=1,
        max_new_tokens=8,
        compile_only=True,
        ranker="none",
        val_families=0,
        holdout_share=0.0,
    )
    run_grpo(one)
    solo = read_steps(tmp_path / "one")
    for kind in ("rollout", "step", "layout", "prepare"):
        assert set(_kind(solo, kind)[0]) == set(_kind(logs, kind)[0]), kind
    assert _kind(solo, "rollout")[0]["processes"] == 1

    logs = _torchrun(tmp_path, tiny, tasks, "--max-steps", "2", "--resume")
    rep = json.loads((tmp_path / "run" / "report.json").read_text())
    assert rep["resumed_from"].endswith("checkpoint-1") and rep["steps"] == 2
    assert [r["step"] for r in _kind(logs, "step")] == [1, 2]
    assert [r["step"] for r in _kind(logs, "rollout")] == [0, 1]
