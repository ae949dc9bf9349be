"""Batched measurement of the dataset's PyTorch→CUDA implementations in one process per GPU.

The per-candidate evaluator (a fresh worker job per candidate, 5 correctness trials on
CPU-generated inputs, a profiler pass, eager and torch.compile baselines) is right for a model's
samples but too slow to re-measure ~3,500 dataset implementations × 4 configs in minutes.
`measure_torch_tasks` keeps the evaluator's checks and reuses its code, and drops the rest:

1. **Prebuild** (CPU, pipelined): a process pool of `os.cpu_count()` workers runs the static
   anti-hacking checks (`torch_static`; a fatal finding gives `rejected`) and builds every
   native-form implementation into `load_cuda`'s content-addressed cache (the default one, which
   `ModelNew`'s `load_cuda(CUDA_SRC)` then finds), exactly as the evaluator's build pool does
   (`torch_build.prebuild_torch_candidate`). Jobs are queued in task order, so the GPU loop
   starts on the first task while later tasks still compile.
2. **Per task and config** (GPU): the reference `Model` is built once under the evaluator's
   weight seed, and eager PyTorch is timed once (`eager_timing`, for `speedup_vs_eager`).
3. **Per implementation and config**: `ModelNew` under the same weight seed (so its weights
   match), then `torch_runtime`'s correctness trials: trial 0 runs the candidate before the
   reference exists, trial 1 writes fresh values into the *same* input buffers (a cache keyed
   on pointers returns stale data), inputs are compared with clones (mutation is rejected), and
   outputs are compared with `compare_outputs` under the task tolerance. Then `time_forward`
   (L2 flushed, device-wide synchronisation, CUDA events, wall clock), the timer-integrity
   check, and `sanity`'s wall-clock escape and roofline checks. TF32 is off on both sides.

Differences from the evaluator, on purpose (inputs are drawn on the GPU in both: the task's
`get_inputs()` runs under `torch.device("cuda")`): each implementation
gets its own input seeds (derived from the secret salt and its hash), so no earlier
implementation's freed output can hold the right answer; 2 correctness trials instead of 5;
a config's timing stops early after `budget_s` (at least 5 trials); the first failing config
ends an implementation (later configs are not run); no profiler pass (the share of GPU time in
the candidate's own kernels is not checked) and no torch.compile baseline.

Guaranteed: one JSON line per (task, implementation) not in `done`, shaped like
`ExecResult.model_dump(mode="json")` (so `cudaperf tasks attach` reads it), flushed and fsynced;
`ok` only when every config was checked and timed on the GPU. A CUDA error (illegal address,
device-side assert, out of memory) writes a `runtime_error` row for that implementation and then
raises `ContextPoisoned`: the caller restarts the process and resumes with `done`. A process
that dies or hangs mid-implementation (segfault, watchdog kill) leaves a marker file
(`<out>.inflight`); the next call writes a `runtime_error` row for that implementation instead
of running it again. Not guaranteed: a hanging kernel is not interrupted here — the caller
needs a watchdog. Only the native form (`load_cuda`) is measured; others get `infra_error`.

Caller contract (one process per GPU; `cudaperf data measure` is the intended caller):

    done = {(r["task_id"], r["candidate_id"]) for r in read_results(out)} if out.exists() else set()
    measure_torch_tasks(tasks, out, trials=20, device=0, done=done, jobs=os.cpu_count() // n_gpus)

and after `ContextPoisoned`, a watchdog kill or a crash, run it again in a *fresh* process (the
CUDA context of this one is unusable). Processes on several GPUs should split the CPU cores
(`jobs`) and, when they append to one file, pass distinct `inflight_path`s.

Part of `cudaperf.execute.bulk` (bulk measurement, a mode of the evaluator; it moved here from
`datagen/measure`); torch is imported lazily, in the GPU path only, so
the build workers stay light.
"""

