"""The local backend: an nvcc thread pool ahead of one sandboxed worker per visible GPU.

Compilation (and static checks, and result-cache lookups) run in a pool of `compile_jobs`
threads, each driving an nvcc process; compiled jobs go to a queue that one thread per GPU
drains into its `WorkerHandle`. Results come back in completion order.
"""

from __future__ import annotations

import logging
import os
import queue
import signal
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Protocol

from cudaperf.execute.build import ToolchainError
from cudaperf.execute.config import EvalConfig
from cudaperf.execute.evaluator import Env, Evaluator, Prepared
from cudaperf.execute.gate import QuietGate, busy
from cudaperf.execute.isolation.sandbox import WorkerHandle
from cudaperf.execute.types import Candidate, ExecResult, Status
from cudaperf.procpool import wait_get
from cudaperf.tasks.model import Task

log = logging.getLogger(__name__)

__all__ = ["Backend", "LocalBackend"]

Job = tuple[Task, Candidate]


class Backend(Protocol):
    """What a backend provides: an evaluator, `run` and `close`."""

    evaluator: Evaluator

    def run(self, jobs: list[Job]) -> Iterator[tuple[int, ExecResult]]:
        """Yield (job index, result) as each finishes; exactly one result per job."""
        ...

    def close(self) -> None:
        """Release workers."""
        ...


def infra_result(ev: Evaluator, job: Job, err: BaseException) -> ExecResult:
    msg = f"evaluator error: {type(err).__name__}: {err}"
    if isinstance(err, ToolchainError):  # the machine's fault, said in one line
        log.error("infra error on %s: %s", job[0].id, err)
    else:
        log.exception("infra error on %s", job[0].id, exc_info=err)
    return ev.result(job[0], job[1], Status.INFRA_ERROR, time.monotonic(), feedback=[msg])


def prepare_cached(
    ev: Evaluator,
    task: Task,
    cand: Candidate,
    stop: threading.Event | None = None,
    gate: QuietGate | None = None,
) -> ExecResult | Prepared | None:
    """Result-cache lookup, then `Evaluator.prepare` (a `busy` section of `gate`: no CPU
    baseline is timed while it compiles); fresh early results are cached.

    None when `stop` was set before or during the work: an interrupted build is no verdict
    on the code, so nothing is cached for it."""
    if stop is not None and stop.is_set():
        return None
    hit = ev.cache.get(ev.key(task, cand))
    if hit is not None:
        return hit.model_copy(update={"cached": True, "candidate_id": cand.id})
    with busy(gate):
        res = ev.prepare(task, cand)
    if stop is not None and stop.is_set():
        return None
    if isinstance(res, ExecResult):
        ev.cache.put(res)
    return res


def run_prepared(
    ev: Evaluator, handle: WorkerHandle, p: Prepared, stop: threading.Event | None = None
) -> ExecResult | None:
    """One prepared job through one worker; the fresh result is cached (None, uncached, when
    `stop` was set meanwhile: the worker was killed under it)."""
    reply = handle.request(ev.request(p), ev.timeout(p))
    if stop is not None and stop.is_set():
        return None
    res = ev.finish(p, reply)
    ev.cache.put(res)
    return res


def _kill_children_since(t0_ticks: int) -> int:
    """SIGKILL this process's children started at or after `t0_ticks` (clock ticks since
    boot, as /proc reports them), whole process groups for session leaders (nvcc runs in its
    own session). Linux only; returns how many were signalled."""
    me, n = os.getpid(), 0
    for d in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ppid, pgid, start = int(fields[1]), int(fields[2]), int(fields[19])
        if ppid != me or start < t0_ticks:
            continue
        try:
            if pgid == int(d):
                os.killpg(pgid, signal.SIGKILL)
            else:
                os.kill(int(d), signal.SIGKILL)
            n += 1
        except OSError:
            pass
    return n


def _now_ticks() -> int:
    """Clock ticks since boot (the unit of /proc/<pid>/stat's start time); 0 off Linux."""
    try:
        with open("/proc/uptime") as f:
            up = float(f.read().split()[0])
    except OSError:
        return 0
    return int(up * os.sysconf("SC_CLK_TCK")) - 1


class LocalBackend(Backend):
    """Compile pool + one worker process per GPU on this machine.

    Interruption (Ctrl-C in the consumer, or the consumer dropping the iterator): queued jobs
    are cancelled, the nvcc and worker processes this run started are killed, and `run`
    returns within about a second; results already yielded stand, nothing half-done is
    cached."""

    def __init__(self, config: EvalConfig, env: Env | None = None):
        self.evaluator = Evaluator(config, env)
        arch = self.evaluator.env.arch  # the prebuilds target it (TORCH_CUDA_ARCH_LIST)
        gpus = self.evaluator.env.gpus
        self.gate = QuietGate()  # CPU baselines are timed with this backend's compiles paused
        self.handles = [
            WorkerHandle(g, config, arch=arch, peers=len(gpus), gate=self.gate) for g in gpus
        ]
        self.compile_jobs = config.compile_jobs or os.cpu_count() or 1

    def run(self, jobs: list[Job]) -> Iterator[tuple[int, ExecResult]]:
        ev = self.evaluator
        out: queue.Queue = queue.Queue()
        gpu_q: queue.Queue = queue.Queue()
        stop = threading.Event()

        def route(i: int, fut: Future) -> None:
            if fut.cancelled() or stop.is_set():
                return
            try:
                r = fut.result()
            except Exception as e:  # noqa: BLE001 - becomes an INFRA_ERROR result
                r = None if stop.is_set() else infra_result(ev, jobs[i], e)
            if r is not None:
                (out if isinstance(r, ExecResult) else gpu_q).put((i, r))

        def gpu_loop(h: WorkerHandle) -> None:
            while (item := gpu_q.get()) is not None and not stop.is_set():
                i, p = item
                try:
                    r = run_prepared(ev, h, p, stop)
                except Exception as e:  # noqa: BLE001
                    r = None if stop.is_set() else infra_result(ev, jobs[i], e)
                if r is not None:
                    out.put((i, r))

        t0 = _now_ticks()
        threads = [threading.Thread(target=gpu_loop, args=(h,), daemon=True) for h in self.handles]
        for t in threads:
            t.start()
        pool = ThreadPoolExecutor(self.compile_jobs, thread_name_prefix="nvcc")
        finished = False
        try:
            for i, (task, cand) in enumerate(jobs):
                pool.submit(prepare_cached, ev, task, cand, stop, self.gate).add_done_callback(
                    lambda f, i=i: route(i, f)
                )
            for _ in range(len(jobs)):
                yield wait_get(out)  # timed: a SIGINT that reached a worker thread still stops it
            finished = True
        finally:
            if not finished:
                stop.set()
                pool.shutdown(wait=False, cancel_futures=True)
                killed = _kill_children_since(t0)
                for h in self.handles:
                    h.kill()
                log.info("interrupted: cancelled queued jobs, killed %d process(es)", killed)
            for _ in threads:
                gpu_q.put(None)
            if finished:
                pool.shutdown(wait=True)
                for t in threads:
                    t.join()

    def close(self) -> None:
        for h in self.handles:
            h.close()
