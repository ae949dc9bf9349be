"""`cudaperf data measure`: verify and time every implementation of a task set, in batches.

The evaluator (`cudaperf eval --implementations`) compiles and runs one implementation at a
time; this module measures a whole generated dataset on one machine with the same checks:

1. **Batched compile.** C→CUDA tasks are split round-robin over the GPUs, then into batches of
   `batch_tasks` tasks; one nvcc call compiles every implementation of a batch into one
   library (`source`, `build`: namespaced, bisected on errors, cached). The
   batches compile in a thread pool ahead of the GPU, which starts on the first one.
2. **References on the CPU.** A process pool makes each task's secret-seeded inputs and C
   reference outputs (`refs`) a few tasks ahead of the GPU (bounded in bytes),
   handed over as .npy files in a scratch folder (on /dev/shm when it has room).
3. **One runner per GPU** (`runner`, driven by `drive`): inputs are uploaded
   once per task and config; each implementation is checked on the device against the
   reference (the rule of `cudaperf.execute.c.reference.compare`), timed (L2 flushed per trial),
   cross-checked (wall clock, roofline) and checked again; a CUDA error restarts the runner.
4. **Rows.** One `ExecResult` JSON line per (task, implementation), appended and fsynced, so
   `cudaperf tasks attach` takes the file unchanged; a rerun skips pairs already measured
   (`rows`: keyed by the task's content and the implementation's code).
5. **PyTorch→CUDA tasks** go to `cudaperf.execute.bulk.torch_tasks.measure_torch_tasks`, per GPU
   after its C→CUDA share, in a child process (`torch_phase`).

`compile_only=True` (no GPU) only builds the batch libraries and writes `compiled` rows.
Settings: `BulkConfig` (`config`), which contains the evaluator's `EvalConfig`. Timings made
here are protocol `bulk-v1` of `cudaperf.tasks.measurements.PROTOCOLS` (what it checks, and
how that differs from the evaluator's `evaluator-v1`).
Differences from the evaluator, by design: inputs are input set 0 only (the re-check after
timing uses the same inputs, restored), 20 trials within a 50 ms budget per config by
default (not 100 within 2 s), and no CPU timing of the reference unless `cpu_trials > 0`.
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import os
import secrets
import shutil
import tempfile
import threading
import time
from dataclasses import asdict
from pathlib import Path

from cudaperf.execute.build import GpuInfo, detect_gpus, toolchain_versions
from cudaperf.execute.bulk.batch import (
    BatchBuild,
    Failure,
    build_batch,
    build_runtime,
    static_reject,
)
from cudaperf.execute.bulk.config import BulkConfig
from cudaperf.execute.bulk.drive import ByteBudget, GpuDriver, ShardJob, drive_shard
from cudaperf.execute.bulk.refs import RefPool, pick_scratch, task_bytes
from cudaperf.execute.bulk.rows import (
    Output,
    Progress,
    RowContext,
    done_pairs,
    make_row,
    read_rows,
)
from cudaperf.execute.bulk.torch_phase import rows_from, torch_phase
from cudaperf.execute.bulk.torch_tasks import measure_torch_tasks
from cudaperf.execute.config import EvalConfig
from cudaperf.execute.types import Status
from cudaperf.tasks.model import Task, TaskKind

log = logging.getLogger(__name__)

__all__ = ["MeasureError", "estimate_gpu_seconds", "measure_tasks"]


class MeasureError(RuntimeError):
    """The run cannot go on (no GPU, runner does not start, ...); the message says why."""


def _visible_gpus(wanted: tuple[int, ...] | None) -> list[GpuInfo]:
    found = detect_gpus()
    if wanted is not None:
        missing = set(wanted) - {g.index for g in found}
        if missing:
            raise MeasureError(
                f"GPU(s) {sorted(missing)} are not visible (nvidia-smi lists "
                f"{[g.index for g in found]}); pass --gpus all or existing indices"
            )
        found = [g for g in found if g.index in wanted]
    return found


def measure_tasks(
    tasks: list[Task],
    config: BulkConfig,
    on_progress=None,
    *,
    gpus: list[GpuInfo] | None = None,
    builder=build_batch,
    runtime_lib: str | None = None,
    measure_torch=measure_torch_tasks,
) -> dict:
    """Measure every implementation of `tasks` not measured yet; returns the summary.
    `gpus`, `builder`, `runtime_lib` and `measure_torch` replace GPU detection, the batch
    compiler, the runtime library and the PyTorch→CUDA measurer (tests use them to run the whole
    pipeline on a CPU with fake libraries)."""
    t0 = time.monotonic()
    ecfg = config.eval
    if gpus is None:
        gpus = [] if config.compile_only else _visible_gpus(ecfg.gpus)
    if not config.compile_only and not gpus:
        raise MeasureError(
            "no NVIDIA GPU is visible (nvidia-smi lists none): `data measure` needs a GPU to "
            "verify and time implementations; use --compile-only to only build them here"
        )
    if len({g.name for g in gpus}) > 1:
        raise MeasureError(
            f"the GPUs are of different models ({sorted({g.name for g in gpus})}); rows name one "
            "GPU model, so pass --gpus with indices of one model"
        )
    for tool in (ecfg.nvcc,) if config.compile_only else (ecfg.nvcc, ecfg.gcc):
        if shutil.which(tool) is None:
            raise MeasureError(f"{tool} is not on PATH; install it or pass its path")
    mode = "compile-only" if config.compile_only else "full"
    arch = ecfg.arch or (gpus[0].arch if gpus else "sm_90")
    driver_v = gpus[0].driver if gpus and mode == "full" else ""
    versions = toolchain_versions(ecfg, driver_v)
    env = RowContext(mode, gpus[0].name if mode == "full" else "", arch, versions)
    done = done_pairs(read_rows(config.out), tasks, mode, env.gpu)
    c_tasks = [t for t in tasks if t.kind is TaskKind.C2CUDA]
    torch_tasks = [t for t in tasks if t.kind is TaskKind.TORCH2CUDA]
    todo = [
        (t, i) for t in c_tasks + torch_tasks for i in t.implementations if (t.id, i.id) not in done
    ]
    progress = Progress(len(todo), len({t.id for t, _ in todo}))

    progress.listener = on_progress
    offset = config.out.stat().st_size if config.out.exists() else 0
    out = Output(config.out, progress.row)
    stats: dict = {"skipped_done": len(done), "notes": []}
    salt = ecfg.seed_salt if ecfg.seed_salt is not None else secrets.randbits(62)
    torch_todo = [
        t for t in torch_tasks if any((t.id, i.id) not in done for i in t.implementations)
    ]
    try:
        _measure_c(
            c_tasks,
            done,
            config,
            ecfg,
            env,
            gpus,
            out,
            progress,
            stats,
            builder,
            runtime_lib,
            torch_todo,
            salt,
            measure_torch,
        )
    finally:
        out.close()
    if config.compile_only and torch_todo:  # full runs do this per GPU, after its C share
        torch_phase(torch_todo, config, 0, done, progress, stats, True, salt, arch, measure_torch)
    return _summary(tasks, config, env, stats, time.monotonic() - t0, offset)


def _batches(tasks: list[Task], ngpu: int, size: int) -> list[tuple[int, list[Task]]]:
    """(gpu slot, tasks) batches: tasks round-robin over GPUs, then chunks, interleaved so every
    GPU's first batch compiles first."""
    per = [
        [s[i : i + size] for i in range(0, len(s), size)]
        for s in (tasks[g::ngpu] for g in range(ngpu))
    ]
    out = []
    for j in range(max((len(p) for p in per), default=0)):
        out += [(g, p[j]) for g, p in enumerate(per) if j < len(p)]
    return out


