"""Both C drivers (the evaluator's harness and the bulk batch library) are built from one copy
of the timing loop and argument unpacking (`cudaperf.execute.c.harness`), and the generated source
is byte for byte what each produced before they shared it (hashes taken before the change, over
the first six C→CUDA tasks of the packaged dataset: 18 implementations)."""

from __future__ import annotations

import gzip
import hashlib
from pathlib import Path

import pytest

from cudaperf.execute.bulk.source import BATCH_DRIVER, BatchUnit, batch_source
from cudaperf.execute.c.harness import harness_source, trial_loop, unpack_args, warmup_loop
from cudaperf.tasks.model import Task

DATA = Path(__file__).resolve().parents[3] / "data" / "tasks.jsonl.gz"
# the evaluator harness since 2026-12-05: the kernel-trace hook around the checked call
HARNESS_SHA = "b79891dc122d6713dc0d2b88ff36935858fb9bdaa8212e69ae9511aeccc31269"
BATCH_SHA = "898d0273e26f2627557c6e4da23b7ee2903f1cad5fdede2abe75c10d9fab7a7e"


def _first_c_tasks(n: int = 6) -> list[Task]:
    if not DATA.exists():
        pytest.skip("no packaged dataset in this checkout")
    out = []
    with gzip.open(DATA, "rt", encoding="utf-8") as f:
        for line in f:
            t = Task.model_validate_json(line)
            if t.kind.value == "c2cuda":
                out.append(t)
            if len(out) == n:
                return out
    return out


def test_generated_sources_are_byte_identical_to_before_the_merge():
    tasks = _first_c_tasks()
    h = hashlib.sha256()
    for t in tasks:
        for i in t.implementations:
            h.update(harness_source(t, i.code).encode())
    assert h.hexdigest() == HARNESS_SHA
    pairs = [(t, i) for t in tasks for i in t.implementations]
    units = [BatchUnit(k, t, i.id, i.code) for k, (t, i) in enumerate(pairs)]
    assert len(units) == 18
    assert hashlib.sha256(batch_source(units).encode()).hexdigest() == BATCH_SHA


def test_both_drivers_hold_the_one_timing_loop():
    [task] = _first_c_tasks(1)
    impl = task.implementations[0]
    evaluator = harness_source(task, impl.code)
    assert warmup_loop("__cudaperf_call(args)") in evaluator
    assert trial_loop("__cudaperf_", "__cudaperf_call(args)", "").split("\n", 3)[3] in evaluator
    assert warmup_loop("cp_table[k](args)") in BATCH_DRIVER
    assert trial_loop("cp_", "cp_table[k](args)", "").split("\n", 3)[3] in BATCH_DRIVER
    batch = batch_source([BatchUnit(0, task, impl.id, impl.code)])
    assert f"{task.entry}({unpack_args(task)})" in evaluator
    assert f"::{task.entry}({unpack_args(task)})" in batch
