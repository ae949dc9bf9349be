"""`evaluate` and `evaluate_batch`: the public entry points of the evaluator.

A batch first evaluates each task's naive CUDA implementation (when it has one, in full
mode) so every candidate's speedup against it can be reported (a candidate identical to it
takes that result rather than running twice), then streams the candidates' results in
completion order, appending each to the output JSONL as it finishes. Results
already present in that JSONL (same cache key) are not recomputed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from cudaperf.execute.config import EvalConfig
from cudaperf.execute.feedback import timing_feedback
from cudaperf.execute.pool import Backend, Job, LocalBackend
from cudaperf.execute.results import JsonlWriter, done_keys
from cudaperf.execute.types import Candidate, ExecResult, geomean
from cudaperf.tasks.model import Task

log = logging.getLogger(__name__)

__all__ = ["evaluate", "evaluate_batch", "naive_implementation"]


def naive_implementation(task: Task) -> Candidate | None:
    """The task's naive CUDA implementation (strategy tag or id `naive`), if any."""
    for impl in task.implementations:
        if impl.id == "naive" or "naive" in impl.strategies:
            return Candidate(code=impl.code, id=impl.id)
    return None


def finalize(res: ExecResult, naive: ExecResult | None) -> ExecResult:
    """Attach the naive baseline's timings and speedup, and the timing feedback."""
    if not res.ok:
        return res
    by = {c.config: c.timing for c in naive.configs} if naive is not None and naive.ok else {}
    configs = [c.model_copy(update={"naive_timing": by.get(c.config)}) for c in res.configs]
    upd: dict = {"configs": configs}
    if by and all(c.naive_timing and c.timing for c in configs):
        upd["speedup_vs_naive"] = geomean(
            [c.naive_timing.median_us / c.timing.median_us for c in configs]  # type: ignore[union-attr]
        )
    keep = [f for f in res.feedback if not f.startswith(_TIMING_PREFIXES)]
    upd["feedback"] = keep + timing_feedback(configs)
    return res.model_copy(update=upd)


_TIMING_PREFIXES = ("time per config", "slower than the naive", "timing is noisy")


def _naive_jobs(backend: Backend, tasks: list[Task]) -> list[Job]:
    if backend.evaluator.env.mode != "full":
        return []
    return [(t, c) for t in tasks if (c := naive_implementation(t)) is not None]


def evaluate_batch(
    jobs: Iterable[Job],
    config: EvalConfig,
    out: Path | None = None,
    backend: Backend | None = None,
    on_start: Callable[[int], None] | None = None,
) -> Iterator[ExecResult]:
    """Evaluate (task, candidate) pairs; yields each result as it finishes.

    `out`: JSONL file to append results to (flushed per line; results already in it are
    reused, with or without the result cache, so a rerun never writes a row twice).
    `backend`: defaults to a `LocalBackend(config)`, closed at the end; a given one is not.
    `on_start(n)`: called with the number of jobs once they are known (for progress bars).
    """
    jobs = list(jobs)
    own = backend is None
    backend = backend or LocalBackend(config)
    writer = JsonlWriter(out) if out is not None else None
    try:
        if on_start:
            on_start(len(jobs))
        ev = backend.evaluator
        # `out` is this run's record: rows already in it are kept, never appended twice
        # (also without the result cache, which only concerns earlier runs elsewhere).
        prev = done_keys(out) if out is not None else {}
        todo = []
        for i, (t, c) in enumerate(jobs):
            hit = prev.get(ev.key(t, c))
            if hit is not None:
                yield hit.model_copy(update={"cached": True})
            else:
                todo.append(i)
        # The naive implementations run first; a job that *is* one (same task, same code)
        # takes that result instead of running twice, and is written as soon as it exists.
        naive_jobs = _naive_jobs(backend, _unique_tasks([jobs[i][0] for i in todo]))
        index = {(t.id, c.hash): n for n, (t, c) in enumerate(naive_jobs)}
        same: dict[int, list[int]] = {}
        rest = []
        for i in todo:
            n = index.get((jobs[i][0].id, jobs[i][1].hash))
            (same.setdefault(n, []) if n is not None else rest).append(i)
        naive: dict[str, ExecResult] = {}
        for n, res in backend.run(naive_jobs):
            naive[naive_jobs[n][0].id] = res
            if not res.ok:
                log.warning("naive implementation of %s: %s", naive_jobs[n][0].id, res.status.value)
            for i in same.get(n, []):
                mine = finalize(res.model_copy(update={"candidate_id": jobs[i][1].id}), res)
                if writer:
                    writer.write(mine)
                yield mine
        for k, res in backend.run([jobs[i] for i in rest]):
            res = finalize(res, naive.get(jobs[rest[k]][0].id))
            if writer:
                writer.write(res)
            yield res
    finally:
        if writer:
            writer.close()
        if own:
            backend.close()


def _unique_tasks(tasks: list[Task]) -> list[Task]:
    seen: dict[str, Task] = {}
    for t in tasks:
        seen.setdefault(t.id, t)
    return list(seen.values())


def evaluate(task: Task, candidate: Candidate | str, config: EvalConfig) -> ExecResult:
    """Evaluate one candidate on one task (compiles, checks every config, times)."""
    cand = candidate if isinstance(candidate, Candidate) else Candidate(code=candidate)
    (res,) = list(evaluate_batch([(task, cand)], config))
    return res
