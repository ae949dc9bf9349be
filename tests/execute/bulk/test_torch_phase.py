"""torch_phase: the PyTorch→CUDA child of `data measure`, on the CPU (compile-only)."""

from __future__ import annotations

import shutil
import time

import pytest

from cudaperf.datagen import FAMILIES, generate_one
from cudaperf.execute.bulk.config import BulkConfig
from cudaperf.execute.bulk.torch_phase import torch_phase
from cudaperf.tasks.measurements import read_results

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")


class _Progress:
    def __init__(self):
        self.tasks, self.rows = 0, []

    def task(self):
        self.tasks += 1

    def row(self, r):
        self.rows.append(r)


@needs_nvcc
def test_the_child_exits_by_itself_when_its_work_is_done(tmp_path, monkeypatch):
    # Seen on the H200: the child wrote its last row, then hung in its exit joining the
    # build pool's workers (shut down without waiting) until the watchdog killed it and
    # the phase restarted it. Here the watchdog would fire after 60 s.
    monkeypatch.setenv("HOME", str(tmp_path))  # a cold load_cuda cache
    task = generate_one(FAMILIES["torch_softmax"], 0, 0)
    cfg = BulkConfig(out=tmp_path / "rows.jsonl", jobs=2, torch_watchdog_s=60)
    stats: dict = {"notes": []}
    progress = _Progress()
    t0 = time.monotonic()
    torch_phase([task], cfg, 0, set(), progress, stats, compile_only=True, salt=1, arch="sm_90")
    seconds = time.monotonic() - t0
    rows = read_results(cfg.out)
    assert {r["status"] for r in rows} == {"compiled"} and len(rows) == len(task.implementations)
    assert stats["notes"] == [] and progress.tasks == 1
    assert seconds < 50, f"the child took {seconds:.0f} s to exit"
