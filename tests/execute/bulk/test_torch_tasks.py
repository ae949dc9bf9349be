"""Batched PyTorch→CUDA measurement: the CPU half (static checks, pipelined builds,
compile-only rows, crash markers, row shape) here; the GPU half under `-m gpu`."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from cudaperf.datagen import FAMILIES, generate_one
from cudaperf.execute.bulk.torch_tasks import Prebuilt, _gpu_row, _Run, measure_torch_tasks
from cudaperf.execute.native import load_cuda
from cudaperf.execute.pytorch.build import native_sources
from cudaperf.execute.types import Candidate, ConfigResult, ExecResult, Status, Timing
from cudaperf.tasks.measurements import measurements_from_results, read_results
from cudaperf.tasks.model import Implementation, Task

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
needs_gpu = pytest.mark.skipif(shutil.which("nvidia-smi") is None, reason="no NVIDIA GPU")


def _tasks() -> list[Task]:
    return [
        generate_one(FAMILIES["torch_softmax"], 0, 0),
        generate_one(FAMILIES["torch_linear_act"], 0, 0),
    ]


@pytest.fixture(scope="session")
def _session_home(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        home = tmp_path_factory.mktemp("home")
        mp.setenv("HOME", str(home))
        yield home


@pytest.fixture()
def home(_session_home) -> Path:
    """A private HOME for this test session, so load_cuda's default cache
    (~/.cache/cudaperf/native) starts empty; the spawned build workers inherit it."""
    return _session_home


def _rows(path: Path) -> list[dict]:
    return read_results(path)


def _with_impls(task: Task, *impls: tuple[str, str]) -> Task:
    extra = [Implementation(id=i, code=c) for i, c in impls]
    return task.model_copy(update={"implementations": [*task.implementations, *extra]})


@needs_nvcc
def test_compile_only_builds_every_implementation_once(tmp_path, home):
    tasks, out, seen = _tasks(), tmp_path / "rows.jsonl", []
    measure_torch_tasks(
        tasks,
        out,
        trials=20,
        device=0,
        done=set(),
        progress=seen.append,
        compile_only=True,
        jobs=2,
    )
    rows = _rows(out)
    assert seen == [t.id for t in tasks]
    want = {(t.id, i.id): i for t in tasks for i in t.implementations}
    assert {(r["task_id"], r["candidate_id"]) for r in rows} == set(want) and len(rows) == 6
    for r in rows:
        res = ExecResult.model_validate(r)
        assert res.status is Status.COMPILED and res.mode == "compile-only", res.feedback
        assert res.candidate_hash == Candidate(code=want[(res.task_id, res.candidate_id)].code).hash
        assert res.form == "native" and res.arch == "sm_90" and res.wall_s > 0
        assert res.versions["nvcc"] not in ("", "missing")
        print(f"{res.candidate_id:18s} checks + nvcc build: {res.wall_s:.2f} s")
    # Every kernel source is in load_cuda's default cache, where ModelNew will look for it.
    assert list((home / ".cache" / "cudaperf" / "native").glob("*/lib.so"))
    for src in {s for i in want.values() for s in native_sources(i.code)}:
        t0 = time.perf_counter()
        load_cuda(src, arch="sm_90")  # what ModelNew uses on an H200
        assert time.perf_counter() - t0 < 0.5, "not prebuilt: load_cuda had to run nvcc"


@needs_nvcc
def test_done_pairs_are_skipped(tmp_path, home):
    tasks, out = _tasks(), tmp_path / "rows.jsonl"
    done = {(t.id, i.id) for t in tasks for i in t.implementations}
    done.discard((tasks[0].id, tasks[0].implementations[1].id))
    measure_torch_tasks(tasks, out, trials=20, device=0, done=done, compile_only=True, jobs=2)
    rows = _rows(out)
    assert [(r["task_id"], r["candidate_id"]) for r in rows] == [
        (tasks[0].id, tasks[0].implementations[1].id)
    ]
    assert len(done) == 6  # the measured pair was added


BROKEN_CUDA = "__global__ void k(float* y) { y[0] = undefined_name; }\n"


@needs_nvcc
def test_compile_errors_and_static_rejections_get_their_status(tmp_path, home):
    task = _tasks()[0]
    good = task.implementations[1].code
    broken = good.replace("__global__", BROKEN_CUDA + "__global__", 1)
    cheat = good.replace("return y", "return torch.softmax(x, dim=1)")
    task = _with_impls(task, ("broken", broken), ("cheat", cheat))
    out = tmp_path / "rows.jsonl"
    measure_torch_tasks([task], out, trials=5, device=0, done=set(), compile_only=True, jobs=2)
    by_id = {r["candidate_id"]: ExecResult.model_validate(r) for r in _rows(out)}
    assert by_id["broken"].status is Status.COMPILE_ERROR
    assert "undefined_name" in by_id["broken"].compile_log
    assert "undefined_name" in by_id["broken"].feedback[0]
    assert by_id["cheat"].status is Status.REJECTED
    assert "torch_compute_ops" in by_id["cheat"].findings
    assert by_id[task.implementations[0].id].status is Status.COMPILED


@needs_nvcc
def test_a_crash_marker_becomes_a_runtime_error_row(tmp_path, home):
    task = _tasks()[0]
    out = tmp_path / "rows.jsonl"
    victim = task.implementations[2].id
    Path(f"{out}.inflight").write_text(json.dumps([task.id, victim]))
    measure_torch_tasks([task], out, trials=5, device=0, done=set(), compile_only=True, jobs=2)
    by_id = {r["candidate_id"]: r for r in _rows(out)}
    assert by_id[victim]["status"] == "runtime_error" and "died" in by_id[victim]["runtime_log"]
    assert {r["status"] for k, r in by_id.items() if k != victim} == {"compiled"}
    assert len(_rows(out)) == 3 and not Path(f"{out}.inflight").exists()


def test_bad_arguments_fail_loudly(tmp_path):
    c_task = generate_one(FAMILIES["gemv"], 0, 0)
    with pytest.raises(ValueError, match="torch2cuda tasks only"):
        measure_torch_tasks([c_task], tmp_path / "r.jsonl", trials=5, device=0, done=set())
    with pytest.raises(ValueError, match="positive integer"):
        measure_torch_tasks(_tasks(), tmp_path / "r.jsonl", trials=0, device=0, done=set())


def test_full_mode_without_a_gpu_says_how_to_fix_it(tmp_path):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(RuntimeError, match="compile_only=True"):
        measure_torch_tasks(_tasks(), tmp_path / "r.jsonl", trials=5, device=0, done=set())


def test_gpu_rows_attach_unchanged(tmp_path):
    """An ok row carries per-config timings and the eager speedup, validates as an
    ExecResult, and becomes one Measurement per config through `tasks attach`'s reader."""
    task = _tasks()[0]
    impl = task.implementations[0]
    run = _Run(
        tmp_path / "r.jsonl",
        tmp_path / "m",
        "full",
        "sm_90",
        "NVIDIA H200",
        {"torch": "x", "nvcc": "13.0"},
        salt=1,
    )
    configs = [
        ConfigResult(
            config=c.name,
            held_out=c.held_out,
            correct=True,
            max_abs_err=1e-7,
            timing=Timing.of([10.0, 11.0, 12.0]),
            eager_timing=Timing.of([20.0, 22.0]),
        )
        for c in task.configs
    ]
    p = Prebuilt("ok", "native", "built", 1.0)
    row = _gpu_row(run, task, impl, p, Status.OK, configs, "")
    run.write(row)
    back = ExecResult.model_validate(_rows(run.out)[0])
    assert back == row and back.speedup_vs_eager == pytest.approx(21.0 / 11.0)
    found = measurements_from_results(_rows(run.out), "2025-01-01")
    ms = found[(task.id, impl.id)]
    assert [m.config for m in ms] == [c.name for c in task.configs]
    assert ms[0].gpu == "NVIDIA H200" and ms[0].median_us == 11.0 and ms[0].trials == 3