def _measure_c(
    c_tasks,
    done,
    config,
    ecfg,
    env,
    gpus,
    out,
    progress,
    stats,
    builder,
    runtime_lib,
    torch_tasks,
    salt,
    measure_torch,
) -> None:
    ngpu = max(len(gpus), 1)
    pool = cf.ThreadPoolExecutor(
        config.workers(), thread_name_prefix="nvcc", initializer=_lower_priority
    )
    shard_jobs: list[list[ShardJob]] = [[] for _ in range(ngpu)]
    builds: list[cf.Future] = []
    rejected = 0
    for g, batch in _batches(c_tasks, ngpu, config.batch_tasks):
        if all((t.id, i.id) in done for t in batch for i in t.implementations):
            continue
        pairs, pending = [], []
        for t in batch:
            todo = []
            for impl in t.implementations:
                fail = static_reject(impl)
                if fail is None:
                    pairs.append((t, impl))
                    if (t.id, impl.id) not in done:
                        todo.append(impl)
                elif (t.id, impl.id) not in done:
                    rejected += 1
                    out.put(
                        make_row(
                            env, t, impl, fail.status, message=fail.message, findings=fail.findings
                        )
                    )
            pending.append((t, todo))
        fut = pool.submit(_safe_build, builder, pairs, env.arch, ecfg, config.batch_timeout_s)
        builds.append(fut)
        shard_jobs[g] += [ShardJob(t, todo, fut, task_bytes(t)) for t, todo in pending if todo]
    stats["batches"], stats["static_rejects"] = len(builds), rejected
    try:
        if config.compile_only:
            _compile_only([j for s in shard_jobs for j in s], builds, env, out, progress)
        else:
            _run_gpus(
                shard_jobs,
                config,
                ecfg,
                env,
                gpus,
                out,
                progress,
                stats,
                runtime_lib,
                torch_tasks,
                done,
                salt,
                measure_torch,
            )
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
        finished = [
            f.result() for f in builds if f.done() and not f.cancelled() and f.exception() is None
        ]
        stats["nvcc_calls"] = sum(b.nvcc_calls for b in finished)
        stats["nvcc_seconds"] = sum(b.compile_seconds for b in finished)
        stats["batch_seconds"] = [round(b.seconds, 1) for b in finished]


