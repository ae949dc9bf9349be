"""`cudaperf train grpo` under torchrun (2 CPU processes, gloo): no code change needed."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.train.helpers import write_task_file

pytest.importorskip("trl")


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="compile-only rewards need nvcc")
def test_grpo_under_torchrun_with_two_processes(tmp_path, tiny):
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "-m",
           "cudaperf", "train", "grpo", "--model", str(tiny), "--tasks",
           str(write_task_file(tmp_path)), "--pool", "2", "--turns", "1", "--num-generations",
           "2", "--groups-per-step", "1", "--max-steps", "1", "--max-new-tokens", "8",
           "--compile-only", "--ranker", "none", "--val-families", "0", "--holdout-share", "0",
           "--out", str(out)]  # fmt: skip
    env = {"PYTHONPATH": str(Path(__file__).parents[2] / "src"), "PATH": "/usr/bin:/bin",
           "HOME": str(tmp_path), "OMP_NUM_THREADS": "1"}  # fmt: skip
    env["PATH"] = f"{Path(shutil.which('nvcc')).parent}:{env['PATH']}"
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env)
    assert res.returncode == 0, res.stderr[-2000:]
    logs = [json.loads(x) for x in (out / "steps.jsonl").read_text().splitlines()]
    rollouts = [r for r in logs if r["kind"] == "rollout"]
    assert sorted(r.get("process", 0) for r in rollouts) == [0, 1]  # one group per process
    assert len([r for r in logs if r["kind"] == "step"]) == 1  # the main process logs steps
    assert json.loads((out / "report.json").read_text())["steps"] == 1