from __future__ import annotations

import hashlib
import json
import logging
import multiprocessing
import os
import secrets
import time
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cudaperf.execute.build import detect_gpus, first_error, toolchain_versions
from cudaperf.execute.config import EvalConfig
from cudaperf.execute.evaluator import reference_names, torch_speedups
from cudaperf.execute.feedback import status_feedback, timing_feedback
from cudaperf.execute.pytorch import build as torch_build
from cudaperf.execute.pytorch import static as torch_static
from cudaperf.execute.results import truncate
from cudaperf.execute.sanity import escape_message, roofline_message
from cudaperf.execute.types import Candidate, ConfigResult, ExecResult, Severity, Status, Timing
from cudaperf.jsonl import open_append
from cudaperf.procpool import stop, worker_init
from cudaperf.tasks.measurements import BULK_PROTOCOL
from cudaperf.tasks.model import Implementation, InputConfig, Task, TaskKind

__all__ = ["ContextPoisoned", "Prebuilt", "measure_torch_tasks", "prebuild"]

log = logging.getLogger(__name__)

_LOG_CHARS = 4000  # compile and runtime logs kept per row (the evaluator's default)


class ContextPoisoned(RuntimeError):
    """A CUDA error broke this process's context. Its row is written; restart and resume."""

    def __init__(self, task_id: str, impl_id: str, message: str) -> None:
        super().__init__(f"{task_id}:{impl_id}: {message} (restart the process and resume)")
        self.task_id, self.impl_id, self.message = task_id, impl_id, message


@dataclass(frozen=True)
class Prebuilt:
    """Outcome of the CPU steps for one implementation (static checks, then the build)."""

    status: str  # "ok" (built, ready to run) or the final Status value
    form: str  # "native", "load_inline" or "unknown"
    log: str  # compiler output, truncated
    seconds: float  # wall time of checks + build in the pool worker
    findings: tuple[str, ...] = ()  # torch_static check ids that fired
    feedback: tuple[str, ...] = ()  # messages of a final status
    notes: tuple[str, ...] = ()  # non-fatal static findings


def _prebuild_one(code: str, ref_names: set[str], arch: str, timeout_s: float) -> Prebuilt:
    """Pool worker: static checks, then the native build (into load_cuda's default cache)."""
    t0 = time.perf_counter()
    found = torch_static.check_torch_candidate(code, ref_names)
    ids = tuple(f.rule for f in found)
    fatal = tuple(
        f"rejected: the candidate {f.message}" for f in found if f.severity is Severity.ERROR
    )
    notes = tuple(
        f"note: the candidate {f.message}" for f in found if f.severity is not Severity.ERROR
    )
    form = torch_build.candidate_form(code)

    def done(status: Status, log_: str = "", fb: tuple[str, ...] = ()) -> Prebuilt:
        dt = time.perf_counter() - t0
        return Prebuilt(status.value, form, truncate(log_, _LOG_CHARS), dt, ids, fb, notes)

    if fatal:
        return done(Status.REJECTED, fb=fatal)
    if form != "native":
        fb = f"measure_torch measures the native form (load_cuda) only; this one is {form!r}"
        return done(Status.INFRA_ERROR, fb=(fb + "; evaluate it with `cudaperf eval`",))
    cache = Path.home() / ".cache" / "cudaperf"  # only load_inline builds use it
    b = torch_build.prebuild_torch_candidate(code, arch, cache, timeout_s)
    if b.timed_out:
        return done(Status.TIMEOUT, b.log, (f"compilation took longer than {timeout_s:.0f} s",))
    if not b.ok:
        return done(Status.COMPILE_ERROR, b.log, (first_error(b.log),))
    return Prebuilt(
        "ok", form, truncate(b.log, _LOG_CHARS), time.perf_counter() - t0, ids, (), notes
    )