def _safe_build(builder, pairs, arch: str, ecfg: EvalConfig, timeout: float) -> BatchBuild:
    """The builder's result; an exception (ours, not the code's) fails the batch as infra."""
    try:
        return builder(pairs, arch, ecfg, timeout)
    except Exception as e:  # noqa: BLE001 - becomes every pair's infra_error row
        log.exception("building a batch failed")
        msg = f"the batch build raised {type(e).__name__}: {e}"
        return BatchBuild(
            failures={(t.id, i.id): Failure(Status.INFRA_ERROR, msg) for t, i in pairs}
        )


def _lower_priority() -> None:
    # The GPU runner's timing thread must not wait behind nvcc and the references.
    try:
        os.nice(5)
    except OSError:
        pass


def _compile_only(
    jobs: list[ShardJob], builds: list[cf.Future], env: RowContext, out: Output, progress
) -> None:
    """Rows in the order the batches were submitted (which is the order they finish in)."""
    for fut in builds:
        for job in (j for j in jobs if j.batch is fut):
            _write_task(job, fut.result(), None, {}, env, out)
            progress.task()


def _write_task(
    job: ShardJob,
    build: BatchBuild,
    prep: dict | None,
    outcomes: dict,
    env: RowContext,
    out: Output,
) -> None:
    t = job.task
    for impl in job.impls:
        key = (t.id, impl.id)
        f = build.failures.get(key)
        if f is not None:
            row = make_row(env, t, impl, f.status, message=f.message, compile_log=f.log)
        elif key not in build.units:
            row = make_row(env, t, impl, Status.INFRA_ERROR, message="lost by the batch compiler")
        elif prep is None:
            row = make_row(env, t, impl, Status.COMPILED, compile_log=build.logs.get(key, ""))
        elif not prep.get("ok"):
            row = make_row(
                env,
                t,
                impl,
                Status.INFRA_ERROR,
                message=prep.get("message", ""),
                compile_log=prep.get("log", ""),
            )
        elif impl.id in outcomes:
            o = outcomes[impl.id]
            row = make_row(
                env,
                t,
                impl,
                o.status,
                configs=o.configs,
                message=o.message,
                compile_log=build.logs.get(key, ""),
                wall_s=o.seconds,
            )
        else:
            row = make_row(env, t, impl, Status.INFRA_ERROR, message="the GPU runner skipped it")
        out.put(row)


