"""bench/train_eval_speed.py end to end, compile-only (nvcc, no GPU): every phase is written,
the prepare phase batch by batch, and SIGTERM (what `timeout` sends) keeps what was done."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (compile-only)")


def _cmd(tmp_path, n: int, chunk: int) -> list[str]:
    return [
        sys.executable,
        str(ROOT / "bench/train_eval_speed.py"),
        "--n",
        str(n),
        "--compile-only",
        "--prepare-chunk",
        str(chunk),
        "--tasks",
        str(ROOT / "data/tasks.jsonl.gz"),
        "--cache-dir",
        str(tmp_path / "cache"),
        "--out",
        str(tmp_path / "speed.json"),
    ]


def _env():
    return dict(os.environ, PYTHONPATH=str(ROOT / "src"), PYTHONUNBUFFERED="1")


def test_every_phase_is_written(tmp_path):
    # one task (16 compiles with two took 61 s of CI): a batch is its 2 candidates
    cmd = [*_cmd(tmp_path, 1, 1), "--workers-per-gpu", "1", "2", "--per-task", "2"]
    r = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads((tmp_path / "speed.json").read_text())
    assert doc["mode"] == "compile-only" and doc["pool_tasks"] == 1 and doc["per_task"] == 2
    assert doc["settings"]["workers_per_gpu"] == 1
    prep = doc["phases"]["prepare"]
    assert prep["done"] and prep["tasks_done"] == 1 and prep["candidates"] == 1
    assert set(doc["phases"]) == {
        "prepare",
        "batch_a",
        "batch_b",
        "batch_a_again",
        "batch_a_k2",
        "batch_b_k2",
    }
    again = doc["phases"]["batch_a_again"]  # the scorer's own cache: the evaluator not asked
    assert again["candidates"] == 2 and again["evaluator_s"] == 0.0
    for name in ("batch_a_k2", "batch_b_k2"):  # a new evaluator, new code: nothing cached
        k2 = doc["phases"][name]
        assert k2["candidates"] == 2 and k2["cached"] == 0 and k2["evaluator_s"] > 0


def test_sigterm_keeps_the_prepare_batches_done(tmp_path):
    p = subprocess.Popen(
        _cmd(tmp_path, 12, 1), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env()
    )
    out = tmp_path / "speed.json"
    deadline = time.monotonic() + 300
    try:
        while time.monotonic() < deadline:  # until the first prepare batch is in the JSON
            if out.is_file() and json.loads(out.read_text())["phases"].get("prepare", {}).get(
                "tasks_done"
            ):
                break
            time.sleep(0.5)
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=120)
    finally:
        p.kill()
    doc = json.loads(out.read_text())
    prep = doc["phases"]["prepare"]
    assert prep["tasks_done"] >= 1 and not prep["done"] and "seconds" in doc


def test_per_task_batches_are_a_steps_shape_of_distinct_sources():
    """`--per-task M`: M candidates of each task per batch, cycling through its non-naive
    implementations; no source repeats within or across batches A and B (each is compiled and
    run, as a sampled reply is), and M = 1 keeps the one-implementation-per-task batches."""
    from cudaperf.execute.api import naive_implementation
    from cudaperf.tasks.io import load_tasks
    from tests.script_helpers import load_script

    speed = load_script("bench/train_eval_speed.py")
    pool = [t for t in load_tasks(ROOT / "data/tasks.jsonl.gz")[:40] if naive_implementation(t)][:3]
    a, b = speed.candidates(pool, 0, 16), speed.candidates(pool, 1, 16)
    assert len(a) == len(b) == 3 * 16
    for t in pool:
        naive = naive_implementation(t).code
        others = {i.code for i in t.implementations if i.code != naive}
        mine = [c for task, c in a + b if task.id == t.id]
        assert len(mine) == 32 and len(set(mine)) == 32  # distinct sources
        assert {c.split("\n// sample ")[0] for c in mine} == others  # every one used, no naive
    for t, code in speed.candidates(pool, 1):  # M = 1: each task's second implementation
        others = [i.code for i in t.implementations if i.code != naive_implementation(t).code]
        assert code == others[1 % len(others)] or code == f"{others[0]}\n// sample 1\n"


def test_best_workers_needs_the_same_verdicts_and_a_real_gain():
    """The count chosen for training: the fastest batch B among counts with the first count's
    verdicts, only when it beats the first by 10% or more."""
    from tests.script_helpers import load_script

    speed = load_script("bench/train_eval_speed.py")
    ok = {"ok": 60, "compile_error": 4}

    def doc(**secs):
        ph = {"batch_b": {"seconds": 20.0, "statuses": ok}}
        for k, (s, st) in secs.items():
            ph[f"batch_b_{k}"] = {"seconds": s, "statuses": st}
        return {"settings": {"workers_per_gpu": 1}, "phases": ph}

    assert speed.best_workers({"settings": {}, "phases": {}})[0] == 1  # nothing measured
    assert speed.best_workers(doc(k2=(12.0, ok), k4=(9.0, ok)))[0] == 4
    assert speed.best_workers(doc(k2=(12.0, ok), k4=(13.0, ok)))[0] == 2
    assert speed.best_workers(doc(k2=(19.0, ok)))[0] == 1  # 5% is noise
    k, why = speed.best_workers(doc(k2=(12.0, ok), k4=(9.0, {"ok": 59, "wrong_output": 1})))
    assert k == 1 and "changed the verdicts" in why