def prebuild(
    tasks: list[Task],
    done: set[tuple[str, str]],
    arch: str,
    jobs: int | None = None,
    timeout_s: float = 180.0,
) -> tuple[ProcessPoolExecutor, dict[tuple[str, str], Future]]:
    """Queue checks + builds of every implementation not in `done`, in task order.

    Returns the pool (the caller ends it with `procpool.stop`) and (task id, impl id) →
    Future[Prebuilt].
    Workers are spawned, not forked: the caller may hold a CUDA context.
    """
    ctx = multiprocessing.get_context("spawn")
    # niced: the GPU loop's timing thread comes first (a preempted trial inflates its wall time)
    pool = ProcessPoolExecutor(
        max_workers=jobs or os.cpu_count() or 1,
        mp_context=ctx,
        initializer=worker_init,
        initargs=(5,),
    )
    futures = {}
    for t in tasks:
        names = reference_names(t.source)
        for i in t.implementations:
            if (t.id, i.id) not in done:
                futures[(t.id, i.id)] = pool.submit(_prebuild_one, i.code, names, arch, timeout_s)
    return pool, futures


@dataclass
class _Run:
    """Settings and environment of one measuring call."""

    out: Path
    inflight: Path
    mode: str  # "full" or "compile-only"
    arch: str
    gpu: str
    versions: dict[str, str]
    salt: int = field(repr=False)
    knobs: dict[str, Any] = field(default_factory=dict)  # trials, warmup, budget_s, ...

    def write(self, row: ExecResult) -> None:
        line = json.dumps(row.model_dump(mode="json")) + "\n"
        with open_append(self.out) as fh:
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())

    def mark(self, task_id: str, impl_id: str) -> None:
        tmp = self.inflight.with_name(self.inflight.name + ".tmp")
        tmp.write_text(json.dumps([task_id, impl_id]))
        os.replace(tmp, self.inflight)

    def row(self, task: Task, impl: Implementation, status: Status, **kw) -> ExecResult:
        return ExecResult(
            status=status,
            mode=self.mode,
            task_id=task.id,  # type: ignore[arg-type]
            candidate_hash=Candidate(code=impl.code).hash,
            candidate_id=impl.id,
            gpu=self.gpu,
            arch=self.arch,
            versions=self.versions,
            protocol=BULK_PROTOCOL,
            **kw,
        )


def _prebuilt_row(run: _Run, task: Task, impl: Implementation, p: Prebuilt) -> ExecResult:
    """The final row of an implementation that the CPU steps finished (or compile-only)."""
    status = Status.COMPILED if p.status == "ok" else Status(p.status)
    fb = list(p.feedback)
    if status is Status.COMPILED:
        fb = ["compile-only: nothing was run, checked or timed", *p.notes]
    return run.row(
        task,
        impl,
        status,
        form=p.form,
        compile_log=p.log,
        feedback=fb,
        findings=list(p.findings),
        wall_s=p.seconds,
    )


def _recover_inflight(run: _Run, tasks: list[Task], done: set[tuple[str, str]]) -> None:
    """A marker left by a process that died mid-implementation becomes that one's row."""
    if not run.inflight.is_file():
        return
    try:
        task_id, impl_id = json.loads(run.inflight.read_text())
    except (ValueError, TypeError):
        log.warning("ignoring unreadable marker %s", run.inflight)
        run.inflight.unlink(missing_ok=True)
        return
    found = [(t, i) for t in tasks if t.id == task_id for i in t.implementations if i.id == impl_id]
    if found and (task_id, impl_id) not in done:
        msg = "the measuring process died or was killed while this implementation ran"
        log.warning("%s:%s: %s; recording runtime_error", task_id, impl_id, msg)
        run.write(
            run.row(
                *found[0], Status.RUNTIME_ERROR, runtime_log=msg, feedback=[f"runtime error: {msg}"]
            )
        )
        done.add((task_id, impl_id))
    run.inflight.unlink(missing_ok=True)