def _run_gpus(
    shard_jobs,
    config,
    ecfg,
    env,
    gpus,
    out,
    progress,
    stats,
    runtime_lib,
    torch_tasks,
    done,
    salt,
    measure_torch,
) -> None:
    try:
        runtime_lib = runtime_lib or build_runtime(env.arch, ecfg)
    except RuntimeError as e:
        raise MeasureError(str(e)) from e
    need = max((j.nbytes for s in shard_jobs for j in s), default=0)
    base = pick_scratch(2 * need, config.scratch)
    _remove_stale_scratch(base)
    scratch = Path(tempfile.mkdtemp(prefix=f"cudaperf-measure-{os.getpid()}-", dir=base))
    limit = int(config.max_inflight_gb * 1e9)
    limit = min(limit, int(0.8 * shutil.disk_usage(scratch).free)) or limit
    settings = {
        "trials": ecfg.trials,
        "warmup": ecfg.warmup,
        "budget_s": ecfg.time_budget_s,
        "check_after": ecfg.check_after_timing,
        "max_bandwidth_gbs": ecfg.max_bandwidth_gbs,
    }
    eval_fields = {"cache_dir": str(ecfg.cache_dir), "gcc": ecfg.gcc, "compile_only": True}
    refs = RefPool(config.workers())
    budget = ByteBudget(limit)
    prefetch = config.prefetch or config.workers() // len(gpus) + 2
    drivers = [
        GpuDriver(
            g.index,
            runtime_lib,
            settings,
            config.silence_timeout_s,
            config.out.with_name(f"{config.out.stem}.runner-gpu{g.index}.log"),
            config.runner_max_tasks,
        )
        for g in gpus
    ]
    stats.update(scratch=str(scratch), inflight_limit_gb=limit / 1e9, prefetch=prefetch)
    errors: list[BaseException] = []

    def submit_prep(task: Task, folder: str):
        return refs.submit(task.model_dump_json(), salt, folder, eval_fields, config.cpu_trials)

    def on_task(job, build, prep, outcomes):
        _write_task(job, build, prep, outcomes, env, out)
        progress.task()

    def gpu_thread(i: int) -> None:
        try:
            drive_shard(drivers[i], shard_jobs[i], submit_prep, scratch, budget, prefetch, on_task)
            drivers[i].stop()
            mine = torch_tasks[i :: len(gpus)]
            if mine:
                torch_phase(
                    mine,
                    config,
                    gpus[i].index,
                    done,
                    progress,
                    stats,
                    False,
                    salt,
                    env.arch,
                    measure_torch,
                )
        except BaseException as e:  # noqa: BLE001 - re-raised by the main thread
            errors.append(e)

    threads = [
        threading.Thread(target=gpu_thread, args=(i,), name=f"gpu{g.index}", daemon=True)
        for i, g in enumerate(gpus)
    ]
    try:
        for th in threads:
            th.start()
        for th in threads:
            while th.is_alive():
                th.join(timeout=1.0)
    finally:
        for d in drivers:
            d.stop(kill=True)
        refs.shutdown()
        shutil.rmtree(scratch, ignore_errors=True)
        stats["runner_busy_s"] = {str(d.gpu): round(d.busy_s, 1) for d in drivers}
        stats["runner_starts"] = {str(d.gpu): d.starts for d in drivers}
        stats["device"] = {str(d.gpu): d.device_name for d in drivers}
    if errors:
        raise MeasureError(str(errors[0])) from errors[0]


