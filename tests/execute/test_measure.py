"""The C→CUDA checks in measure.py, driven through the worker with gcc-built fake harness
libraries whose timings and outputs are chosen: each check fires on the candidate it exists
for (and, where a setting turns it off, the same candidate then passes)."""

import tempfile
import time
from dataclasses import replace

import pytest
from catalog import saxpy_task

from cudaperf.execute.build import build_reference
from cudaperf.execute.evaluator import Env, Evaluator, Prepared
from cudaperf.execute.sandbox import WorkerHandle
from cudaperf.execute.types import Candidate, Status


@pytest.fixture()
def c_run(cpu_config, fake_libs):
    handles = []

    def run(name: str, task=None, **cfg_kw):
        cfg = replace(cpu_config, compile_only=None, trials=10, run_timeout_s=10, **cfg_kw)
        ev = Evaluator(cfg, Env("full", (0,), "FAKE", "sm_90", {}, 1))
        task = task or saxpy_task()
        h = WorkerHandle(None, cfg)
        handles.append(h)
        p = Prepared(task, Candidate(code=name), "k", fake_libs[name],
                     build_reference(task, cfg).lib, "", [], [], tempfile.mkdtemp(),
                     time.monotonic())  # fmt: skip
        return ev.finish(p, h.request(ev.request(p), cfg.run_timeout_s))

    yield run
    for h in handles:
        h.close()


def test_stale_outputs_fail_the_re_check_after_timing(c_run):
    res = c_run("stale")
    assert res.status is Status.WRONG_OUTPUT and "after timing" in res.feedback[0]
    assert c_run("stale", check_after_timing=False).status is Status.OK  # only that check


def test_work_escaping_a_short_kernels_events_is_rejected(c_run):
    res = c_run("short_escape")
    assert res.status is Status.REJECTED and "escapes the timing events" in res.feedback[0]


def test_impossible_bandwidth_is_rejected(c_run):
    res = c_run("too_fast", task=saxpy_task(sizes=(300_000,)))
    assert res.status is Status.REJECTED and "impossible" in res.feedback[0]
    assert c_run("too_fast", task=saxpy_task(sizes=(300_000,)), max_bandwidth_gbs=1e9).ok


def test_held_out_feedback_carries_no_size(c_run):
    res = c_run("wrong")
    assert res.status is Status.WRONG_OUTPUT
    shown, held = res.configs[0], res.configs[-1]
    assert "1000" in shown.message  # a shown config keeps its numbers
    assert held.held_out and "elements of y are wrong" in held.message
    assert "4096" not in held.message and not any(ch.isdigit() for ch in held.message)


def test_reference_outputs_equal_to_the_poison_pattern_are_still_compared(cpu_config):
    """`inputs.run_reference`'s second run on zero-filled outputs tells an element the
    reference wrote as all-ones bits (here -1) from one it never wrote; without it a
    candidate leaving those elements alone would pass."""
    import ctypes

    import numpy as np

    from cudaperf.execute.inputs import compare, run_reference
    from cudaperf.tasks.inputs import make_inputs
    from cudaperf.tasks.model import InputConfig, Param, Role, Task, Tolerance

    src = "void fill(int n, int* y) { for (int i = 0; i < n; ++i) y[i] = (i % 2) ? -1 : i; }"
    task = Task(
        id="test/c2cuda/fill", kind="c2cuda", family="fill", source=src, entry="fill",
        signature=[Param(name="n", ctype="int", role=Role.SCALAR),
                   Param(name="y", ctype="int", role=Role.OUT, length="n")],
        configs=[InputConfig(name="n64", sizes={"n": 64})], tolerance=Tolerance(atol=0, rtol=0),
    )  # fmt: skip
    lib = ctypes.CDLL(build_reference(task, cpu_config).lib)
    inputs = make_inputs(task, task.configs[0], 0, 1)
    want = run_reference(task, lib, inputs)
    assert not np.ma.isMaskedArray(want[1]) or not want[1].mask.any()
    lazy = [inputs[0], np.where(np.arange(64) % 2, 0, np.arange(64)).astype(np.int32)]
    assert not compare(task, inputs, lazy, want).correct  # the -1 elements are checked
    assert compare(task, inputs, [inputs[0], want[1].copy()], want).correct


SLOW_FILL_C = """
#include <unistd.h>
void slow_fill(int n, const float* x, float* y) {
  usleep(150000);
  for (int i = 0; i < n; ++i) y[i] = 2.0f * x[i];
}
"""


def _slow_task():
    from cudaperf.tasks.model import InputConfig, Param, Role, Task

    return Task(
        id="test/c2cuda/slow_fill", kind="c2cuda", family="slow_fill", source=SLOW_FILL_C,
        entry="slow_fill",
        signature=[Param(name="n", ctype="int", role=Role.SCALAR),
                   Param(name="x", ctype="float", role=Role.IN, length="n"),
                   Param(name="y", ctype="float", role=Role.OUT, length="n")],
        configs=[InputConfig(name=f"n{n}", sizes={"n": n}) for n in (64, 128, 256, 512)],
    )  # fmt: skip


def test_a_jobs_reference_sets_are_computed_together_and_match_the_serial_ones(cpu_config):
    """`prefetch_sets` runs the C reference of every set a job needs (4 configs x 3 sets of a
    reference that takes 150 ms) in threads: well under the 1.8 s they take one after another,
    with the same inputs and outputs as `_input_set` draws alone, and nothing twice."""
    import ctypes
    from types import SimpleNamespace

    from cudaperf.execute import measure

    task = _slow_task()
    ref = ctypes.CDLL(build_reference(task, cpu_config).lib)
    req = SimpleNamespace(salt=1234, check_after=True)
    libs = measure.Libs()
    t0 = time.perf_counter()
    assert measure.prefetch_sets(task, req, libs, ref) == 12
    assert time.perf_counter() - t0 < 1.0
    assert measure.prefetch_sets(task, req, libs, ref) == 0  # all cached now
    alone = measure.Libs()
    for cfg in task.configs:
        for index, sep in ((0, False), (1, False), (2, True)):
            x1, w1 = measure._input_set(task, cfg, index, req.salt, libs, ref, sep)
            x2, w2 = measure._input_set(task, cfg, index, req.salt, alone, ref, sep)
            assert [a.tobytes() for a in x1 + w1] == [b.tobytes() for b in x2 + w2]
    assert libs.set_bytes == sum(measure._set_bytes(e) for e in libs.sets.values())


def test_the_reference_cache_is_bounded_by_bytes_and_keeps_the_newest(cpu_config, monkeypatch):
    import ctypes

    from cudaperf.execute import measure

    task = _slow_task()
    ref = ctypes.CDLL(build_reference(task, cpu_config).lib)
    libs = measure.Libs()
    big = task.configs[-1]
    one = measure._set_bytes(measure._draw_set(task, big, 0, 1, ref, False))
    monkeypatch.setattr(measure, "_MAX_SET_BYTES", 3 * one)
    for index in range(5):
        measure._input_set(task, big, index, 1, libs, ref)
    assert [k[2] for k in libs.sets] == [2, 3, 4] and libs.set_bytes == 3 * one
    monkeypatch.setattr(measure, "_MAX_SET_BYTES", 1)  # a set larger than the bound stays
    measure._input_set(task, big, 9, 1, libs, ref)
    assert [k[2] for k in libs.sets] == [9]
