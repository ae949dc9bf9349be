"""PyTorch→CUDA tasks of `cudaperf data measure`: `measure_torch_tasks` in a watched child.

`torch_phase` runs `measure_torch` (default `torch_tasks.measure_torch_tasks`; any function of
its keyword arguments: trials, warmup, budget_s, device, done, progress, compile_only,
inflight_path, salt, arch, jobs) for one GPU's share of the tasks, in a spawned child
process, and restarts the child, resuming from the rows written so far, after
`ContextPoisoned` (exit code 3), a crash, or no sign of life (progress calls, its in-flight
marker, the results file) for `torch_watchdog_s`. The child appends rows to the same results
file; the parent counts them for progress by reading what was appended.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

from cudaperf.execute.bulk.torch_tasks import ContextPoisoned, measure_torch_tasks
from cudaperf.tasks.model import Task

log = logging.getLogger(__name__)

__all__ = ["rows_from", "torch_phase"]


def _torch_child(
    measure_torch: Callable, task_jsons: list[str], out: str, kwargs: dict, done: list, q
) -> None:
    """Child process: `measure_torch` on one GPU; exit code 3 asks for a restart, 130 says it
    was interrupted (SIGINT from a terminal's Ctrl-C, or from the parent when it was)."""
    tasks = [Task.model_validate_json(j) for j in task_jsons]
    try:
        measure_torch(tasks, Path(out), done={tuple(p) for p in done}, progress=q.put, **kwargs)
    except ContextPoisoned as e:  # its row is written: restart and resume
        log.warning("torch2cuda runner: %s", e)
        os._exit(3)
    except KeyboardInterrupt:  # measure_torch's own cleanup (its pool) has run; no traceback
        raise SystemExit(130) from None  # a normal exit: its queues and locks are released


def _stop_child(proc, grace_s: float = 10.0) -> None:
    """End the child after this process was interrupted: a terminal's Ctrl-C reached it too
    (give it 2 s to end its pool and exit), else interrupt it like one; kill it if it has not
    exited within `grace_s` more."""
    proc.join(2.0)
    if proc.is_alive():
        try:
            os.kill(proc.pid, signal.SIGINT)
        except ProcessLookupError:
            pass
        proc.join(grace_s)
    if proc.is_alive():
        proc.kill()
        proc.join()


def torch_phase(
    tasks: list[Task],
    config,
    device: int,
    done: set,
    progress,
    stats: dict,
    compile_only: bool,
    salt: int,
    arch: str,
    measure_torch: Callable = measure_torch_tasks,
) -> None:
    """PyTorch→CUDA tasks of one GPU through `measure_torch_tasks`, in a child process that is
    restarted (resuming from the rows written so far) after a CUDA error, a crash, or no sign
    of life (progress, its in-flight marker, the results file) for `torch_watchdog_s`."""
    ctx = multiprocessing.get_context("spawn")
    inflight = config.out.with_name(f"{config.out.name}.inflight-gpu{device}")
    kwargs = {
        "trials": config.eval.trials,
        "warmup": config.eval.warmup,  # the C phase's settings too (`--warmup`, and
        "budget_s": config.eval.time_budget_s,  # `--timing-budget`, seconds per config)
        "device": device,
        "compile_only": compile_only,
        "inflight_path": str(inflight),
        "salt": salt,
        "arch": arch,
        "jobs": config.workers(),
    }
    ids = {t.id for t in tasks}
    mine = {p for p in done if p[0] in ids}
    offset = config.out.stat().st_size if config.out.exists() else 0
    for attempt in range(_TORCH_MAX_RESTARTS + 1):
        q = ctx.Queue()
        args = (
            measure_torch,
            [t.model_dump_json() for t in tasks],
            str(config.out),
            kwargs,
            sorted(mine),
            q,
        )
        proc = ctx.Process(target=_torch_child, args=args, name=f"measure-torch-{device}")
        proc.start()
        try:
            hung = _watch(proc, q, progress, inflight, config.out, ids, config.torch_watchdog_s)
        except BaseException:  # Ctrl-C (to this process alone or to the group), or a failure
            _stop_child(proc)
            raise
        before = len(mine)
        mine |= {
            (r.get("task_id"), r.get("candidate_id"))
            for r in rows_from(config.out, offset)
            if r.get("task_id") in ids
        }
        if proc.exitcode == 0:
            return
        why = "stopped responding" if hung else f"exited with code {proc.exitcode}"
        if len(mine) == before and not inflight.exists() and not hung:
            note = f"torch2cuda measurement on GPU {device} {why} without progress; gave up"
            stats["notes"].append(note)
            log.error(note)
            return
        log.warning("torch2cuda runner on GPU %s %s; restart %d", device, why, attempt + 1)
    stats["notes"].append(f"torch2cuda on GPU {device}: too many restarts; gave up")


_TORCH_MAX_RESTARTS = 64


def _watch(proc, q, progress, inflight: Path, out: Path, ids: set, watchdog_s: float) -> bool:
    """Wait for the child, counting its tasks and its rows (those of `ids` appended to `out`);
    kill it when there is no sign of life for `watchdog_s`; True when it was killed."""
    import queue as queue_mod

    last = time.time()
    offset = out.stat().st_size if out.exists() else 0
    while True:
        alive = proc.is_alive()
        try:
            q.get(timeout=1.0)
            progress.task()
            last = time.time()
        except (queue_mod.Empty, OSError, EOFError, ValueError):
            pass
        if out.exists() and out.stat().st_size > offset:
            with open(out, "rb") as f:
                f.seek(offset)
                data = f.read()
            cut = data.rfind(b"\n") + 1  # a line still being written waits for the next read
            for r in _parse_rows(data[:cut]):
                if r.get("task_id") in ids:
                    progress.row(r)
            offset += cut
        if not alive:
            proc.join()
            return False
        beats = [last] + [f.stat().st_mtime for f in (inflight, out) if f.exists()]
        if time.time() - max(beats) > watchdog_s:
            proc.kill()
            proc.join()
            return True


def rows_from(path: Path, offset: int) -> list[dict]:
    """The rows after byte `offset` (lines that are not JSON are skipped)."""
    if not path.exists():
        return []
    with open(path, "rb") as f:
        f.seek(offset)
        return _parse_rows(f.read())


def _parse_rows(raw: bytes) -> list[dict]:
    import json

    data = raw.decode("utf-8", errors="replace")
    rows = []
    for line in data.splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:
            continue
    return rows