def _remove_stale_scratch(base: Path) -> None:
    """Scratch folders of earlier runs that were killed (their process is gone)."""
    for d in base.glob("cudaperf-measure-*"):
        try:
            pid = int(d.name.split("-")[2])
            os.kill(pid, 0)
        except ProcessLookupError:
            log.warning("removing the scratch folder of a dead run: %s", d)
            shutil.rmtree(d, ignore_errors=True)
        except (ValueError, IndexError, PermissionError, OSError):
            continue


def _summary(tasks, config, env, stats, wall_s: float, offset: int) -> dict:
    """Counts from the results file itself: rows this run appended, and the latest row of
    every selected pair."""
    wanted = {(t.id, i.id): t.kind.value for t in tasks for i in t.implementations}
    latest: dict = {}
    for r in read_rows(config.out):
        k = (r.get("task_id"), r.get("candidate_id"))
        if k in wanted and r.get("mode") == env.mode:
            latest[k] = r.get("status")
    by_kind: dict[str, dict[str, int]] = {}
    for k, st in latest.items():
        d = by_kind.setdefault(wanted[k], {})
        d[st] = d.get(st, 0) + 1
    new = [
        r
        for r in rows_from(config.out, offset)
        if (r.get("task_id"), r.get("candidate_id")) in wanted
    ]
    this_run: dict[str, int] = {}
    for r in new:
        this_run[r.get("status")] = this_run.get(r.get("status"), 0) + 1
    busy = sum(stats.get("runner_busy_s", {}).values())
    c_run = sum(1 for r in new if wanted[(r["task_id"], r["candidate_id"])] == "c2cuda")
    return {
        "mode": env.mode,
        "gpu": env.gpu,
        "arch": env.arch,
        "versions": env.versions,
        "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
        "implementations_selected": len(wanted),
        "implementations_measured_this_run": len(new),
        "statuses_this_run": this_run,
        "statuses_in_file": by_kind,
        "wall_s": round(wall_s, 1),
        "impls_per_min": round(len(new) / wall_s * 60, 1) if wall_s > 0 else None,
        "gpu_process_s_per_impl": round(busy / c_run, 4) if c_run and busy else None,
        "settings": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(config).items()},
        **stats,
    }


def estimate_gpu_seconds(tasks: list[Task], config: BulkConfig) -> dict:
    """A rough model of the GPU runner's time, for planning (not a measurement): per task and
    config an upload at 8 GB/s; per implementation and config 3 device copies of the inputs,
    2 compares, 2 checked calls, warm-up, and trials of (L2 flush 40 us + syncs 30 us + call),
    with a call taken as 3x the time to move its arrays at 3 TB/s (at least 10 us), trials
    capped by the time budget, plus 2 ms of Python and launch overhead."""
    total, impls = 0.0, 0
    for t in tasks:
        if t.kind is not TaskKind.C2CUDA:
            continue
        n = len(t.implementations)
        impls += n
        for cfg in t.configs:
            arr = [(p, _nbytes(p, cfg)) for p in t.signature if p.is_array]
            moved = sum(b for _, b in arr)
            call = max(10e-6, 3 * moved / 3e12)
            trials = min(
                config.eval.trials, max(5, int(config.eval.time_budget_s / (call + 70e-6)))
            )
            per_impl = 3 * moved / 1.5e12 + 2 * moved / 2e12 + (2 + config.eval.warmup) * call
            per_impl += trials * (call + 70e-6) + 2e-3
            total += moved / 8e9 + n * per_impl
    return {
        "seconds": total,
        "implementations": impls,
        "ms_per_impl": 1e3 * total / impls if impls else 0.0,
    }


def _nbytes(p, cfg) -> int:
    import numpy as np

    from cudaperf.tasks.model import eval_length

    return eval_length(p.length or "0", cfg.sizes) * np.dtype(p.dtype).itemsize