def measure_torch_tasks(
    tasks: list[Task],
    out_path: Path,
    *,
    trials: int = 20,
    device: int = 0,
    done: set[tuple[str, str]],
    progress: Callable[[str], None] | None = None,
    compile_only: bool = False,
    warmup: int = 2,
    budget_s: float = 0.25,
    correctness_trials: int = 2,
    salt: int | None = None,
    arch: str | None = None,
    jobs: int | None = None,
    inflight_path: Path | None = None,
) -> None:
    """Measure every (task, implementation) not in `done`; append one ExecResult line each.

    trials: timed trials per config (stops early after `budget_s` seconds of them, at >= 5 trials).
    device: the CUDA device index (this process sets it as current).
    done: (task id, implementation id) pairs to skip; pairs measured here are added to it.
    progress: called with the task id after each task.
    compile_only: no GPU: static checks and builds only; rows are `compiled` (mode
        "compile-only", wall_s = check + build seconds) or the failure.
    salt: secret input-seed salt (default: random). arch: nvcc arch (default: the GPU's,
        sm_90 when compile-only). jobs: build processes (default: os.cpu_count()).
    inflight_path: the crash marker (default `<out_path>.inflight`); processes that append to
        one out_path concurrently must pass distinct ones.
    Raises ContextPoisoned after a CUDA error (its row written), ValueError for bad arguments
    or a task that is not torch2cuda, RuntimeError when full mode finds no CUDA device.
    """
    if not isinstance(trials, int) or trials < 1:
        raise ValueError(f"trials={trials!r}; use a positive integer (20 for the dataset)")
    if correctness_trials < 2:
        raise ValueError(
            f"correctness_trials={correctness_trials}; use >= 2 (trial 1 reuses buffers)"
        )
    bad = [t.id for t in tasks if t.kind is not TaskKind.TORCH2CUDA]
    if bad:
        raise ValueError(f"measure_torch_tasks takes torch2cuda tasks only; got {bad[:5]}")
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    run = _Run(
        out=out_path,
        inflight=Path(inflight_path or f"{out_path}.inflight"),
        mode="compile-only" if compile_only else "full",
        arch=arch or "sm_90",
        gpu="",
        versions={},
        salt=salt if salt is not None else secrets.randbits(62),
        knobs={
            "trials": trials,
            "warmup": warmup,
            "budget_s": budget_s,
            "correctness_trials": correctness_trials,
            "normwise_rtol": EvalConfig().normwise_rtol,
            "max_bandwidth_gbs": EvalConfig().max_bandwidth_gbs,
        },
    )
    gpu = None if compile_only else _Gpu(device, arch)  # imports torch; fails loudly
    drivers = [g.driver for g in detect_gpus()] if gpu else []
    run.versions = toolchain_versions(EvalConfig(), drivers[0] if drivers else "")
    if gpu is not None:
        run.gpu, run.arch, run.versions["torch"] = gpu.name, gpu.arch, gpu.torch.__version__
    _recover_inflight(run, tasks, done)
    pool, futures = prebuild(tasks, done, run.arch, jobs)
    try:
        for task in tasks:
            _measure_task(run, task, futures, done, gpu)
            if progress:
                progress(task.id)
    finally:  # this runs in torch_phase's child: shutdown(wait=False) kept it from exiting
        stop(pool)


def _measure_task(run: _Run, task: Task, futures: dict, done: set, gpu) -> None:
    """All pending implementations of one task; the GPU cases live as long as the task."""
    cases: dict[str, Any] = {}
    try:
        for impl in task.implementations:
            key = (task.id, impl.id)
            if key in done:
                continue
            p = _prebuilt(futures[key])
            if p.status != "ok" or gpu is None:
                run.write(_prebuilt_row(run, task, impl, p))
                done.add(key)
                continue
            run.mark(*key)
            t0 = time.monotonic()
            status, configs, message, poisoned = gpu.measure_impl(run, task, impl, cases)
            row = _gpu_row(run, task, impl, p, status, configs, message)
            run.write(row.model_copy(update={"wall_s": p.seconds + time.monotonic() - t0}))
            done.add(key)
            run.inflight.unlink(missing_ok=True)
            if poisoned:
                raise ContextPoisoned(task.id, impl.id, message)
    finally:
        cases.clear()


