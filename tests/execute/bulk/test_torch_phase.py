"""torch_phase: the PyTorch→CUDA child of `data measure`, on the CPU (compile-only)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from cudaperf.datagen import FAMILIES, generate_one
from cudaperf.execute.bulk.config import BulkConfig
from cudaperf.execute.bulk.torch_phase import torch_phase
from cudaperf.tasks.measurements import read_results
from tests.proc_helpers import group_gone, kill_group

SRC = Path(__file__).resolve().parents[3] / "src"
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


# A `data measure`-like parent: torch_phase's child runs a measure_torch with a pool of three
# workers (like the build pool), one busy and two idle, and says so; SIGINT then goes to the
# whole group (a terminal's Ctrl-C) or to the parent alone (`kill -INT`).
CTRL_C_PARENT = textwrap.dedent("""
    import sys, time
    from concurrent.futures import ProcessPoolExecutor
    import multiprocessing
    from cudaperf.datagen import FAMILIES, generate_one
    from cudaperf.execute.bulk.config import BulkConfig
    from cudaperf.execute.bulk.torch_phase import torch_phase
    from cudaperf.procpool import stop, worker_init

    class P:
        def task(self): pass
        def row(self, r): pass

    def busy(tasks, out, done, progress, **kw):
        pool = ProcessPoolExecutor(3, mp_context=multiprocessing.get_context("spawn"),
                                   initializer=worker_init)
        try:  # three workers started, one busy, two idle (waiting for work, as at the end)
            [f.result() for f in [pool.submit(time.sleep, 0.5) for _ in range(3)]]
            long = pool.submit(time.sleep, 60)
            time.sleep(0.5)
            print("busy", flush=True)
            long.result()
        finally:
            stop(pool)

    if __name__ == "__main__":
        cfg = BulkConfig(out=__import__("pathlib").Path(sys.argv[1]), jobs=2)
        task = generate_one(FAMILIES["torch_softmax"], 0, 0)
        try:
            torch_phase([task], cfg, 0, set(), P(), {"notes": []}, compile_only=True, salt=1,
                        arch="sm_90", measure_torch=busy)
        except KeyboardInterrupt:
            print("interrupted", flush=True)
            sys.exit(130)
""")


@pytest.mark.parametrize("to", ["group", "parent"])
def test_ctrl_c_stops_the_child_and_its_pool_without_a_traceback(tmp_path, to):
    script = tmp_path / "parent.py"
    script.write_text(CTRL_C_PARENT)
    env = dict(os.environ, PYTHONPATH=str(SRC), PYTHONUNBUFFERED="1")
    p = subprocess.Popen(
        [sys.executable, str(script), str(tmp_path / "rows.jsonl")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        assert p.stdout.readline().strip() == "busy"
        t0 = time.monotonic()
        if to == "group":
            os.killpg(p.pid, signal.SIGINT)
        else:
            p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
        assert p.returncode == 130 and "interrupted" in out and time.monotonic() - t0 < 15
        # no traceback, nor multiprocessing's "Process NAME:" header of one, nor a leak warning
        assert not re.search(r"^(Traceback|Process \S+:$)|leaked", err, re.M), err
        assert group_gone(p.pid, within_s=5), "a process of the group outlived the parent"
    finally:
        kill_group(p)
