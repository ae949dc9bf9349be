"""One GPU's share of `cudaperf data measure`: the runner process and the task loop around it.

`GpuDriver` owns one `runner` process bound to one GPU (`supervise.gpu_env`), a
`supervise.LineChild` in its own session. For each task it sends the implementations still to
run and reads events with a timeout. When the
runner reports a CUDA error, dies (exit code, signal) or goes silent for `run_timeout_s`, the
implementation it was running gets `runtime_error` or `timeout`, the runner is replaced, and
the task is sent again without that implementation (partial results of the others are
redone, so every row comes from one runner's uninterrupted run). The runner is also replaced
every `max_tasks` tasks, so memory an implementation leaks never piles up.

`drive_shard` feeds a driver: it keeps a window of tasks whose inputs and reference outputs are
being prepared by the CPU pool (bounded by bytes, `ByteBudget`), waits for each task's batch
library, runs it, writes the rows and deletes the task's scratch folder.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cudaperf.execute.isolation.supervise import LineChild, death_message, gpu_env
from cudaperf.execute.types import ConfigResult, Status
from cudaperf.tasks.model import Implementation, Task

log = logging.getLogger(__name__)

__all__ = ["ByteBudget", "GpuDriver", "Outcome", "drive_shard"]

_MAX_RESTARTS_PER_TASK = 8


@dataclass
class Outcome:
    """What the GPU said about one implementation of one task."""

    status: Status
    configs: list[ConfigResult]
    message: str = ""  # runtime error / timeout / infra message
    seconds: float = 0.0  # runner time spent on it


class GpuDriver:
    """A runner process for one GPU (index `gpu`, or None: inherit the environment)."""

    def __init__(
        self,
        gpu: int | None,
        runtime_lib: str,
        settings: dict,
        run_timeout_s: float,
        log_path: Path,
        max_tasks: int = 200,
        start_timeout_s: float = 180.0,
    ):
        self.gpu = gpu
        self.runtime_lib = runtime_lib
        self.settings = settings
        self.run_timeout_s = run_timeout_s
        self.start_timeout_s = start_timeout_s
        self.log_path = log_path
        self.max_tasks = max_tasks
        self.proc: LineChild | None = None
        self.device_name = ""
        self.tasks_on_runner = 0
        self.starts = 0
        self.busy_s = 0.0  # wall time spent inside run_task

    # ---- process ---------------------------------------------------------------------------

    def start(self) -> None:
        env = gpu_env(dict(os.environ), self.gpu)

        def command(rfd: int, wfd: int) -> list[str]:
            return [
                sys.executable,
                "-m",
                "cudaperf.execute.bulk.runner",
                str(rfd),
                str(wfd),
                self.runtime_lib,
                str(self.log_path),
            ]

        self.proc = LineChild(command, env, self.log_path)
        self.starts += 1
        self.tasks_on_runner = 0
        ev = self._next(self.start_timeout_s)
        if ev is None or ev.get("ev") != "ready":
            why = (ev or {}).get("message") or "it exited or did not answer"
            self.stop()
            raise RuntimeError(
                f"the GPU runner for GPU {self.gpu} did not start: {why} (log: {self.log_path})"
            )
        self.device_name = ev.get("gpu", "")

    def _next(self, timeout: float) -> dict | None:
        """The next event; None at EOF; {"ev": "timeout"} after `timeout` seconds."""
        try:
            return self.proc.read_json(time.monotonic() + timeout)  # type: ignore[union-attr]
        except TimeoutError:
            return {"ev": "timeout"}

    def stop(self, kill: bool = False) -> None:
        """End the runner: asked to exit (up to 30 s) unless `kill`, then its process group
        is killed."""
        p, self.proc = self.proc, None
        if p is not None:
            p.stop(None if kill else {"op": "exit"}, grace_s=30.0)

    def _exit_note(self) -> str:
        p = self.proc
        rc = p.exit_status(5) if p is not None else None
        return f" ({death_message(rc, 'the runner')})" if rc else ""

    # ---- tasks -----------------------------------------------------------------------------

    def run_task(self, task: Task, units: list[tuple[Implementation, str, int]], prep: dict):
        """Outcome per implementation id (see the module doc)."""
        t0 = time.monotonic()
        try:
            return self._run_task(task, units, prep)
        finally:
            self.busy_s += time.monotonic() - t0

    def _run_task(self, task: Task, units, prep: dict) -> dict[str, Outcome]:
        out: dict[str, Outcome] = {}
        remaining = list(units)
        restarts = 0
        while remaining:
            if restarts > _MAX_RESTARTS_PER_TASK:
                msg = f"the GPU runner restarted {restarts} times on this task; giving up on it"
                out.update({im.id: Outcome(Status.INFRA_ERROR, [], msg) for im, _, _ in remaining})
                break
            if self.proc is None or self.tasks_on_runner >= self.max_tasks:
                self.stop()
                self.start()
            remaining = self._attempt(task, remaining, prep, out)
            restarts += 1
        self.tasks_on_runner += 1
        return out

    def _attempt(self, task: Task, remaining, prep: dict, out: dict) -> list:
        """One runner pass over `remaining`; returns what is left to run again."""
        req = {
            "op": "task",
            "task": task.model_dump(mode="json", exclude={"implementations"}),
            "impls": [{"id": im.id, "lib": lib, "k": k} for im, lib, k in remaining],
            "configs": prep["configs"],
            "settings": self.settings,
        }
        partial = {im.id: Outcome(Status.OK, []) for im, _, _ in remaining}
        if not self.proc.send(req):  # type: ignore[union-attr]
            self.stop(kill=True)
            return remaining
        current: tuple[str, str] | None = None
        while True:
            ev = self._next(self.run_timeout_s)
            kind = None if ev is None else ev.get("ev")
            if kind == "begin":
                current = (ev["impl"], ev["config"])
            elif kind == "result":
                o = partial[ev["impl"]]
                o.configs.append(ConfigResult.model_validate(ev["result"]))
                o.seconds += ev.get("seconds", 0.0)
                st = Status(ev["status"])
                if o.status is Status.OK and st is not Status.OK:
                    o.status, o.message = st, ev["result"].get("message", "")
                if st is Status.RUNTIME_ERROR:
                    out[ev["impl"]] = o
                    self.stop()  # the runner exits by itself after a CUDA error
                    return [u for u in remaining if u[0].id != ev["impl"]]
                current = None
            elif kind == "done":
                out.update(partial)
                return []
            elif kind == "fatal":
                note = ev.get("message", "")
                self.stop(kill=True)
                msg = f"the GPU runner failed outside any implementation's call: {note}"
                out.update({im.id: Outcome(Status.INFRA_ERROR, [], msg) for im, _, _ in remaining})
                return []
            else:  # EOF (crash) or timeout
                return self._lost(kind, current, remaining, partial, out)

    def _lost(self, kind, current, remaining, partial, out) -> list:
        timed_out = kind == "timeout"
        note = "" if timed_out else self._exit_note()
        self.stop(kill=True)
        if current is None:  # not inside an implementation: the task's own fault or ours
            what = "timed out" if timed_out else "died"
            msg = f"the GPU runner {what} while loading the task's inputs{note}"
            out.update({im.id: Outcome(Status.INFRA_ERROR, [], msg) for im, _, _ in remaining})
            return []
        impl, cfg = current
        o = partial[impl]
        if timed_out:
            o.status = Status.TIMEOUT
            o.message = f"no result after {self.run_timeout_s:.0f} s on config {cfg} (hang?)"
        else:
            o.status = Status.RUNTIME_ERROR
            o.message = f"the process died while running config {cfg}{note}"
        o.configs.append(ConfigResult(config=cfg, held_out=False, correct=False, message=o.message))
        out[impl] = o
        return [u for u in remaining if u[0].id != impl]


class ByteBudget:
    """Bytes of prepared inputs in flight (all GPUs together)."""

    def __init__(self, limit: int):
        self.limit, self.used = limit, 0
        self._cond = threading.Condition()

    def acquire(self, n: int, block: bool) -> bool:
        """Take `n` bytes; when blocking, wait until they fit or nothing else is held."""
        with self._cond:
            while self.used and self.used + n > self.limit:
                if not block:
                    return False
                self._cond.wait(timeout=5)
            self.used += n
            return True

    def release(self, n: int) -> None:
        with self._cond:
            self.used -= n
            self._cond.notify_all()


@dataclass
class ShardJob:
    """One task of a GPU's shard and what it needs."""

    task: Task
    impls: list[Implementation]  # pending implementations that passed the static checks
    batch: object  # concurrent Future of the task's BatchBuild
    nbytes: int = 0