def _prebuilt(fut: Future) -> Prebuilt:
    """The pool's result; a crashed pool is raised (every later build would be lost too)."""
    try:
        return fut.result()
    except BrokenProcessPool:
        raise
    except Exception as e:  # noqa: BLE001 - one implementation's build step failed oddly
        msg = f"the build step raised {type(e).__name__}: {e}"
        return Prebuilt(Status.INFRA_ERROR.value, "", truncate(msg, _LOG_CHARS), 0.0, (), (msg,))


def _gpu_row(run, task, impl, p: Prebuilt, status: Status, configs, message: str) -> ExecResult:
    fb = status_feedback(status, configs, message)
    kw: dict[str, Any] = {}
    if status is Status.OK:
        fb += timing_feedback(configs)
        kw = torch_speedups(configs)
    return run.row(
        task,
        impl,
        status,
        configs=configs,
        form=p.form,
        compile_log=p.log,
        runtime_log=truncate(message, _LOG_CHARS),
        feedback=fb + list(p.notes),
        findings=list(p.findings),
        **kw,
    )


def _impl_salt(salt: int, code: str) -> int:
    """Per-implementation input salt: no two implementations see the same input values."""
    h = hashlib.sha256(f"{salt}:{Candidate(code=code).hash}".encode()).digest()
    return int.from_bytes(h[:8], "little") & ((1 << 62) - 1)


def _config_result(cfg, **kw) -> ConfigResult:
    return ConfigResult(config=cfg.name, held_out=cfg.held_out, **kw)


class _GpuInputs:
    """A task module whose `get_inputs()` allocates on the GPU: same seeds, no host copies."""

    def __init__(self, mod, device) -> None:
        self._mod, self._device = mod, device

    def get_inputs(self):
        import torch

        with torch.device(self._device):
            return self._mod.get_inputs()


@dataclass
class _Case:
    """One config of one task on the GPU, shared by the task's implementations."""

    gen: _GpuInputs  # the task module (sizes applied), generating inputs on the GPU
    ref: Any  # the reference Model, on the GPU, in eval mode
    init: list  # get_init_inputs()
    seed: int  # weight seed: Model and every ModelNew are built under it
    eager: Timing  # eager PyTorch time of the reference


