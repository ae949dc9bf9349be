"""Benchmark metrics, each defined once here with its formula, and their intervals.

Notation: a run has tasks i = 1..T; task i has, in turn t, samples j = 1..n with outcome
`BenchRow` r_itj. `correct` means status ok (every config, held-out ones included, within the
task's tolerance, timed). s^b_itj is the speedup against baseline b (`rows.BASELINE_FIELDS`),
defined only for correct samples of tasks that have b. "Turn-1" metrics read the first turn's
samples (the model's single-shot ability); "best-of" metrics read, per task, the best sample
over every sample of turns 1..t (what the multi-turn loop delivers by turn t).

Every metric is a `Metric`: `per_task(task) -> values` (what one task contributes; an empty
list = the task does not take part, e.g. a task without the baseline) and `combine(values)`
over the values of all participating tasks, concatenated. The value of a run is
`combine(concat(per_task(i) for i))`; `combine` is a mean, a geomean (of logs) or a median,
and intervals exist for the first two.

Left out, as the harness's failures rather than the model's (the report counts them): samples
with status infra_error, from every rate (`scored`); and from baseline b's metrics, a task
one of whose correct samples has no speedup against b (`TaskView.unmeasured`: the evaluator
could not time b there, so the task is neither "not fast" nor 1x). An all-tasks geomean counts
a failure as FAIL_FLOOR and clamps slower correct samples to it, so no failure ranks above a
correct kernel.

Intervals (`interval`, `paired_interval`): 95% cluster-robust t intervals with families as
clusters, because tasks of one family share a generator and are not independent; the method,
why it and where none is given are in `report.intervals`. Few families give wide intervals;
the tables print the family count. A paired difference is taken on the tasks where both runs
have a value (`paired_tasks`): a task scored in one run only (its samples all infra errors
in the other; for a speedup of correct samples, correct in one run only) takes no part in
its point or its interval (until session 46 it entered the point on one side).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from cudaperf.report.intervals import Interval, cluster_t, paired_cluster_t
from cudaperf.report.rows import BenchRow, TaskMeta

__all__ = [
    "FAIL_FLOOR",
    "FAST_P",
    "Metric",
    "TaskView",
    "fast_p",
    "interval",
    "paired_interval",
    "paired_tasks",
    "pass_at_k",
    "rejected_reasons",
    "scored",
    "standard_metrics",
    "task_views",
    "turn_metrics",
    "value",
]

FAST_P = (1.0, 1.2, 2.0)  # the p of the fast_p table (KernelBench's fast_1, plus 1.2 and 2)
# An all-tasks geomean counts a task without a correct sample as this speedup, and a correct
# sample slower than it as it too, so no failure ever ranks above a correct kernel (counting a
# failure as 1x did: it beat a correct kernel at 0.5x).
FAIL_FLOOR = 0.1
INFRA = "infra_error"  # ExecResult status of the evaluator's own failures


@dataclass(frozen=True)
class TaskView:
    """One task's rows by turn (samples in index order) and its metadata."""

    meta: TaskMeta
    turns: dict[int, list[BenchRow]] = field(default_factory=dict)

    def upto(self, t: int) -> list[BenchRow]:
        """Every scored row of turns 1..t (infra errors left out: `scored`)."""
        return [r for k in sorted(self.turns) if k <= t for r in scored(self.turns[k])]

    def unmeasured(self, baseline: str) -> bool:
        """A correct sample has no speedup against `baseline`: the evaluator could not time
        it for this task, so the task takes no part in that baseline's metrics."""
        rows = (r for rs in self.turns.values() for r in rs)
        return any(r.correct and baseline not in r.speedups for r in rows)

    def has(self, baseline: str) -> bool:
        """The task has `baseline` and the evaluator timed it (see `unmeasured`)."""
        return baseline in self.meta.baselines and not self.unmeasured(baseline)

    def best_speedup(self, baseline: str, t: int) -> float | None:
        """max s^b over correct samples of turns 1..t (None: no correct, timed sample)."""
        vals = [r.speedups[baseline] for r in self.upto(t) if r.correct and baseline in r.speedups]
        return max(vals, default=None)


def scored(rows: Sequence[BenchRow]) -> list[BenchRow]:
    """The rows that score the model: an infra error is the evaluator's failure, not the
    model's, so it counts in no rate (neither numerator nor denominator)."""
    return [r for r in rows if r.status != INFRA]