def drive_shard(
    driver: GpuDriver,
    jobs: list[ShardJob],
    submit_prep: Callable[[Task, str], object],
    scratch: Path,
    budget: ByteBudget,
    prefetch: int,
    on_task: Callable[[ShardJob, object, dict | None, dict[str, Outcome]], None],
) -> None:
    """Prepare ahead (at most `prefetch` tasks, within `budget`), run in order, report each
    task through `on_task(job, batch_build, prep, outcomes)`."""
    pending = deque(jobs)
    window: deque = deque()
    seq = 0
    while pending or window:
        while pending and len(window) < prefetch:
            job = pending[0]
            if not budget.acquire(job.nbytes, block=not window):
                break
            pending.popleft()
            seq += 1
            folder = str(scratch / f"gpu{driver.gpu}-task{seq}")
            window.append((job, folder, submit_prep(job.task, folder)))
        job, folder, prep_job = window.popleft()
        try:
            build = job.batch.result()  # type: ignore[attr-defined]
            prep = prep_job.result()
            units = [
                (im, *build.units[(job.task.id, im.id)])
                for im in job.impls
                if (job.task.id, im.id) in build.units
            ]
            outcomes: dict[str, Outcome] = {}
            if units and prep.get("ok"):
                outcomes = driver.run_task(job.task, units, prep)
            on_task(job, build, prep, outcomes)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
            budget.release(job.nbytes)