# ---- GPU ------------------------------------------------------------------------------------


@pytest.mark.gpu
@needs_gpu
def test_gpu_measures_every_implementation_ok(tmp_path, home):
    tasks, out = _tasks(), tmp_path / "rows.jsonl"
    measure_torch_tasks(tasks, out, trials=20, device=0, done=set())
    rows = [ExecResult.model_validate(r) for r in _rows(out)]
    assert len(rows) == 6
    for r in rows:
        times = [c.timing.median_us if c.timing else None for c in r.configs]
        print(f"{r.candidate_id:18s} {r.status.value} {r.speedup_vs_eager} {r.wall_s:.2f}s {times}")
    bad = [f"{r.candidate_id}: {r.status.value} {r.feedback[:2]}" for r in rows if not r.ok]
    assert not bad, "\n".join(bad)
    for r in rows:
        assert r.mode == "full" and r.gpu and r.versions["torch"] and len(r.configs) == 4
        assert all(c.timing and c.eager_timing and c.timing.trials >= 5 for c in r.configs)
        assert r.speedup_vs_eager is not None


_CHILD = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from cudaperf.tasks.model import Task
    from cudaperf.execute.bulk.torch_tasks import ContextPoisoned, measure_torch_tasks
    task = Task.model_validate_json(Path(sys.argv[1]).read_text())
    try:
        measure_torch_tasks([task], Path(sys.argv[2]), trials=5, device=0, done=set())
    except ContextPoisoned as e:
        print("POISONED", e.impl_id)
        sys.exit(3)
    """
)


@pytest.mark.gpu
@needs_gpu
def test_gpu_cheats_fail_and_a_cuda_error_poisons(tmp_path, home):
    """In a child process (a CUDA error must not break this one): a lazy implementation that
    writes nothing must not pass on an earlier implementation's freed output, a slightly wrong
    one fails, and an illegal address gives a runtime_error row, then ContextPoisoned."""
    task = _tasks()[0]
    warp, block = task.implementations[1].code, task.implementations[2].code
    lazy = block.replace("self.lib.row_op(x, y, x.shape[0]", "self.lib.row_op(x, y, 0")
    # 1% of SCALE would stay inside the tolerance after log-softmax and softsign: shift the output
    wrong = warp.replace("yr[j] = post_op(", "yr[j] = 0.01f + post_op(")
    crash = warp.replace("float* yr = y +", "float* yr = (float*)0x10 +")
    assert lazy != block and wrong != warp and crash != warp
    task = _with_impls(task, ("lazy", lazy), ("wrong", wrong), ("crash", crash), ("after", warp))
    (tmp_path / "task.json").write_text(task.model_dump_json())
    out = tmp_path / "rows.jsonl"
    cmd = [sys.executable, "-c", _CHILD, str(tmp_path / "task.json"), str(out)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert p.returncode == 3 and "POISONED crash" in p.stdout, p.stdout + p.stderr
    by_id = {r["candidate_id"]: r for r in _rows(out)}
    print({k: (r["status"], r["feedback"][:1]) for k, r in by_id.items()})
    assert by_id["lazy"]["status"] == "wrong_output", by_id["lazy"]["feedback"]
    assert by_id["wrong"]["status"] == "wrong_output", by_id["wrong"]["feedback"]
    assert by_id["crash"]["status"] == "runtime_error"
    assert all(by_id[i.id]["status"] == "ok" for i in task.implementations[:3])
    assert "after" not in by_id and not Path(f"{out}.inflight").exists()  # left for a restart