class _Gpu:
    """The GPU half; torch and torch_runtime are imported when it is created."""

    def __init__(self, device: int, arch: str | None) -> None:
        import torch

        from cudaperf.execute.pytorch import runtime as torch_runtime

        if not torch.cuda.is_available():
            raise RuntimeError(
                f"no CUDA device visible to torch {torch.__version__} (CUDA build: "
                f"{torch.version.cuda}); measure on a GPU machine, or pass compile_only=True"
            )
        n = torch.cuda.device_count()
        if not 0 <= device < n:
            raise ValueError(
                f"device={device}, but torch sees {n} GPU(s); check CUDA_VISIBLE_DEVICES"
            )
        torch.cuda.set_device(device)
        torch_runtime._pin_precision()
        self.torch, self.rt, self.device = torch, torch_runtime, torch.device("cuda", device)
        major, minor = torch.cuda.get_device_capability(device)
        self.arch, self.name = f"sm_{major}{minor}", torch.cuda.get_device_name(device)
        if arch and arch != self.arch:  # ModelNew's load_cuda builds for the GPU's arch
            raise ValueError(f"arch={arch!r} but GPU {device} is {self.arch}; leave arch unset")

    def _case(self, run: _Run, task: Task, cfg: InputConfig, cases: dict) -> _Case:
        if cfg.name in cases:
            return cases[cfg.name]
        rt, torch, k = self.rt, self.torch, run.knobs
        try:
            mod = rt.load_module(task.source, f"cudaperf_ref_{cfg.name}", cfg.sizes)
            init, seed = mod.get_init_inputs(), rt._seed(run.salt, cfg, -1)
            torch.manual_seed(seed)
            ref = mod.Model(*init).cuda().eval()
            gen = _GpuInputs(mod, self.device)
            inputs = rt._fresh_inputs(gen, rt._seed(run.salt, cfg, 0), None)
            ev, _ = rt.time_forward(ref, inputs, k["warmup"], k["trials"], k["budget_s"])
        except Exception as e:  # noqa: BLE001 - the task's fault, unless the context broke
            _, restart = rt._classify(e)
            msg = f"the task's reference failed on config {cfg.name}: {type(e).__name__}: {e}"
            raise rt._Fail(Status.INFRA_ERROR, msg[:600], restart) from e
        cases[cfg.name] = _Case(gen, ref, init, seed, Timing.of(ev))
        return cases[cfg.name]

    def _one_config(self, run: _Run, task: Task, cfg, mod, salt: int, cases: dict):
        """Check, then time, one implementation on one config; raises torch_runtime._Fail."""
        rt, k = self.rt, run.knobs
        case = self._case(run, task, cfg, cases)
        self.torch.manual_seed(case.seed)
        new = mod.ModelNew(*case.init).cuda().eval()
        req = {"correctness_trials": k["correctness_trials"], "normwise_rtol": k["normwise_rtol"]}
        inputs, (mabs, mrel) = rt._check_trials(task, cfg, case.gen, case.ref, new, salt, req)
        ev, wall = rt.time_forward(new, inputs, k["warmup"], k["trials"], k["budget_s"])
        tampered = rt._timers_intact()
        if tampered:
            raise rt._Fail(Status.REJECTED, tampered)
        timing, wall_t = Timing.of(ev), Timing.of(wall)
        nbytes = sum(x.numel() * x.element_size() for x in inputs if hasattr(x, "element_size"))
        hack = escape_message(timing, wall_t) or roofline_message(
            nbytes, timing, k["max_bandwidth_gbs"]
        )
        if hack:
            raise rt._Fail(Status.REJECTED, hack)
        return _config_result(
            cfg,
            correct=True,
            max_abs_err=mabs,
            max_rel_err=mrel,
            timing=timing,
            eager_timing=case.eager,
        )

    def measure_impl(self, run: _Run, task: Task, impl: Implementation, cases: dict):
        """(status, config results, message, restart needed) of one implementation: restart
        after a CUDA error (broken context) or replaced timers (broken process)."""
        rt, configs = self.rt, []
        rt._pin_precision()  # again: an earlier implementation may have changed it
        salt = _impl_salt(run.salt, impl.code)
        mod = None
        for cfg in task.configs:
            try:
                if mod is None:
                    mod = rt.load_module(impl.code, f"cudaperf_cand_{_impl_hash(impl)}")
                configs.append(self._one_config(run, task, cfg, mod, salt, cases))
            except rt._Fail as f:
                configs.append(_config_result(cfg, correct=False, message=f.message))
                # Replaced timers stay replaced in this process: restart it like a CUDA error.
                return f.status, configs, f.message, f.restart or bool(rt._timers_intact())
            except Exception as e:  # noqa: BLE001 - the implementation's code raised
                status, restart = rt._classify(e)
                msg = f"{type(e).__name__}: {str(e)[:500]}"
                configs.append(_config_result(cfg, correct=False, message=msg))
                return status, configs, msg, restart
        return Status.OK, configs, "", False


def _impl_hash(impl: Implementation) -> str:
    return Candidate(code=impl.code).hash
