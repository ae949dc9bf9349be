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
from cudaperf.execute.isolation.sandbox import WorkerHandle
from cudaperf.execute.types import Candidate, Status


def _prepared(task, code: str, lib: str, cfg, shim: str | None = None) -> Prepared:
    """A prepared candidate whose library is `lib` (a fake harness), with the task's reference
    and `shim` as its kernel tracer."""
    return Prepared(
        task,
        Candidate(code=code),
        "k",
        str(lib),
        build_reference(task, cfg).lib,
        "",
        [],
        [],
        tempfile.mkdtemp(),
        time.monotonic(),
        trace_lib=shim,
    )


def _fake_lib(tmp_path, name: str, source: str) -> str:
    """`source` (the harness ABI computed on the CPU) built with gcc into a shared library."""
    import subprocess

    src, lib = tmp_path / f"{name}.c", tmp_path / f"{name}.so"
    src.write_text(source)
    subprocess.run(["gcc", "-O1", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    return str(lib)


@pytest.fixture()
def c_run(cpu_config, fake_libs, fake_shims):
    handles = []

    def run(name: str, task=None, shim: str | None = None, **cfg_kw):
        cfg = replace(cpu_config, compile_only=None, trials=10, run_timeout_s=10, **cfg_kw)
        ev = Evaluator(cfg, Env("full", (0,), "FAKE", "sm_90", {}, 1))
        task = task or saxpy_task()
        h = WorkerHandle(None, cfg)
        handles.append(h)
        p = _prepared(task, name, fake_libs[name], cfg, fake_shims[shim] if shim else None)
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


def test_the_worker_reply_itself_carries_no_held_out_size(cpu_config, fake_libs):
    """The worker redacts before its reply leaves it (the evaluator redacts again): a reply
    is also read by tools that never call `Evaluator.finish`."""
    cfg = replace(cpu_config, compile_only=None, trials=5, run_timeout_s=10)
    ev = Evaluator(cfg, Env("full", (0,), "FAKE", "sm_90", {}, 1))
    h = WorkerHandle(None, cfg)
    try:
        p = _prepared(saxpy_task(), "wrong", fake_libs["wrong"], cfg)
        reply = h.request(ev.request(p), cfg.run_timeout_s)
    finally:
        h.close()
    held = [c for c in reply["configs"] if c["held_out"]]
    assert reply["status"] == "wrong_output" and len(held) == 1
    assert held[0]["message"] and not any(ch.isdigit() for ch in held[0]["message"])


def test_reference_outputs_equal_to_the_poison_pattern_are_still_compared(cpu_config):
    """`inputs.run_reference`'s second run on zero-filled outputs tells an element the
    reference wrote as all-ones bits (here -1) from one it never wrote; without it a
    candidate leaving those elements alone would pass."""
    import ctypes

    import numpy as np

    from cudaperf.execute.c.reference import compare, run_reference
    from cudaperf.tasks.inputs import make_inputs
    from cudaperf.tasks.model import InputConfig, Param, Role, Task, Tolerance

    src = "void fill(int n, int* y) { for (int i = 0; i < n; ++i) y[i] = (i % 2) ? -1 : i; }"
    task = Task(
        id="test/c2cuda/fill",
        kind="c2cuda",
        family="fill",
        source=src,
        entry="fill",
        signature=[
            Param(name="n", ctype="int", role=Role.SCALAR),
            Param(name="y", ctype="int", role=Role.OUT, length="n"),
        ],
        configs=[InputConfig(name="n64", sizes={"n": 64})],
        tolerance=Tolerance(atol=0, rtol=0),
    )
    lib = ctypes.CDLL(build_reference(task, cpu_config).lib)
    inputs = make_inputs(task, task.configs[0], 0, 1)
    want = run_reference(task, lib, inputs)
    assert not np.ma.isMaskedArray(want[1]) or not want[1].mask.any()
    lazy = [inputs[0], np.where(np.arange(64) % 2, 0, np.arange(64)).astype(np.int32)]
    assert not compare(task, inputs, lazy, want).correct  # the -1 elements are checked
    assert compare(task, inputs, [inputs[0], want[1].copy()], want).correct


SLOW_FILL_C = """
#include <unistd.h>
int slow_fill_running = 0, slow_fill_peak = 0; /* how many calls overlapped, at most */
void slow_fill(int n, const float* x, float* y) {
  int now = __atomic_add_fetch(&slow_fill_running, 1, __ATOMIC_SEQ_CST);
  int peak = __atomic_load_n(&slow_fill_peak, __ATOMIC_SEQ_CST);
  while (now > peak && !__atomic_compare_exchange_n(&slow_fill_peak, &peak, now, 0,
                                                    __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {}
  usleep(150000);
  for (int i = 0; i < n; ++i) y[i] = 2.0f * x[i];
  __atomic_sub_fetch(&slow_fill_running, 1, __ATOMIC_SEQ_CST);
}
"""


def _slow_task():
    from cudaperf.tasks.model import InputConfig, Param, Role, Task

    return Task(
        id="test/c2cuda/slow_fill",
        kind="c2cuda",
        family="slow_fill",
        source=SLOW_FILL_C,
        entry="slow_fill",
        signature=[
            Param(name="n", ctype="int", role=Role.SCALAR),
            Param(name="x", ctype="float", role=Role.IN, length="n"),
            Param(name="y", ctype="float", role=Role.OUT, length="n"),
        ],
        configs=[InputConfig(name=f"n{n}", sizes={"n": n}) for n in (64, 128, 256, 512)],
    )


def test_a_jobs_reference_sets_are_computed_together_and_match_the_serial_ones(cpu_config):
    """`prefetch_sets` runs the C reference of every set a job needs (4 configs x 3 sets of a
    reference that takes 150 ms) in threads: the reference counts how many of its calls ran at
    once (not a wall time, which load can stretch), with the same inputs and outputs as
    `_input_set` draws alone, and nothing twice."""
    import ctypes
    from types import SimpleNamespace

    from cudaperf.execute.c import trusted as measure

    task = _slow_task()
    ref = ctypes.CDLL(build_reference(task, cpu_config).lib)
    req = SimpleNamespace(salt=1234, check_after=True)
    libs = measure.Libs()
    assert measure.prefetch_sets(task, req, libs, ref) == 12
    assert ctypes.c_int.in_dll(ref, "slow_fill_peak").value >= 2  # one after another: 1
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

    from cudaperf.execute.c import trusted as measure

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


WINDOW_DOT_FAKE = r"""
/* The harness ABI for catalog.window_dot_task, computed on the CPU with float sums. */
int __cudaperf_run(void** host, const long long* nbytes, const int* roles, int n, int warmup,
                   int trials, double budget_ms, float* event_ms, double* wall_ms, int* done,
                   char* err, int errlen) {
  int nn = *(int*)host[0];
  const float* a = (const float*)host[1]; const float* b = (const float*)host[2];
  float* y = (float*)host[3];
  if (trials == 0) {
    for (int i = 0; i < nn; ++i) {
      float acc = 0.0f;
      for (int k = 0; k < 256; ++k) acc += a[(i + k) % nn] * b[(i * 7 + k) % nn];
      y[i] = acc;
    }
    return 0;
  }
  for (int t = 0; t < trials; ++t) { event_ms[t] = 0.01f * (1 + t % 3); wall_ms[t] = 0.02; }
  *done = trials;
  return 0;
}
"""


def test_a_float_sum_passes_the_workers_signed_inputs_check(cpu_config, tmp_path):
    """Through the worker: a correct kernel that sums in float (the reference in double) ends
    `ok`, its signed-inputs check comparing with the output-RMS floor (`compare(signed=True)`
    in `measure._separating_check`); with the plain bound it ended `wrong_output` there."""
    from catalog import window_dot_task

    lib = _fake_lib(tmp_path, "wd", WINDOW_DOT_FAKE)
    task = window_dot_task()
    cfg = replace(cpu_config, compile_only=None, trials=10, run_timeout_s=20)
    ev = Evaluator(cfg, Env("full", (0,), "FAKE", "sm_90", {}, 1))
    h = WorkerHandle(None, cfg)
    try:
        p = _prepared(task, "window_dot", lib, cfg)
        res = ev.finish(p, h.request(ev.request(p), cfg.run_timeout_s))
    finally:
        h.close()
    assert res.status is Status.OK, res.feedback


SLOW_FILL_FAKE = r"""
/* The harness ABI for _slow_task (y = 2x), computed on the CPU. */
int __cudaperf_run(void** host, const long long* nbytes, const int* roles, int n, int warmup,
                   int trials, double budget_ms, float* event_ms, double* wall_ms, int* done,
                   char* err, int errlen) {
  int nn = *(int*)host[0]; const float* x = (const float*)host[1]; float* y = (float*)host[2];
  if (trials == 0) { for (int i = 0; i < nn; ++i) y[i] = 2.0f * x[i]; return 0; }
  for (int t = 0; t < trials; ++t) { event_ms[t] = 0.01f * (1 + t % 3); wall_ms[t] = 0.02; }
  *done = trials;
  return 0;
}
"""


def test_a_job_draws_its_reference_sets_together(cpu_config, tmp_path):
    """Through the worker: a job on 4 configs of a 150 ms reference needs 12 reference runs
    (sets 0, 1 and 2 of each config; 1.8 s one after another) and 4 CPU-baseline runs (0.6 s,
    timed alone); `run_job` prefetches the 12 in threads, so the job takes well under 2.4 s.
    The bound is the serial job's floor (its sleeps alone take 2.4 s, whatever the load), not
    a guess at how fast the threaded one runs (0.9 s idle, 1.64 s seen under load)."""
    lib = _fake_lib(tmp_path, "sf", SLOW_FILL_FAKE)
    task = _slow_task()
    cfg = replace(cpu_config, compile_only=None, trials=10, run_timeout_s=20, cpu_trials=1)
    ev = Evaluator(cfg, Env("full", (0,), "FAKE", "sm_90", {}, 1))
    h = WorkerHandle(None, cfg)
    try:
        p = _prepared(task, "slow_fill", lib, cfg)
        # the job times its own CPU baseline here (no cache file: `c.baselines` is tested apart)
        warm = ev.request(replace(p, task=task.model_copy(update={"id": "warm"})))
        h.request({**warm, "cpu_baseline_cache": None}, 20)
        t0 = time.perf_counter()
        res = ev.finish(
            p, h.request({**ev.request(p), "cpu_baseline_cache": None}, cfg.run_timeout_s)
        )
        took = time.perf_counter() - t0
    finally:
        h.close()
    assert res.status is Status.OK, res.feedback
    assert took < 2.3, took  # serial: >= 2.4 s


def test_the_workers_set_cache_bound_comes_from_the_config(cpu_config, tmp_path):
    """EvalConfig.set_cache_gib reaches the worker: the same job again is answered from the
    cached sets under a bound that holds them (well under the 1.8 s the 12 slow reference runs
    take), and redraws them under one that holds a single set (the pilot's pool, 38 GiB of
    sets, under the 8 GiB default: every step redrew them)."""
    lib = _fake_lib(tmp_path, "sf", SLOW_FILL_FAKE)
    task = _slow_task()
    took = {}
    for gib in (1.0, 1e-6):
        cfg = replace(
            cpu_config,
            compile_only=None,
            trials=10,
            run_timeout_s=20,
            cpu_trials=1,
            set_cache_gib=gib,
        )
        ev = Evaluator(cfg, Env("full", (0,), "FAKE", "sm_90", {}, 1))
        h = WorkerHandle(None, cfg)
        try:
            p = _prepared(task, "slow_fill", lib, cfg)
            h.request(ev.request(p), 20)  # draws the sets (and times the CPU baseline)
            t0 = time.perf_counter()
            res = ev.finish(p, h.request(ev.request(p), cfg.run_timeout_s))
            took[gib] = time.perf_counter() - t0
        finally:
            h.close()
        assert res.status is Status.OK, res.feedback
    assert took[1.0] < 0.9 < 1.5 < took[1e-6], took


def test_set_cache_bytes_from_gib_or_from_host_memory(monkeypatch):
    from cudaperf.execute.isolation import sandbox

    assert sandbox.set_cache_bytes(8.0) == 8 << 30
    monkeypatch.setattr(sandbox, "available_memory", lambda: 100 << 30)
    assert sandbox.set_cache_bytes(None) == 50 << 30  # half of what is available...
    assert sandbox.set_cache_bytes(None, workers=4) == (50 << 30) // 4  # ...shared by workers
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")  # two training processes, an evaluator each
    assert sandbox.set_cache_bytes(None, workers=1) == 25 << 30
    monkeypatch.delenv("LOCAL_WORLD_SIZE")
    monkeypatch.setattr(sandbox, "available_memory", lambda: 1 << 30)
    assert sandbox.set_cache_bytes(None, workers=8) == 1 << 30  # at least 1 GiB
    monkeypatch.undo()
    assert sandbox.available_memory() > 0


def test_the_training_preset_sizes_the_set_cache_from_memory():
    from cudaperf.execute.config import EvalConfig
    from cudaperf.execute.session import training_config

    assert training_config().set_cache_gib is None and EvalConfig().set_cache_gib == 8.0
    with pytest.raises(ValueError, match="set_cache_gib=0"):
        EvalConfig(set_cache_gib=0)


def test_sets_too_large_to_hold_at_once_are_not_prefetched(cpu_config, monkeypatch):
    """`prefetch_sets` leaves a job whose sets together exceed half the cache's byte bound to
    `_input_set`, one set at a time (holding them all at once could exhaust memory)."""
    import ctypes
    from types import SimpleNamespace

    from cudaperf.execute.c import trusted as measure

    task = _slow_task()
    ref = ctypes.CDLL(build_reference(task, cpu_config).lib)
    req = SimpleNamespace(salt=1, check_after=True)
    need = sum(measure._estimate_bytes(task, c) for c in task.configs) * 3
    monkeypatch.setattr(measure, "_MAX_SET_BYTES", 2 * need - 2)
    assert measure.prefetch_sets(task, req, measure.Libs(), ref) == 0
    monkeypatch.setattr(measure, "_MAX_SET_BYTES", 2 * need)
    assert measure.prefetch_sets(task, req, measure.Libs(), ref) == 12


def test_a_candidate_that_runs_python_in_its_process_finds_no_answer(c_run, cpu_config, fake_libs):
    """The `peek` library calls the Python C API from its host code and copies the answer out
    of the reference cache (`Libs.sets`) of the process it runs in. Loaded in a process that
    holds the cache (as the worker once loaded candidates), it passes on a wrong computation's
    place; in the evaluator it runs in a candidate process of its own, finds nothing, and its
    untouched `inout` output is judged wrong."""
    import ctypes

    import numpy as np

    from cudaperf.execute.c import trusted as measure
    from cudaperf.execute.c.child import call_harness
    from cudaperf.execute.c.harness import ROLE_CODES, RUN_SYMBOL

    task = saxpy_task()
    libs, ref = measure.Libs(), ctypes.CDLL(build_reference(task, cpu_config).lib)
    inputs, want = measure._input_set(task, task.configs[0], 0, 1234, libs, ref)
    bufs = [a.copy() for a in inputs]  # the call's arrays, in this (answer-holding) process
    fn = getattr(ctypes.CDLL(fake_libs["peek"]), RUN_SYMBOL)
    codes = [ROLE_CODES[p.role] for p in task.signature]
    got = call_harness(fn, [b.ctypes.data for b in bufs], [b.nbytes for b in bufs], codes)
    assert got["rc"] == 0
    assert np.array_equal(bufs[3], want[3])  # in a process holding the answer, the peek works
    res = c_run("peek")
    assert res.status is Status.WRONG_OUTPUT, res.feedback


_FAIL = '  snprintf(err, errlen, "fake: cudaErrorIllegalAddress"); return 700;\n'
CUDA_ERROR_FILL_FAKE = SLOW_FILL_FAKE.replace(
    "  if (trials == 0) {", _FAIL + "  if (trials == 0) {"
).replace("/* The harness", "#include <stdio.h>\n/* The harness")


def test_a_candidates_cuda_error_keeps_the_workers_reference_sets(
    cpu_config, tmp_path, monkeypatch
):
    """After a candidate's CUDA error the job ends `runtime_error` without asking for a worker
    restart, and the next candidate of the task is judged on the sets already drawn (no
    reference run again): a training run's task pool stays cached across such errors."""
    from cudaperf.execute.c import trusted as measure
    from cudaperf.execute.protocol import parse_request

    task = _slow_task()
    cfg = replace(cpu_config, compile_only=None, trials=10, run_timeout_s=20, cpu_trials=1)
    ev = Evaluator(cfg, Env("full", (0,), "FAKE", "sm_90", {}, 1))
    drawn = []
    draw = measure._draw_set
    monkeypatch.setattr(measure, "_draw_set", lambda *a: drawn.append(a[1].name) or draw(*a))
    libs = measure.Libs()

    def job(name: str, source: str):
        p = _prepared(task, name, _fake_lib(tmp_path, name, source), cfg)
        return measure.run_job(parse_request(ev.request(p)), libs)

    bad = job("err", CUDA_ERROR_FILL_FAKE)
    assert bad.status is Status.RUNTIME_ERROR and "IllegalAddress" in bad.message
    assert bad.restart is False and len(drawn) == 12  # 4 configs x sets 0, 1, 2
    good = job("fill", SLOW_FILL_FAKE)
    assert good.status is Status.OK and good.restart is False
    assert len(drawn) == 12  # nothing drawn again


def test_a_candidate_that_takes_every_file_descriptor_is_still_judged(c_run):
    """`leak` takes every free descriptor of its process on every call. Its configs grow
    (1,000 then 100,003 elements): the call segment for the largest is mapped before the
    library is loaded, so no descriptor has to reach the candidate's process later (the
    control run of test_isolation_gpu, whose host code leaks two per call, failed its larger
    config with EMFILE on the H200 when the segment grew on demand)."""
    res = c_run("leak")
    assert res.status is Status.OK, res.feedback


BUDGET_ECHO = r"""
/* The harness ABI; one timed trial whose event time is the budget it was given (ms). */
int __cudaperf_run(void** host, const long long* nbytes, const int* roles, int n, int warmup,
                   int trials, double budget_ms, float* event_ms, double* wall_ms, int* done,
                   char* err, int errlen) {
  if (trials > 0) { event_ms[0] = (float)budget_ms; wall_ms[0] = budget_ms; *done = 1; }
  return 0;
}
"""


def test_the_timing_budget_reaches_the_harness_in_its_unit(tmp_path):
    """Seconds everywhere in Python; the harness (C) takes milliseconds: the one conversion is
    at the ctypes call (a budget 1,000 times too small would stop every config at 5 trials)."""
    import ctypes

    from cudaperf.execute.c.child import call_harness
    from cudaperf.execute.c.harness import RUN_SYMBOL

    fn = getattr(ctypes.CDLL(_fake_lib(tmp_path, "echo", BUDGET_ECHO)), RUN_SYMBOL)
    got = call_harness(fn, [], [], [], warmup=0, trials=1, budget_s=0.25)
    assert got["rc"] == 0 and got["event_us"] == [pytest.approx(250.0 * 1e3)]


def _trace_protection(res):
    (run,) = [p for p in res.protections if p.stage == "run"]
    active = "kernel_trace" in run.active
    missing = [m for m in run.missing if m.startswith("kernel_trace")]
    return active, missing


@pytest.mark.parametrize("shim", ["host_loop", "host_quick", "token_kernel"])
def test_a_call_whose_work_the_gpu_did_not_do_is_rejected(c_run, shim):
    """#41: a correct reply computed on the host (no device work, or a token kernel beside a
    host loop) is rejected by what the trace saw, whatever its source spells."""
    res = c_run("ok", shim=shim)
    assert res.status is Status.REJECTED, res.feedback
    assert "on the host" in res.feedback[0]
    (traced,) = [c for c in res.configs if "on the host" in c.message]
    assert traced.config == "n100003"  # the largest visible config, never the held-out one
    assert _trace_protection(res)[0]
    # traced after the held-out configs ran: its message keeps no number (the trace's own
    # numbers come from the candidate's process, which has seen the held-out sizes)
    assert not any(ch.isdigit() for ch in traced.message)


def test_the_traced_calls_error_text_is_withheld_after_the_held_out_configs(c_run):
    from cudaperf.execute.c.trusted import WITHHELD_AFTER

    res = c_run("late_err", shim="honest")
    assert res.status is Status.RUNTIME_ERROR, res.feedback
    (traced,) = [c for c in res.configs if c.message]
    assert traced.config == "n100003" and traced.message == WITHHELD_AFTER
    text = "\n".join([res.runtime_log, *res.feedback, *(c.message for c in res.configs)])
    assert "4096" not in text and "four-oh" not in text


def test_an_honest_call_and_a_short_setup_pass_with_their_trace(c_run):
    res = c_run("ok", shim="honest")
    assert res.status is Status.OK, res.feedback
    assert res.launched == ["saxpy_kernel"] and res.device_share == pytest.approx(0.95)
    assert _trace_protection(res) == (True, [])
    short = c_run("ok", shim="short_setup")  # 0.6% of the call, but under 1 ms of host time
    assert short.status is Status.OK and short.device_share == pytest.approx(5 / 900)


def test_a_result_says_where_its_evaluation_time_went(c_run, tmp_path):
    """`ExecResult.phases`: the worker's seconds per phase of a C→CUDA job (types.PHASES), the
    evaluator's compile seconds with them; together no more than the job's wall time."""
    from cudaperf.execute.types import PHASES

    fresh = {"cache_dir": tmp_path / "cache"}  # no CPU baseline of the task on file yet
    res = c_run("ok", shim="honest", **fresh)
    assert res.status is Status.OK, res.feedback
    # the CPU baseline was timed in clean requests before the job ("baseline"), not in it
    worker = {"baseline", "draw", "start", "copy", "call", "compare", "time", "trace"}
    assert set(res.phases) == worker | {"compile"}, res.phases
    assert set(res.phases) <= set(PHASES)  # the documented names
    assert all(v >= 0 for v in res.phases.values()) and res.phases["call"] > 0
    assert res.phases["draw"] > 0 and res.phases["time"] > 0 and res.phases["baseline"] > 0
    assert sum(res.phases.values()) <= res.wall_s
    failed = c_run("stale", **fresh)  # wrong after timing: no trace ran, so no trace phase
    assert "trace" not in failed.phases and failed.phases["compare"] > 0
    assert "baseline" not in failed.phases  # the task's baselines were on file by then


def test_the_share_threshold_comes_from_the_config(c_run):
    assert c_run("ok", shim="slow_setup").status is Status.OK  # 10% >= the default 5%
    assert c_run("ok", shim="slow_setup", min_device_share=0.2).status is Status.REJECTED
    assert c_run("ok", shim="token_kernel", min_device_share=0.0).status is Status.OK


@pytest.mark.parametrize(
    ("lib", "shim", "why"),
    [
        ("ok", None, "no CUPTI shim"),
        ("ok", "begin_fails", "CUPTI_ERROR_NOT_INITIALIZED"),
        ("nohook", "honest", "no kernel trace"),
    ],
)
def test_an_untraced_call_passes_and_says_the_check_did_not_run(c_run, lib, shim, why):
    res = c_run(lib, shim=shim)
    assert res.status is Status.OK and res.device_share is None and res.launched is None
    active, missing = _trace_protection(res)
    assert not active and len(missing) == 1 and why in missing[0]


def test_a_failed_job_is_not_traced(c_run):
    res = c_run("wrong", shim="host_loop")
    assert res.status is Status.WRONG_OUTPUT and _trace_protection(res) == (False, [])
