"""The local backend: an nvcc thread pool ahead of sandboxed workers on each visible GPU.

Compilation (and static checks, and result-cache lookups) run in a pool of `compile_jobs`
threads, each driving an nvcc process; compiled jobs go to a `Router` that one thread per
worker drains into its `WorkerHandle`. Results come back in completion order. Each GPU has
`EvalConfig.workers_per_gpu` workers (1 by default; more overlap C→CUDA checks, taking turns
for everything measured: `isolation.share`).

The router keeps a task's jobs on one worker (the worker that took the task's first job): a
worker draws a task's input sets and runs its reference once and keeps them between jobs
(`c.trusted`), so spreading one task over every worker would redraw it on each, and hold it
k times in host memory. A worker with nothing of its own to do takes the oldest job of the
most loaded worker when that one has `STEAL_AT` or more waiting (the task is then drawn twice,
for a shorter wait).
"""

from __future__ import annotations

import logging
import os
import queue
import signal
import threading
import time
from collections import deque
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

__all__ = ["Backend", "LocalBackend", "Router"]

Job = tuple[Task, Candidate]
STEAL_AT = 3  # jobs waiting for one worker before an idle worker takes one of them (`Router`)


class Router:
    """Prepared jobs to `workers` worker threads, a task's jobs to its worker (module doc).
    `put(i, prepared)`, `get(w)` (blocks; None after `close`)."""

    def __init__(
        self, workers: int, owner: dict[str, int] | None = None, steal_at: int = STEAL_AT
    ) -> None:
        self.queues: list[deque] = [deque() for _ in range(workers)]
        # task id -> the worker its jobs go to (a backend's, kept across its batches)
        self.owner = owner if owner is not None else {}
        self.steal_at = steal_at
        self.closed = False
        self.cond = threading.Condition()

    def put(self, i: int, p: Prepared) -> None:
        with self.cond:
            w = self.owner.get(p.task.id)
            if w is None:  # the worker with the fewest tasks, then the fewest jobs waiting
                owned = [0] * len(self.queues)
                for o in self.owner.values():
                    owned[o] += 1
                w = min(range(len(self.queues)), key=lambda k: (owned[k], len(self.queues[k])))
                self.owner[p.task.id] = w
            self.queues[w].append((i, p))
            self.cond.notify_all()

    def get(self, w: int) -> tuple[int, Prepared] | None:
        with self.cond:
            while not self.closed:
                if self.queues[w]:
                    return self.queues[w].popleft()
                most = max(self.queues, key=len)
                if len(most) >= self.steal_at:
                    return most.popleft()
                self.cond.wait()
            return None

    def close(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify_all()


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
        k = config.workers_per_gpu
        self.handles = [
            WorkerHandle(
                g, config, arch=arch, peers=len(gpus) * k, gate=self.gate, slot=j, sharers=k
            )
            for g in gpus
            for j in range(k)
        ]
        self.compile_jobs = config.compile_jobs or os.cpu_count() or 1
        self.owner: dict[str, int] = {}  # task id -> its worker (`Router`), across batches

    def run(self, jobs: list[Job]) -> Iterator[tuple[int, ExecResult]]:
        ev = self.evaluator
        out: queue.Queue = queue.Queue()
        router = Router(len(self.handles), self.owner)
        stop = threading.Event()

        def route(i: int, fut: Future) -> None:
            if fut.cancelled() or stop.is_set():
                return
            try:
                r = fut.result()
            except Exception as e:  # noqa: BLE001 - becomes an INFRA_ERROR result
                r = None if stop.is_set() else infra_result(ev, jobs[i], e)
            if r is not None:
                if isinstance(r, ExecResult):
                    out.put((i, r))
                else:
                    router.put(i, r)

        def gpu_loop(w: int, h: WorkerHandle) -> None:
            while (item := router.get(w)) is not None and not stop.is_set():
                i, p = item
                try:
                    r = run_prepared(ev, h, p, stop)
                except Exception as e:  # noqa: BLE001
                    r = None if stop.is_set() else infra_result(ev, jobs[i], e)
                if r is not None:
                    out.put((i, r))

        t0 = _now_ticks()
        threads = [
            threading.Thread(target=gpu_loop, args=(w, h), daemon=True)
            for w, h in enumerate(self.handles)
        ]
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
            router.close()
            if finished:
                pool.shutdown(wait=True)
                for t in threads:
                    t.join()

    def close(self) -> None:
        for h in self.handles:
            h.close()
