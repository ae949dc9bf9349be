"""The local backend: an nvcc thread pool ahead of one sandboxed worker per visible GPU.

Compilation (and static checks, and result-cache lookups) run in a pool of `compile_jobs`
threads, each driving an nvcc process; compiled jobs go to a queue that one thread per GPU
drains into its `WorkerHandle`. Results come back in completion order.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Protocol

from cudaperf.execute.config import EvalConfig
from cudaperf.execute.evaluator import Env, Evaluator, Prepared
from cudaperf.execute.sandbox import WorkerHandle
from cudaperf.execute.types import Candidate, ExecResult, Status
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
    log.exception("infra error on %s", job[0].id, exc_info=err)
    return ev.result(job[0], job[1], Status.INFRA_ERROR, time.monotonic(), feedback=[msg])


def prepare_cached(ev: Evaluator, task: Task, cand: Candidate) -> ExecResult | Prepared:
    """Result-cache lookup, then `Evaluator.prepare`; fresh early results are cached."""
    hit = ev.cache.get(ev.key(task, cand))
    if hit is not None:
        return hit.model_copy(update={"cached": True, "candidate_id": cand.id})
    res = ev.prepare(task, cand)
    if isinstance(res, ExecResult):
        ev.cache.put(res)
    return res


def run_prepared(ev: Evaluator, handle: WorkerHandle, p: Prepared) -> ExecResult:
    """One prepared job through one worker; the fresh result is cached."""
    reply = handle.request(ev.request(p), ev.timeout(p))
    res = ev.finish(p, reply)
    ev.cache.put(res)
    return res


class LocalBackend(Backend):
    """Compile pool + one worker process per GPU on this machine."""

    def __init__(self, config: EvalConfig, env: Env | None = None):
        self.evaluator = Evaluator(config, env)
        arch = self.evaluator.env.arch  # the prebuilds target it (TORCH_CUDA_ARCH_LIST)
        self.handles = [WorkerHandle(g, config, arch=arch) for g in self.evaluator.env.gpus]
        self.compile_jobs = config.compile_jobs or os.cpu_count() or 1

    def run(self, jobs: list[Job]) -> Iterator[tuple[int, ExecResult]]:
        ev = self.evaluator
        out: queue.Queue = queue.Queue()
        gpu_q: queue.Queue = queue.Queue()

        def route(i: int, fut: Future) -> None:
            try:
                r = fut.result()
            except Exception as e:  # noqa: BLE001 - becomes an INFRA_ERROR result
                r = infra_result(ev, jobs[i], e)
            (out if isinstance(r, ExecResult) else gpu_q).put((i, r))

        def gpu_loop(h: WorkerHandle) -> None:
            while (item := gpu_q.get()) is not None:
                i, p = item
                try:
                    out.put((i, run_prepared(ev, h, p)))
                except Exception as e:  # noqa: BLE001
                    out.put((i, infra_result(ev, jobs[i], e)))

        threads = [threading.Thread(target=gpu_loop, args=(h,), daemon=True) for h in self.handles]
        for t in threads:
            t.start()
        with ThreadPoolExecutor(self.compile_jobs, thread_name_prefix="nvcc") as pool:
            for i, (task, cand) in enumerate(jobs):
                pool.submit(prepare_cached, ev, task, cand).add_done_callback(
                    lambda f, i=i: route(i, f)
                )
            try:
                for _ in range(len(jobs)):
                    yield out.get()
            finally:
                for _ in threads:
                    gpu_q.put(None)
        for t in threads:
            t.join()

    def close(self) -> None:
        for h in self.handles:
            h.close()
