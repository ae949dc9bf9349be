"""Benchmark rows: one flat record per evaluated sample, the only input the metrics read.

A benchmark run's trajectory (`refine.trajectory`) holds every turn of every task with every
sample's `ExecResult`; `rows_from_trajectory` flattens it into `BenchRow`s joined with the
task metadata the run recorded (`TaskMeta`: suite, family, level, kind, which baselines the
task has). Rows are plain JSON (`model_dump`), so metrics and reports run anywhere.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict

from cudaperf.execute.types import SPEEDUPS
from cudaperf.refine.trajectory import SummaryRecord, TurnRecord
from cudaperf.tasks.model import Task, TaskKind

__all__ = [
    "BASELINE_FIELDS",
    "BASELINE_LABELS",
    "BenchRow",
    "TaskMeta",
    "rows_from_trajectory",
    "task_meta",
]

# Baseline name -> how tables name it, in table order (the names are execute.types.SPEEDUPS').
BASELINE_LABELS = {
    "eager": "eager PyTorch",
    "compile": "torch.compile",
    "naive": "the task's naive CUDA kernel",
    "cpu": "the serial C reference (gcc -O2, CPU)",
}
assert set(BASELINE_LABELS) == set(SPEEDUPS), "a label per execute.types.SPEEDUPS baseline"
# Baseline name -> ExecResult field holding the candidate's geomean speedup against it.
BASELINE_FIELDS = {b: SPEEDUPS[b][0] for b in BASELINE_LABELS}
_COMPILED = {"ok", "compiled", "runtime_error", "wrong_output"}
_AFTER_RUN = {"timeout", "rejected"}  # compiled when the result has per-config runs


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TaskMeta(_Frozen):
    """What the metrics need to know about a task (recorded in the run's run.json)."""

    id: str  # Task.id
    suite: str  # suite label, e.g. "heldout", "kernelbench:1", a task file's name
    family: str  # Task.family (the intervals' cluster)
    kind: str  # "c2cuda" or "torch2cuda"
    level: str = ""  # KernelBench level ("1", "2", "3"); "" for other suites
    baselines: list[str] = []  # baselines this task can be measured against (BASELINE_FIELDS)


class BenchRow(_Frozen):
    """One evaluated sample: where it sits (task, turn, sample) and what the evaluator said."""

    task_id: str  # Task.id
    suite: str  # TaskMeta.suite
    family: str  # TaskMeta.family
    kind: str  # TaskMeta.kind
    level: str = ""  # TaskMeta.level
    turn: int  # 1-based
    sample: int  # 0-based index within the turn
    status: str  # an ExecResult status, or "format_error" / "screened"
    mode: str = ""  # "full" or "compile-only" ("" when nothing was evaluated)
    compiled: bool = False  # passed nvcc (see `compiled_of`)
    correct: bool = False  # status "ok": correct on every config, held-out ones included
    speedups: dict[str, float] = {}  # baseline name -> speedup (only measured ones)
    findings: list[str] = []  # anti-hacking check ids that fired
    feedback: str = ""  # the feedback rendered for this sample (truncated)
    reply_head: str = ""  # the start of the model's reply (truncated)
    reward: float | None = None  # reward total (None: no valid reward)


def task_meta(task: Task, suite: str, compile_baseline: bool = True) -> TaskMeta:
    """The metadata of `task` as a member of `suite`.

    Baselines: `cpu` for C→CUDA tasks, `eager` and `compile` for PyTorch→CUDA tasks (`compile`
    only when `compile_baseline`: the evaluator times it), `naive` when the task has a naive
    implementation (tag or id `naive`, the one the evaluator times).
    """
    torch = ["eager", "compile"] if compile_baseline else ["eager"]
    base = ["cpu"] if task.kind is TaskKind.C2CUDA else torch
    if any(i.id == "naive" or "naive" in i.strategies for i in task.implementations):
        base.append("naive")
    level = ""
    if task.id.startswith("kernelbench/level"):
        level = task.id.split("/")[1].removeprefix("level")
    return TaskMeta(
        id=task.id,
        suite=suite,
        family=task.family,
        kind=task.kind.value,
        level=level,
        baselines=base,
    )


def compiled_of(status: str, ran: bool) -> bool:
    """Passed the compiler: ok, compiled, runtime_error, wrong_output; a timeout or a
    rejection only when the result holds per-config runs (it got past nvcc)."""
    return status in _COMPILED or (status in _AFTER_RUN and ran)


def rows_from_trajectory(
    records: Iterable[TurnRecord | SummaryRecord], meta: dict[str, TaskMeta], max_feedback=1500
) -> list[BenchRow]:
    """One row per evaluated sample of every turn record whose task is in `meta`.

    Screened samples (never evaluated) become rows with status "screened", not compiled."""
    out = []
    for rec in records:
        if not isinstance(rec, TurnRecord) or rec.task_id not in meta:
            continue
        m = meta[rec.task_id]
        for s in rec.samples:
            res, rw = s.result, s.reward
            status = "screened" if s.screened else (rw.status if rw else "screened")
            speedups = {}
            if res is not None and res.status.value == "ok":
                for name, field in BASELINE_FIELDS.items():
                    v = getattr(res, field)
                    if v is not None and v > 0:
                        speedups[name] = float(v)
            out.append(
                BenchRow(
                    task_id=m.id,
                    suite=m.suite,
                    family=m.family,
                    kind=m.kind,
                    level=m.level,
                    turn=rec.turn,
                    sample=s.index,
                    status=status,
                    mode=res.mode if res is not None else "",
                    compiled=compiled_of(status, bool(res and res.configs)),
                    correct=status == "ok",
                    speedups=speedups,
                    findings=list(res.findings) if res is not None else [],
                    feedback=s.feedback[:max_feedback],
                    reply_head=s.reply[:max_feedback],
                    reward=rw.total if rw is not None and rw.valid else None,
                )
            )
    return out