def task_views(rows: Sequence[BenchRow], meta: dict[str, TaskMeta]) -> list[TaskView]:
    """Rows grouped by task (tasks in `meta` order; a task without rows has no turns)."""
    by: dict[str, dict[int, list[BenchRow]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        by[r.task_id][r.turn].append(r)
    out = []
    for tid, m in meta.items():
        turns = {t: sorted(rs, key=lambda r: r.sample) for t, rs in sorted(by[tid].items())}
        out.append(TaskView(m, turns))
    return out


@dataclass(frozen=True)
class Metric:
    """A named metric: per-task contributions and how they combine (see the module doc)."""

    name: str  # table label
    per_task: Callable[[TaskView], list[float]]
    combine: Callable[[np.ndarray], float]
    doc: str  # the formula, as the report prints it
    kind: str = "rate"  # "rate" (0..1, printed as %) or "speedup" (x)
    baseline: str = ""  # the speedup baseline it is measured against ("" for none)


def _mean(v: np.ndarray) -> float:
    return float(v.mean())


def _geo(v: np.ndarray) -> float:  # values are logs
    return float(math.exp(v.mean()))


def _median(v: np.ndarray) -> float:
    return float(np.median(v))


def value(m: Metric, tasks: Sequence[TaskView]) -> float | None:
    """The metric of a set of tasks; None when no task takes part."""
    vals = [v for t in tasks for v in m.per_task(t)]
    return m.combine(np.asarray(vals, dtype=float)) if vals else None


def _clusters(tasks: Sequence[TaskView], by: str = "family") -> list[list[int]]:
    """Task indices per cluster: per family (`by="family"`) or one per task."""
    if by not in ("family", "task"):
        raise ValueError(f"by={by!r}; use family or task")
    groups: dict[str, list[int]] = defaultdict(list)
    for i, t in enumerate(tasks):
        groups[t.meta.family if by == "family" else t.meta.id].append(i)
    return list(groups.values())


def _form(m: Metric) -> str:
    """ "mean", "log" (a geomean: the mean of logs) or "median"."""
    return {_mean: "mean", _geo: "log"}.get(m.combine, "median")


def _sums(m: Metric, tasks: Sequence[TaskView], clusters: list[list[int]]):
    """(sum of values, number of values) of `m` per cluster."""
    vals = [[v for i in c for v in m.per_task(tasks[i])] for c in clusters]
    return np.array([sum(v) for v in vals], float), np.array([len(v) for v in vals], float)


def _exp(iv: Interval) -> Interval:
    return Interval(*(None if x is None else math.exp(x) for x in (iv.lo, iv.hi)), iv.note)


def interval(
    m: Metric, tasks: Sequence[TaskView], level: float = 0.95, by: str = "family"
) -> Interval:
    """The `level` interval of `m` over `tasks`: the cluster-robust t interval of
    `report.intervals` with families as clusters (`by="task"`: single tasks, for a table
    within one family); a median, or a set where it does not exist, gets none with the
    reason (`Interval.note`)."""
    if _form(m) == "median":
        return Interval.none("median: no interval")
    sums, counts = _sums(m, tasks, _clusters(tasks, by))
    _, iv = cluster_t(sums, counts, level, rate=m.kind == "rate", unit=by)
    return _exp(iv) if _form(m) == "log" else iv


def paired_tasks(m: Metric, a: Sequence[TaskView], b: Sequence[TaskView]) -> list[str]:
    """The ids of the tasks both runs hold where `m` has a value in both (in `a`'s order): a
    task whose samples were all infra errors in one run, or (for a speedup over correct
    samples) with no correct sample in one, takes no part in a paired difference."""
    ib = {t.meta.id: t for t in b}
    return [t.meta.id for t in a if t.meta.id in ib and m.per_task(t) and m.per_task(ib[t.meta.id])]


def paired_interval(
    m: Metric,
    a: Sequence[TaskView],
    b: Sequence[TaskView],
    level: float = 0.95,
    by: str = "family",
) -> tuple[float | None, Interval]:
    """(m(b) - m(a), its interval) on the tasks where both runs have a value of `m`
    (`paired_tasks`), clusters (families; `by="task"`: tasks) paired so that shared task
    difficulty cancels (`intervals.paired_cluster_t`). The point is the difference on those
    tasks, so it lies inside its interval; it differs from the difference of the two runs'
    own values (each over all of its tasks) when a task has a value in one run only. For a
    speedup metric (`kind == "speedup"`) it is the ratio m(b) / m(a) on those tasks (a
    difference of logs for a geomean): a geomean of correct samples' speedups is compared on
    the tasks where both runs have a correct sample. A median gets the difference without an
    interval."""
    ids = paired_tasks(m, a, b)
    ia, ib = {t.meta.id: t for t in a}, {t.meta.id: t for t in b}
    ta, tb = [ia[i] for i in ids], [ib[i] for i in ids]
    va, vb = value(m, ta), value(m, tb)
    if not ids or va is None or vb is None:
        return None, Interval.none("no task takes part in both")
    ratio = m.kind == "speedup"
    point = (vb / va if va > 0 else None) if ratio else vb - va
    if _form(m) == "median":
        return point, Interval.none("median: no interval")
    cl = _clusters(ta, by)
    d, iv = paired_cluster_t(_sums(m, ta, cl), _sums(m, tb, cl), level, unit=by)
    if _form(m) == "log":
        return (math.exp(d) if d is not None else None), _exp(iv)
    return point, iv


# --- the metric definitions ------------------------------------------------------------------


def pass_at_k(n: int, c: int, k: int) -> float:
    """Chen et al. (2021)'s unbiased pass@k for one task: 1 - C(n-c, k) / C(n, k), n samples
    of which c are correct (k <= n); computed as 1 - prod_{i=n-c+1..n} (1 - k/i)."""
    if not 0 < k <= n or not 0 <= c <= n:
        raise ValueError(f"pass@k needs 0 < k <= n and 0 <= c <= n; got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - float(np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def _turn1(t: TaskView) -> list[BenchRow]:
    return scored(t.turns.get(1, []))


def _share(pred: Callable[[BenchRow], bool]) -> Callable[[TaskView], list[float]]:
    def per_task(t: TaskView) -> list[float]:
        rows = _turn1(t)
        return [sum(map(pred, rows)) / len(rows)] if rows else []

    return per_task


def _pass_k(k: int) -> Callable[[TaskView], list[float]]:
    def per_task(t: TaskView) -> list[float]:
        rows = _turn1(t)
        if len(rows) < k:
            return []
        return [pass_at_k(len(rows), sum(r.correct for r in rows), k)]

    return per_task


def _fast_sample(p: float, b: str) -> Callable[[TaskView], list[float]]:
    def per_task(t: TaskView) -> list[float]:
        rows = _turn1(t)
        if not t.has(b) or not rows:
            return []
        return [sum(r.correct and r.speedups[b] > p for r in rows) / len(rows)]

    return per_task


def _fast_best(p: float, b: str, turn: int) -> Callable[[TaskView], list[float]]:
    def per_task(t: TaskView) -> list[float]:
        if not t.has(b) or not t.upto(turn):
            return []
        s = t.best_speedup(b, turn)
        return [float(s is not None and s > p)]

    return per_task


def _correct_best(turn: int) -> Callable[[TaskView], list[float]]:
    def per_task(t: TaskView) -> list[float]:
        rows = t.upto(turn)
        return [float(any(r.correct for r in rows))] if rows else []

    return per_task


def _log_correct(b: str) -> Callable[[TaskView], list[float]]:
    return lambda t: [math.log(r.speedups[b]) for r in _turn1(t) if r.correct] if t.has(b) else []


def _raw_correct(b: str) -> Callable[[TaskView], list[float]]:
    return lambda t: [r.speedups[b] for r in _turn1(t) if r.correct] if t.has(b) else []


def _all_tasks(b: str, turn: int, log: bool) -> Callable[[TaskView], list[float]]:
    """Best speedup per task; a failure is FAIL_FLOOR (log) or 0 (median), see FAIL_FLOOR."""

    def per_task(t: TaskView) -> list[float]:
        if not t.has(b) or not t.upto(turn):
            return []
        s = t.best_speedup(b, turn)
        if log:
            return [math.log(FAIL_FLOOR if s is None else max(s, FAIL_FLOOR))]
        return [0.0 if s is None else s]

    return per_task


def standard_metrics(samples: int, turns: int, baselines: Sequence[str]) -> list[Metric]:
    """The headline metrics of a run with `samples` per turn and `turns` turns, for each
    baseline in `baselines` (the baselines some task of the run has)."""
    ms = [
        Metric(
            "compile rate (turn 1)",
            _share(lambda r: r.compiled),
            _mean,
            "mean over tasks of the share of turn-1 samples that passed nvcc",
        ),
        Metric(
            "correct rate (turn 1)",
            _share(lambda r: r.correct),
            _mean,
            "mean over tasks of the share of turn-1 samples correct on every config "
            "(held-out ones included)",
        ),
    ]
    for k in sorted({1, samples} | ({k for k in (2, 4, 8) if k < samples})):
        ms.append(
            Metric(
                f"pass@{k} (turn 1)",
                _pass_k(k),
                _mean,
                f"mean over tasks of 1 - C(n-c,{k})/C(n,{k}) (Chen et al. 2021), "
                "n turn-1 samples, c correct",
            )
        )
    ms.append(
        Metric(
            f"correct, best of {samples}x{turns}",
            _correct_best(turns),
            _mean,
            f"share of tasks with a correct sample in turns 1..{turns}",
        )
    )
    for b in baselines:
        ms += _speed_metrics(b, samples, turns)
    return ms


def fast_p(p: float, b: str, best_by: int | None = None, label: str = "") -> Metric:
    """fast_p against baseline b: with `best_by=None`, the mean over tasks with b of the
    share of turn-1 samples that are correct and > p times faster than b (KernelBench's
    fast_p, per sample); with `best_by=t`, the share of tasks with b whose best correct
    sample of turns 1..t is > p times faster. `label`: the name's suffix for the best-of form."""
    if best_by is None:
        return Metric(
            f"fast_{p:g} vs {b} (turn 1)",
            _fast_sample(p, b),
            _mean,
            f"mean over tasks with baseline {b} of the share of turn-1 samples "
            f"correct and > {p:g}x faster than {b}",
            baseline=b,
        )
    return Metric(
        f"fast_{p:g} vs {b} ({label or f'by turn {best_by}'})",
        _fast_best(p, b, best_by),
        _mean,
        f"share of tasks with baseline {b} whose best correct sample of turns "
        f"1..{best_by} is > {p:g}x faster than {b}",
        baseline=b,
    )


def _speed_metrics(b: str, samples: int, turns: int) -> list[Metric]:
    best = f"best of {samples}x{turns}"
    out = []
    for p in FAST_P:
        out += [fast_p(p, b), fast_p(p, b, turns, best)]
    out += [
        Metric(
            f"geomean speedup vs {b}, correct turn-1 samples",
            _log_correct(b),
            _geo,
            f"exp(mean log s^{b}) over correct turn-1 samples",
            "speedup",
        ),
        Metric(
            f"median speedup vs {b}, correct turn-1 samples",
            _raw_correct(b),
            _median,
            f"median s^{b} over correct turn-1 samples",
            "speedup",
        ),
        Metric(
            f"geomean speedup vs {b}, all tasks ({best}; {_FLOOR_NAME})",
            _all_tasks(b, turns, True),
            _geo,
            f"exp(mean over tasks of log max(best s^{b}, {FAIL_FLOOR:g})): a task without a "
            f"correct sample counts {FAIL_FLOOR:g}x, a slower correct one too, so no failure "
            "ranks above a correct kernel",
            "speedup",
        ),
        Metric(
            f"median speedup vs {b}, all tasks ({best}; failure = 0)",
            _all_tasks(b, turns, False),
            _median,
            f"median over tasks of best s^{b}, a task without a correct sample counted as 0",
            "speedup",
        ),
    ]
    return [_with_baseline(m, b) for m in out]


_FLOOR_NAME = f"failure = {FAIL_FLOOR:g}x floor"


def _with_baseline(m: Metric, b: str) -> Metric:
    return Metric(m.name, m.per_task, m.combine, m.doc, m.kind, b)


def turn_metrics(turn: int, baselines: Sequence[str]) -> list[Metric]:
    """Best-so-far by turn t: correct share, fast_1 and geomean (failure = FAIL_FLOOR) per
    baseline."""
    ms = [
        Metric(
            f"correct by turn {turn}",
            _correct_best(turn),
            _mean,
            f"share of tasks with a correct sample in turns 1..{turn}",
        )
    ]
    for b in baselines:
        ms.append(
            Metric(
                f"fast_1 vs {b} by turn {turn}",
                _fast_best(1.0, b, turn),
                _mean,
                f"share of tasks whose best correct sample by turn {turn} beats {b}",
            )
        )
        doc = (
            f"exp(mean over tasks with baseline {b} of log max(best s^{b} by turn {turn}, "
            f"{FAIL_FLOOR:g})), a task without a correct sample counted as {FAIL_FLOOR:g}x"
        )
        per = _all_tasks(b, turn, True)
        ms.append(Metric(f"geomean vs {b} by turn {turn}", per, _geo, doc, "speedup"))
    return ms


def rejected_reasons(rows: Sequence[BenchRow]) -> tuple[float, Counter[str]]:
    """(share of evaluated samples with status rejected, count of each fired check id among
    them); the reward-hacking watch."""
    evaluated = [r for r in rows if r.status not in ("format_error", "screened", INFRA)]
    rej = [r for r in evaluated if r.status == "rejected"]
    reasons: Counter[str] = Counter(f for r in rej for f in (r.findings or ["(no check id)"]))
    return (len(rej) / len(evaluated) if evaluated else 0.0), reasons
