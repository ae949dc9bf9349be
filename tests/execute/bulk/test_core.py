"""`cudaperf.execute.bulk*`: batch sources, bisection, device compare rule, resume, and the
whole pipeline on a CPU (fake device runtime + fake batch library + the real runner process).
A `gpu` test measures generated tasks end to end on a real GPU."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys

import numpy as np
import pytest

from cudaperf.execute.build import GpuInfo
from cudaperf.execute.bulk import BulkConfig, bulk_eval_config, estimate_gpu_seconds, measure_tasks
from cudaperf.execute.bulk.batch import BatchBuild, Failure, build_batch, nvcc_command
from cudaperf.execute.bulk.rows import RowContext, done_pairs, make_row, pair_key, read_rows
from cudaperf.execute.bulk.runtime import RUNTIME_SOURCE, Runtime
from cudaperf.execute.bulk.source import (
    BatchUnit,
    attribute_failures,
    batch_source,
    hoist_includes,
    macro_names,
    strip_extern_c,
    unit_log,
    unpack_args,
)
from cudaperf.execute.c.harness import _unpack
from cudaperf.execute.c.reference import compare
from cudaperf.execute.config import EvalConfig
from cudaperf.execute.types import ExecResult, Status
from cudaperf.tasks.measurements import measurements_from_results
from cudaperf.tasks.model import Implementation, InputConfig, Param, Role, Task, Tolerance

HAS_NVCC = shutil.which("nvcc") is not None
HAS_GPU = shutil.which("nvidia-smi") is not None
needs_nvcc = pytest.mark.skipif(not HAS_NVCC, reason="nvcc is not installed (CUDA toolkit)")

SAXPY_C = (
    "void saxpy(int n, float a, const float* x, float* y) {\n"
    "  for (int i = 0; i < n; ++i) y[i] = a * x[i] + y[i];\n}\n"
)

GOOD = """#include <cstdio>
#define BLOCK {block}
__device__ float helper(float v) {{ return v; }}
__global__ void k(int n, float a, const float* x, float* y) {{
  int i = blockIdx.x * BLOCK + threadIdx.x;
  if (i < n) y[i] = a * helper(x[i]) + y[i];
}}
extern "C" void saxpy(int n, float a, const float* x, float* y) {{
  k<<<(n + BLOCK - 1) / BLOCK, BLOCK>>>(n, a, x, y);
}}
"""
BLOCK_FORM = """extern "C" {
__global__ void k(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];  // braces in a comment: { {
}
void saxpy(int n, float a, const float* x, float* y) { k<<<(n + 255) / 256, 256>>>(n, a, x, y); }
}
"""
SYNTAX_ERROR = 'extern "C" void saxpy(int n, float a, const float* x, float* y) { oops }\n'
WRONG_SIGNATURE = 'extern "C" void saxpy(int n, double a, const float* x, float* y) {}\n'


def saxpy_task(impls: dict[str, str], task_id: str = "test/c2cuda/saxpy") -> Task:
    return Task(
        id=task_id,
        kind="c2cuda",
        family="saxpy",
        source=SAXPY_C,
        entry="saxpy",
        signature=[
            Param(name="n", ctype="int", role=Role.SCALAR),
            Param(name="a", ctype="float", role=Role.SCALAR),
            Param(name="x", ctype="float", role=Role.IN, length="n"),
            Param(name="y", ctype="float", role=Role.INOUT, length="n"),
        ],
        configs=[
            InputConfig(name="small", sizes={"n": 1000, "a": 2.5}, seed=1),
            InputConfig(name="heldout", sizes={"n": 5000, "a": -1.5}, seed=2, held_out=True),
        ],
        tolerance=Tolerance(atol=1e-5, rtol=1e-5),
        implementations=[Implementation(id=i, code=c) for i, c in impls.items()],
    )


# ---- batch source ---------------------------------------------------------------------------


def test_strip_extern_c_keeps_lines_comments_and_strings():
    code = 'extern "C" void f(int n) { printf("extern \\"C\\""); } // extern "C"\n'
    out = strip_extern_c(code)
    assert out.startswith("           void f(int n)")
    assert 'printf("extern \\"C\\"")' in out and out.endswith('// extern "C"\n')
    assert out.count("\n") == code.count("\n")


def test_strip_extern_c_block_form_removes_its_braces():
    out = strip_extern_c(BLOCK_FORM)
    assert "extern" not in out
    assert out.count("{") - 2 == out.count("}")  # the two in the comment stay
    assert out.count("\n") == BLOCK_FORM.count("\n")
    assert out.rstrip().endswith("k<<<(n + 255) / 256, 256>>>(n, a, x, y); }")


def test_includes_are_hoisted_and_macros_undefined():
    code, headers = hoist_includes(GOOD.format(block=128))
    assert headers == ["<cstdio>"] and "#include" not in code
    assert code.count("\n") == GOOD.format(block=128).count("\n")
    assert macro_names(GOOD) == ["BLOCK"]
    task = saxpy_task({"a": GOOD.format(block=128), "b": GOOD.format(block=256)})
    src = batch_source(
        [BatchUnit(k, task, i.id, i.code) for k, i in enumerate(task.implementations)]
    )
    assert src.index("#include <cstdio>") < src.index("namespace cp_impl0_ns")
    assert src.count("#undef BLOCK") == 2
    assert "void saxpy(int n, float a, const float* x, float* y);" in src  # the prototype
    assert 'extern "C" void saxpy' not in src
    assert "cp_impl1_ns::saxpy(*(int*)a[0], *(float*)a[1], (const float*)a[2]" in src


def test_unpacking_matches_the_evaluator_harness():
    task = saxpy_task({"a": GOOD})
    assert f"{task.entry}({unpack_args(task)});" in _unpack(task)


def test_errors_are_attributed_to_units():
    log = (
        'cp3/candidate.cu(2): error: identifier "oops" is undefined\n'
        "cp1/candidate.cu(5): warning #177-D: variable declared but never referenced\n"
        "/usr/bin/ld: src.o: undefined reference to `cp_impl12_ns::saxpy(int, float, ...)'\n"
        "ptxas error   : Entry function '_ZN10cp_impl7_ns1kEv' uses too much shared data\n"
    )
    assert attribute_failures(log) == {3, 12, 7}
    assert unit_log(log, 1).startswith("candidate.cu(5): warning")


# ---- compile (nvcc) -------------------------------------------------------------------------


@pytest.fixture(scope="session")
def ecfg(tmp_path_factory) -> EvalConfig:
    return EvalConfig(cache_dir=tmp_path_factory.mktemp("measure-cache"), compile_only=True)


@needs_nvcc
def test_batch_with_name_collisions_compiles_into_one_library(ecfg):
    task = saxpy_task({"a": GOOD.format(block=128), "b": GOOD.format(block=256), "c": BLOCK_FORM})
    other = saxpy_task({"a": GOOD.format(block=64)}, task_id="test/c2cuda/saxpy2")
    pairs = [(t, i) for t in (task, other) for i in t.implementations]
    b = build_batch(pairs, "sm_90", ecfg, 600)
    assert not b.failures and b.nvcc_calls == 1
    libs = {lib for lib, _ in b.units.values()}
    assert len(libs) == 1 and sorted(k for _, k in b.units.values()) == [0, 1, 2, 3]
    syms = subprocess.run(["nm", "-D", libs.pop()], capture_output=True, text=True).stdout
    assert all(f" T {s}\n" in syms for s in ("cp_count", "cp_fn", "cp_call", "cp_time"))


@needs_nvcc
def test_bisection_costs_only_the_bad_implementations(ecfg):
    task = saxpy_task(
        {
            "good1": GOOD.format(block=128),
            "syntax": SYNTAX_ERROR,
            "signature": WRONG_SIGNATURE,
            "good2": BLOCK_FORM,
        }
    )
    b = build_batch([(task, i) for i in task.implementations], "sm_90", ecfg, 600)
    assert set(b.failures) == {(task.id, "syntax"), (task.id, "signature")}
    assert b.failures[(task.id, "syntax")].status is Status.COMPILE_ERROR
    assert b.failures[(task.id, "syntax")].message.startswith("compile error at line 1")
    assert b.failures[(task.id, "signature")].status is Status.COMPILE_ERROR
    good = {b.units[(task.id, "good1")][0], b.units[(task.id, "good2")][0]}
    assert len(good) == 1  # the two good ones share one library
    assert "--linker-options=-z,defs" in nvcc_command("sm_90", ecfg)


# ---- the comparison rule --------------------------------------------------------------------


@pytest.fixture(scope="session")
def runtimes(tmp_path_factory) -> dict[str, str]:
    """The runtime library, real and fake-device (host memory), built with nvcc."""
    if not HAS_NVCC:
        pytest.skip("nvcc is not installed (CUDA toolkit)")
    d = tmp_path_factory.mktemp("rt")
    (d / "rt.cu").write_text(RUNTIME_SOURCE)
    out = {}
    for name, flags in (("real", []), ("fake", ["-DCP_FAKE_DEVICE"])):
        cmd = [
            "nvcc",
            "-O3",
            "-shared",
            "-Xcompiler",
            "-fPIC",
            "-arch=sm_90",
            *flags,
            "-o",
            str(d / f"{name}.so"),
            str(d / "rt.cu"),
        ]
        subprocess.run(cmd, check=True, capture_output=True)
        out[name] = str(d / f"{name}.so")
    return out


def _case(rng, dtype: str, n: int, atol: float, rtol: float):
    if dtype.startswith("float"):
        w = rng.normal(0, 1, n).astype(dtype)
        noise = rng.normal(0, 1, n) * rng.choice([0, 1e-6, 1e-4, 1e-2, 1.0], n)
        g = (w + noise).astype(dtype)
        thr = (np.asarray(atol, dtype) + np.asarray(rtol, dtype) * np.abs(w)).astype(dtype)
        edge = rng.random(n) < 0.3  # exactly on the tolerance boundary
        g[edge] = (w[edge] + thr[edge]).astype(dtype)
        g[rng.random(n) < 0.05] = np.nan
        w[rng.random(n) < 0.05] = np.nan
        g[rng.random(n) < 0.02] = np.inf
        return g, w
    info = np.iinfo(dtype)
    w = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
    g = w.copy()
    m = rng.random(n) < 0.3
    g[m] = rng.integers(info.min, info.max, int(m.sum()), dtype=dtype, endpoint=True)
    return g, w


def test_device_rule_equals_compare_on_the_same_arrays(runtimes):
    """The CUDA element rule (compiled for the host: same source, same rounding steps) gives
    compare()'s verdicts, bad counts, first index and max errors, borderline cases included."""
    rt = Runtime(runtimes["real"])
    rng = np.random.default_rng(0)
    dtypes = [
        "float32",
        "float64",
        "int8",
        "uint8",
        "int16",
        "uint16",
        "int32",
        "uint32",
        "int64",
        "uint64",
    ]
    for dtype in dtypes:
        for trial in range(60):
            atol = [1e-4, 1e-5, 0.0, 1e-3, 0.5][trial % 5]
            rtol = [1e-4, 1e-3, 0.0, 1e-2, 0.25][(trial // 5) % 5]
            g, w = _case(rng, dtype, int(rng.integers(1, 40)), atol, rtol)
            task = _one_out_task(dtype, g.size, atol, rtol)
            want = compare(task, [np.array(g.size, np.int32), w], [None, g], [None, w])
            st = rt.compare(dtype, g.ctypes.data, w.ctypes.data, g.size, atol, rtol, host=True)
            assert (st.bad == 0) == want.correct, (dtype, atol, rtol, g, w)
            assert _same(st.max_abs_err, want.max_abs_err) and _same(
                st.max_rel_err, want.max_rel_err
            )
            if st.bad:
                assert f"{st.bad} of {g.size} elements" in want.message
                assert f"first at index {st.first}:" in want.message


def _same(a: float, b: float) -> bool:
    return a == b or (math.isinf(a) and math.isinf(b))


def _one_out_task(dtype: str, n: int, atol: float, rtol: float) -> Task:
    ctype = {
        "float32": "float",
        "float64": "double",
        "int8": "int8_t",
        "uint8": "uint8_t",
        "int16": "int16_t",
        "uint16": "uint16_t",
        "int32": "int32_t",
        "uint32": "uint32_t",
        "int64": "int64_t",
        "uint64": "uint64_t",
    }[dtype]
    return Task(
        id="t/c2cuda/x",
        kind="c2cuda",
        family="x",
        source="",
        entry="f",
        signature=[
            Param(name="n", ctype="int", role=Role.SCALAR),
            Param(name="o", ctype=ctype, role=Role.OUT, length="n"),
        ],
        configs=[InputConfig(name="c", sizes={"n": n})],
        tolerance=Tolerance(atol=atol, rtol=rtol),
    )


def test_device_compare_messages_equal_compare(runtimes):
    """device_compare on (fake-device) buffers writes compare()'s exact message and numbers."""
    from cudaperf.execute.bulk.runner import device_compare

    rt = Runtime(runtimes["fake"])
    task = saxpy_task({"a": GOOD})
    x = np.linspace(1, 2, 50, dtype=np.float32)
    y = np.linspace(0, 1, 50, dtype=np.float32)
    want_y = (2.5 * x + y).astype(np.float32)
    for got_y, got_x in ((want_y.copy(), x), (want_y * 1.01, x), (want_y, x + 1)):
        bufs = _FakeBufs(rt, {2: x, 3: y}, {3: want_y}, {2: got_x, 3: got_y})
        ours = device_compare(rt, task, bufs)
        ref = compare(
            task, [None, None, x, y], [None, None, got_x.copy(), got_y], [None, None, x, want_y]
        )
        assert ours == ref


class _FakeBufs:
    def __init__(self, rt, pristine, want, work):
        self.arrays = [{"n": 1}, {"n": 1}, {"n": 50}, {"n": 50}]
        self._keep = [pristine, want, work]
        self.pristine = {i: a.ctypes.data for i, a in pristine.items()}
        self.want = {i: a.ctypes.data for i, a in want.items()}
        self.work = {i: a.ctypes.data for i, a in work.items()}


# ---- resume ---------------------------------------------------------------------------------


def test_resume_skips_only_finished_pairs_of_unchanged_tasks():
    task = saxpy_task({"a": GOOD.format(block=128), "b": GOOD.format(block=256)})
    env = RowContext("full", "NVIDIA H200", "sm_90", {})
    a, b = task.implementations
    rows = [
        make_row(env, task, a, Status.WRONG_OUTPUT, message="x"),
        make_row(env, task, b, Status.INFRA_ERROR, message="our fault"),
    ]
    assert done_pairs(rows, [task], "full", "NVIDIA H200") == {(task.id, "a")}
    assert done_pairs(rows, [task], "full", "NVIDIA H100") == set()
    assert done_pairs(rows, [task], "compile-only", "") == set()
    changed = task.model_copy(update={"tolerance": Tolerance(atol=1e-3, rtol=1e-3)})
    assert done_pairs(rows, [changed], "full", "NVIDIA H200") == set()
    new_code = task.model_copy(
        update={"implementations": [a.model_copy(update={"code": a.code + "\n"}), b]}
    )
    assert done_pairs(rows, [new_code], "full", "NVIDIA H200") == set()
    measured = task.model_copy(
        update={"implementations": [a.model_copy(update={"strategies": ["naive"]}), b]}
    )
    assert pair_key(measured, measured.implementations[0]) == pair_key(task, a)


# ---- the whole pipeline on a CPU ------------------------------------------------------------

FAKE_BATCH = r"""
#include <stdio.h>
#include <unistd.h>
static void saxpy(void** a, float f) {
  int n = *(int*)a[0]; float s = *(float*)a[1];
  const float* x = (const float*)a[2]; float* y = (float*)a[3];
  for (int i = 0; i < n; ++i) y[i] = f * s * x[i] + y[i];
}
int cp_count(void) { return 8; }
void* cp_fn(int k) { return 0; }
int cp_call(int k, void** a, char* err, int errlen) {
  err[0] = 0;
  switch (k) {
    case 0: case 6: saxpy(a, 1.0f); return 0;
    case 1: saxpy(a, 2.0f); return 0;
    case 2: saxpy(a, 1.0f); ((float*)a[2])[3] += 1.0f; return 0;
    case 3: snprintf(err, errlen, "running the candidate: cudaErrorIllegalAddress (fake)");
            return 700;
    case 4: for (;;) sleep(1);
    case 5: *(volatile int*)0 = 1; return 0;
    case 7: printf("chatty implementation\n"); saxpy(a, 1.0f); return 0;
  }
  return -1;
}
int cp_time(int k, void** a, int warmup, int trials, double budget_ms, void* flush,
            long long flush_bytes, float* ev, double* wall, int* done, char* err, int errlen) {
  for (int w = 0; w < warmup; ++w) cp_call(k, a, err, errlen);
  for (int t = 0; t < trials; ++t) {
    cp_call(k, a, err, errlen);
    ev[t] = 0.010f * (1 + t % 3);
    wall[t] = k == 6 ? 5.0 : 0.02;  /* 6: work escapes the events */
    *done = t + 1;
  }
  return 0;
}
"""

FAKE_IMPLS = {
    "ok": 0,
    "wrong": 1,
    "mutates": 2,
    "cuda_error": 3,
    "hangs": 4,
    "segfault": 5,
    "escapes": 6,
    "chatty": 7,
}


@pytest.fixture(scope="session")
def fake_batch(tmp_path_factory) -> str:
    d = tmp_path_factory.mktemp("fakebatch")
    (d / "b.c").write_text(FAKE_BATCH)
    subprocess.run(
        ["gcc", "-O1", "-shared", "-fPIC", "-o", str(d / "b.so"), str(d / "b.c")], check=True
    )
    return str(d / "b.so")


def _fake_builder(lib: str):
    def build(pairs, arch, ecfg, timeout):
        b = BatchBuild()
        for t, im in pairs:
            if im.id == "broken":
                b.failures[(t.id, im.id)] = Failure(Status.COMPILE_ERROR, "compile error: x", "log")
            else:
                b.units[(t.id, im.id)] = (lib, FAKE_IMPLS[im.id])
        return b

    return build


def test_pipeline_on_fake_device(tmp_path, runtimes, fake_batch):
    """Orchestrator, CPU reference pool, driver and the real runner process, on host memory:
    every status, runner restarts after a CUDA error, a crash and a hang, then resume."""
    names = [
        "ok",
        "wrong",
        "mutates",
        "cuda_error",
        "escapes",
        "segfault",
        "hangs",
        "chatty",
        "broken",
    ]
    t1 = saxpy_task({n: f"// {n}\n" + GOOD.format(block=128) for n in names})
    t2 = saxpy_task({"ok": GOOD.format(block=32)}, task_id="test/c2cuda/saxpy_b")
    t3 = saxpy_task(
        {"ok": 'system("ls");\n' + GOOD.format(block=32)}, task_id="test/c2cuda/saxpy_c"
    )
    out = tmp_path / "res.jsonl"
    ev = bulk_eval_config(cache_dir=tmp_path / "cache", trials=7, seed_salt=5)
    cfg = BulkConfig(out=out, eval=ev, jobs=2, silence_timeout_s=8, scratch=tmp_path, batch_tasks=2)
    gpu = [GpuInfo(0, "Fake GPU", "sm_90", "0")]
    summary = measure_tasks(
        [t1, t2, t3], cfg, gpus=gpu, builder=_fake_builder(fake_batch), runtime_lib=runtimes["fake"]
    )
    rows = {(r["task_id"], r["candidate_id"]): r for r in read_rows(out)}
    status = {k[1]: r["status"] for k, r in rows.items() if k[0] == t1.id}
    assert status == {
        "ok": "ok",
        "wrong": "wrong_output",
        "mutates": "rejected",
        "cuda_error": "runtime_error",
        "escapes": "rejected",
        "segfault": "runtime_error",
        "hangs": "timeout",
        "chatty": "ok",
        "broken": "compile_error",
    }
    assert rows[(t2.id, "ok")]["status"] == "ok"
    assert rows[(t3.id, "ok")]["status"] == "rejected"  # static check, never compiled
    ok = ExecResult.model_validate(rows[(t1.id, "ok")])
    assert ok.mode == "full" and ok.gpu == "Fake GPU" and ok.cache_key.startswith("measure-")
    assert ok.protocol == "bulk-v1"  # and so are its measurements
    assert {
        m.protocol
        for ms in measurements_from_results([rows[(t1.id, "ok")]], "d").values()
        for m in ms
    } == {"bulk-v1"}
    assert [c.config for c in ok.configs] == ["small", "heldout"] and ok.configs[1].held_out
    assert all(c.timing and c.timing.trials == 7 and c.timing.median_us > 0 for c in ok.configs)
    assert "input array x was modified" in rows[(t1.id, "mutates")]["feedback"][0]
    assert "elements of y are wrong" in rows[(t1.id, "wrong")]["feedback"][0]
    assert "escapes the timing events" in rows[(t1.id, "escapes")]["feedback"][0]
    assert summary["runner_starts"]["0"] >= 4  # start + after the CUDA error, crash, hang
    found = measurements_from_results(read_rows(out), "2026-01-01")
    assert {k for k in found} == {(t1.id, "ok"), (t1.id, "chatty"), (t2.id, "ok")}
    again = measure_tasks(
        [t1, t2, t3], cfg, gpus=gpu, builder=_fake_builder(fake_batch), runtime_lib=runtimes["fake"]
    )
    assert again["implementations_measured_this_run"] == 0
    assert len(read_rows(out)) == len(rows)


def test_estimate_is_positive_and_scales_with_implementations(tmp_path):
    task = saxpy_task({"a": GOOD, "b": GOOD + "\n"})
    est = estimate_gpu_seconds([task], BulkConfig(out=tmp_path / "x.jsonl"))
    assert est["implementations"] == 2 and est["seconds"] > 0 and est["ms_per_impl"] > 0


# ---- CLI ------------------------------------------------------------------------------------


@needs_nvcc
def test_cli_compile_only_writes_compiled_rows(tmp_path):
    from typer.testing import CliRunner

    from cudaperf.cli import app
    from cudaperf.tasks.io import save_jsonl

    tasks = [saxpy_task({"a": GOOD.format(block=128), "b": BLOCK_FORM})]
    save_jsonl(tasks, tmp_path / "t.jsonl")
    out, summ = tmp_path / "r.jsonl", tmp_path / "s.json"
    args = [
        "data",
        "measure",
        str(tmp_path / "t.jsonl"),
        "--out",
        str(out),
        "--compile-only",
        "--cache-dir",
        str(tmp_path / "c"),
        "--summary",
        str(summ),
        "--jobs",
        "1",
    ]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    rows = read_rows(out)
    assert [(x["status"], x["mode"]) for x in rows] == [("compiled", "compile-only")] * 2
    s = json.loads(summ.read_text())
    assert s["statuses_in_file"] == {"c2cuda": {"compiled": 2}} and s["nvcc_calls"] == 1
    r = CliRunner().invoke(app, args)  # resume: nothing left
    assert r.exit_code == 0 and len(read_rows(out)) == 2


def test_cli_without_gpu_says_so(tmp_path):
    from typer.testing import CliRunner

    from cudaperf.cli import app

    if HAS_GPU:
        pytest.skip("a GPU is visible here")
    r = CliRunner().invoke(app, ["data", "measure", "x.jsonl", "--out", str(tmp_path / "r.jsonl")])
    assert r.exit_code == 1 and "--compile-only" in r.output


# ---- GPU ------------------------------------------------------------------------------------


OOB = GOOD.format(block=128).replace("if (i < n) y[i]", "y[i + (1LL << 40)]")  # bad address
WRONG = GOOD.format(block=128).replace("a * helper", "2.0f * a * helper")


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="no NVIDIA GPU visible (nvidia-smi missing)")
def test_generated_tasks_measure_ok_on_the_gpu(tmp_path):
    """Generated tasks: every implementation ok with positive timings. A hand-written task
    with a wrong and an out-of-bounds implementation: their statuses, the runner restarted,
    and the good ones after them still measured."""
    from cudaperf.datagen import FAMILIES, BuildConfig, build_tasks

    want = ("elementwise_expr", "stencil1d", "reduce_rows", "transpose2d", "gemv", "scan")
    fams = tuple(f for f in want if f in FAMILIES)
    tasks = build_tasks(BuildConfig(per_family=1, seed=3, families=fams, max_family_share=1.0))
    tasks = [t for t in tasks.tasks if t.kind.value == "c2cuda"]
    faulty = saxpy_task(
        {"good": GOOD.format(block=128), "wrong": WRONG, "oob": OOB, "good2": BLOCK_FORM},
        task_id="test/c2cuda/faulty",
    )
    out = tmp_path / "res.jsonl"
    ev = bulk_eval_config(cache_dir=tmp_path / "cache", trials=10)
    cfg = BulkConfig(out=out, eval=ev, batch_tasks=2)
    summary = measure_tasks([*tasks, faulty], cfg)
    rows = read_rows(out)
    assert len(rows) == sum(len(t.implementations) for t in tasks) + 4
    by = {(r["task_id"], r["candidate_id"]): r for r in rows}
    assert by[(faulty.id, "wrong")]["status"] == "wrong_output"
    assert by[(faulty.id, "oob")]["status"] == "runtime_error"
    assert by[(faulty.id, "good")]["status"] == by[(faulty.id, "good2")]["status"] == "ok"
    assert sum(summary["runner_starts"].values()) >= 2
    bad = [
        (r["task_id"], r["candidate_id"], r["feedback"])
        for r in rows
        if r["status"] != "ok" and r["task_id"] != faulty.id
    ]
    assert not bad, bad
    for r in rows:
        if r["status"] == "ok":
            assert all(c["timing"]["median_us"] > 0 for c in r["configs"])
            assert r["gpu"] and r["mode"] == "full"
    assert summary["gpu_process_s_per_impl"] > 0
    keys = ("wall_s", "impls_per_min", "gpu_process_s_per_impl")
    print(json.dumps({k: summary[k] for k in keys}), file=sys.stderr)


# ---- PyTorch→CUDA dispatch ------------------------------------------------------------------

FAKE_TORCH = """
import json, os, time
from pathlib import Path
from cudaperf.execute.bulk.torch_tasks import ContextPoisoned
from cudaperf.execute.types import Candidate, ExecResult


def _row(task, impl, status):
    h = Candidate(code=impl.code).hash
    res = ExecResult(status=status, mode="full", task_id=task.id, candidate_id=impl.id,
                     candidate_hash=h, gpu="Fake GPU")
    return res.model_dump_json()


def measure_torch_tasks(tasks, out_path, *, trials, device, done, progress, inflight_path=None,
                        compile_only=False, salt=None, arch=None, jobs=None, warmup=2,
                        budget_s=0.25):
    marker = Path(inflight_path)
    with open(out_path, "a") as out:
        if marker.exists():  # a previous process hung or died here
            t_id, i_id = json.loads(marker.read_text())
            t = next(t for t in tasks if t.id == t_id)
            out.write(_row(t, t.implementation(i_id), "runtime_error") + "\\n")
            done.add((t_id, i_id))
            marker.unlink()
        for task in tasks:
            for impl in task.implementations:
                if (task.id, impl.id) in done:
                    continue
                marker.write_text(json.dumps([task.id, impl.id]))
                if impl.id == "hang":
                    time.sleep(3600)
                if impl.id == "poison":
                    out.write(_row(task, impl, "runtime_error") + "\\n")
                    out.flush()
                    marker.unlink()
                    raise ContextPoisoned(task.id, impl.id, "fake CUDA error")
                out.write(_row(task, impl, "ok") + "\\n")
                out.flush()
                marker.unlink()
                done.add((task.id, impl.id))
            progress(task.id)
"""


def test_torch_tasks_go_to_measure_torch_with_restarts(tmp_path, monkeypatch):
    """The torch phase restarts its child after ContextPoisoned and after a hang (watchdog),
    and resumes from the rows written, so every implementation gets exactly one row."""
    from cudaperf.execute.bulk.rows import Progress
    from cudaperf.execute.bulk.torch_phase import torch_phase

    (tmp_path / "fake_measure_torch.py").write_text(FAKE_TORCH)
    monkeypatch.syspath_prepend(str(tmp_path))
    src = "import torch\nclass Model(torch.nn.Module):\n    pass\n"
    impls = [Implementation(id=i, code=f"# {i}\n") for i in ("ok", "poison", "hang", "ok2")]
    task = Task(
        id="t/torch2cuda/x",
        kind="torch2cuda",
        family="x",
        source=src,
        entry="Model",
        configs=[InputConfig(name="c", sizes={"N": 4})],
        implementations=impls,
    )
    cfg = BulkConfig(out=tmp_path / "r.jsonl", torch_watchdog_s=4)
    stats = {"notes": []}
    from fake_measure_torch import measure_torch_tasks as fake

    torch_phase([task], cfg, 0, set(), Progress(4, 1), stats, False, 1, "sm_90", measure_torch=fake)
    rows = read_rows(cfg.out)
    got = sorted((r["candidate_id"], r["status"]) for r in rows)
    assert got == [
        ("hang", "runtime_error"),
        ("ok", "ok"),
        ("ok2", "ok"),
        ("poison", "runtime_error"),
    ], got
    assert not stats["notes"]


KWARGS_TORCH = """
import json, os
def measure_torch_tasks(tasks, out, done, progress, **kw):
    with open(os.environ["KW_OUT"], "w") as f:
        json.dump(kw, f)
"""


def test_the_torch_phase_times_with_the_runs_warmup_and_budget(tmp_path, monkeypatch):
    """`data measure --warmup/--timing-budget` reach the PyTorch phase as they reach the C one
    (it used its own 2 warm-up calls and 0.25 s until 2026-12-05)."""
    from cudaperf.execute.bulk.rows import Progress
    from cudaperf.execute.bulk.torch_phase import torch_phase

    (tmp_path / "kw_measure_torch.py").write_text(KWARGS_TORCH)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("KW_OUT", str(tmp_path / "kw.json"))
    from kw_measure_torch import measure_torch_tasks as fake

    task = Task(
        id="t/torch2cuda/x",
        kind="torch2cuda",
        family="x",
        source="import torch\nclass Model(torch.nn.Module):\n    pass\n",
        entry="Model",
        configs=[InputConfig(name="c", sizes={"N": 4})],
        implementations=[Implementation(id="a", code="# a\n")],
    )
    ev = bulk_eval_config(warmup=7, time_budget_s=0.125, trials=9)
    cfg = BulkConfig(out=tmp_path / "r.jsonl", eval=ev)
    torch_phase([task], cfg, 0, set(), Progress(1, 1), {"notes": []}, False, 1, "sm_90", fake)
    kw = json.loads((tmp_path / "kw.json").read_text())
    assert (kw["warmup"], kw["budget_s"], kw["trials"]) == (7, 0.125, 9)
