"""Benchmark metrics, each defined once here with its formula, and bootstrap intervals.

Notation: a run has tasks i = 1..T; task i has, in turn t, samples j = 1..n with outcome
`BenchRow` r_itj. `correct` means status ok (every config, held-out ones included, within the
task's tolerance, timed). s^b_itj is the speedup against baseline b (`rows.BASELINE_FIELDS`),
defined only for correct samples of tasks that have b. "Turn-1" metrics read the first turn's
samples (the model's single-shot ability); "best-of" metrics read, per task, the best sample
over every sample of turns 1..t (what the multi-turn loop delivers by turn t).

Every metric is a `Metric`: `per_task(task) -> values` (what one task contributes; an empty
list = the task does not take part, e.g. a task without the baseline) and `combine(values)`
over the values of all participating tasks, concatenated. The value of a run is
`combine(concat(per_task(i) for i))`, and a bootstrap replicate resamples tasks, so every
interval comes from the same definition as the point value.

Intervals: 95% percentile bootstrap over tasks, clustered by family (a replicate draws
families with replacement and takes all their tasks), because tasks of one family share a
generator and are not independent. With one task per family this is the plain task
bootstrap. Few families give coarse, wide intervals; the tables print the family count.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from cudaperf.report.rows import BenchRow, TaskMeta

__all__ = [
    "FAST_P",
    "Metric",
    "TaskView",
    "bootstrap",
    "fast_p",
    "paired_bootstrap",
    "pass_at_k",
    "rejected_reasons",
    "standard_metrics",
    "task_views",
    "turn_metrics",
    "value",
]

FAST_P = (1.0, 1.2, 2.0)  # the p of the fast_p table (KernelBench's fast_1, plus 1.2 and 2)


@dataclass(frozen=True)
class TaskView:
    """One task's rows by turn (samples in index order) and its metadata."""

    meta: TaskMeta
    turns: dict[int, list[BenchRow]] = field(default_factory=dict)

    def upto(self, t: int) -> list[BenchRow]:
        """Every row of turns 1..t."""
        return [r for k in sorted(self.turns) if k <= t for r in self.turns[k]]

    def best_speedup(self, baseline: str, t: int) -> float | None:
        """max s^b over correct samples of turns 1..t (None: no correct, timed sample)."""
        vals = [r.speedups[baseline] for r in self.upto(t) if r.correct and baseline in r.speedups]
        return max(vals, default=None)


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
    """Task indices per resampling unit: per family (`by="family"`) or one per task."""
    if by not in ("family", "task"):
        raise ValueError(f"by={by!r}; use family or task")
    groups: dict[str, list[int]] = defaultdict(list)
    for i, t in enumerate(tasks):
        groups[t.meta.family if by == "family" else t.meta.id].append(i)
    return list(groups.values())


def _replicates(
    parts: list[list[list[float]]], clusters: list[list[int]], combines, n_boot: int, seed: int
) -> list[list[float]]:
    """For each replicate (clusters drawn with replacement), each metric's combined value."""
    rng = np.random.default_rng(seed)
    out: list[list[float]] = [[] for _ in parts]
    for _ in range(n_boot):
        pick = rng.integers(0, len(clusters), len(clusters))
        idx = [i for c in pick for i in clusters[c]]
        for k, (p, comb) in enumerate(zip(parts, combines, strict=True)):
            vals = [v for i in idx for v in p[i]]
            out[k].append(comb(np.asarray(vals, dtype=float)) if vals else math.nan)
    return out


def _interval(xs: list[float], level: float) -> tuple[float, float] | None:
    a = np.asarray([x for x in xs if not math.isnan(x)], dtype=float)
    if a.size < len(xs) * 0.5 or a.size == 0:  # the metric is undefined on most replicates
        return None
    lo, hi = np.quantile(a, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def bootstrap(
    m: Metric,
    tasks: Sequence[TaskView],
    n_boot: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    by: str = "family",
) -> tuple[float, float] | None:
    """Percentile interval of `m` by bootstrap over families (clusters of tasks; `by="task"`
    resamples single tasks); None when the metric is undefined (no participating task) on
    half the replicates or more."""
    if not tasks:
        return None
    parts = [[m.per_task(t) for t in tasks]]
    (reps,) = _replicates(parts, _clusters(tasks, by), [m.combine], n_boot, seed)
    return _interval(reps, level)


def paired_bootstrap(
    m: Metric,
    a: Sequence[TaskView],
    b: Sequence[TaskView],
    n_boot: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    by: str = "family",
) -> tuple[float | None, tuple[float, float] | None]:
    """(m(b) - m(a), its interval) on the tasks both runs hold, one replicate drawing the
    same families (`by="task"`: the same tasks) for both runs (a paired bootstrap: shared
    task difficulty cancels). For a speedup metric (`kind == "speedup"`) the paired statistic
    is the ratio m(b) / m(a)."""
    ids = [t.meta.id for t in a if t.meta.id in {x.meta.id for x in b}]
    ia, ib = {t.meta.id: t for t in a}, {t.meta.id: t for t in b}
    ta, tb = [ia[i] for i in ids], [ib[i] for i in ids]
    va, vb = value(m, ta), value(m, tb)
    if not ids or va is None or vb is None:
        return None, None
    parts = [[m.per_task(t) for t in ta], [m.per_task(t) for t in tb]]
    ra, rb = _replicates(parts, _clusters(ta, by), [m.combine] * 2, n_boot, seed)
    if m.kind == "speedup":
        ratios = [y / x if x > 0 else math.nan for x, y in zip(ra, rb, strict=True)]
        return (vb / va if va > 0 else None), _interval(ratios, level)
    diffs = [y - x for x, y in zip(ra, rb, strict=True)]
    return vb - va, _interval(diffs, level)


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
    return t.turns.get(1, [])


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
        if b not in t.meta.baselines or not rows:
            return []
        return [sum(r.correct and r.speedups.get(b, 0.0) > p for r in rows) / len(rows)]

    return per_task


def _fast_best(p: float, b: str, turn: int) -> Callable[[TaskView], list[float]]:
    def per_task(t: TaskView) -> list[float]:
        if b not in t.meta.baselines or not t.turns:
            return []
        s = t.best_speedup(b, turn)
        return [float(s is not None and s > p)]

    return per_task


def _correct_best(turn: int) -> Callable[[TaskView], list[float]]:
    return lambda t: [float(any(r.correct for r in t.upto(turn)))] if t.turns else []


def _log_correct(b: str) -> Callable[[TaskView], list[float]]:
    return lambda t: [math.log(r.speedups[b]) for r in _turn1(t) if r.correct and b in r.speedups]


def _raw_correct(b: str) -> Callable[[TaskView], list[float]]:
    return lambda t: [r.speedups[b] for r in _turn1(t) if r.correct and b in r.speedups]


def _all_tasks(b: str, turn: int, fail: float, log: bool) -> Callable[[TaskView], list[float]]:
    def per_task(t: TaskView) -> list[float]:
        if b not in t.meta.baselines or not t.turns:
            return []
        s = t.best_speedup(b, turn)
        v = fail if s is None else s
        return [math.log(v) if log else v]

    return per_task


def standard_metrics(samples: int, turns: int, baselines: Sequence[str]) -> list[Metric]:
    """The headline metrics of a run with `samples` per turn and `turns` turns, for each
    baseline in `baselines` (the baselines some task of the run has)."""
    ms = [
        Metric("compile rate (turn 1)", _share(lambda r: r.compiled), _mean,
               "mean over tasks of the share of turn-1 samples that passed nvcc"),
        Metric("correct rate (turn 1)", _share(lambda r: r.correct), _mean,
               "mean over tasks of the share of turn-1 samples correct on every config "
               "(held-out ones included)"),
    ]  # fmt: skip
    for k in sorted({1, samples} | ({k for k in (2, 4, 8) if k < samples})):
        ms.append(Metric(f"pass@{k} (turn 1)", _pass_k(k), _mean,
                         f"mean over tasks of 1 - C(n-c,{k})/C(n,{k}) (Chen et al. 2021), "
                         "n turn-1 samples, c correct"))  # fmt: skip
    ms.append(Metric(f"correct, best of {samples}x{turns}", _correct_best(turns), _mean,
                     f"share of tasks with a correct sample in turns 1..{turns}"))  # fmt: skip
    for b in baselines:
        ms += _speed_metrics(b, samples, turns)
    return ms


def fast_p(p: float, b: str, best_by: int | None = None, label: str = "") -> Metric:
    """fast_p against baseline b: with `best_by=None`, the mean over tasks with b of the
    share of turn-1 samples that are correct and > p times faster than b (KernelBench's
    fast_p, per sample); with `best_by=t`, the share of tasks with b whose best correct
    sample of turns 1..t is > p times faster. `label`: the name's suffix for the best-of form."""
    if best_by is None:
        return Metric(f"fast_{p:g} vs {b} (turn 1)", _fast_sample(p, b), _mean,
                      f"mean over tasks with baseline {b} of the share of turn-1 samples "
                      f"correct and > {p:g}x faster than {b}", baseline=b)  # fmt: skip
    return Metric(f"fast_{p:g} vs {b} ({label or f'by turn {best_by}'})",
                  _fast_best(p, b, best_by), _mean,
                  f"share of tasks with baseline {b} whose best correct sample of turns "
                  f"1..{best_by} is > {p:g}x faster than {b}", baseline=b)  # fmt: skip


def _speed_metrics(b: str, samples: int, turns: int) -> list[Metric]:
    best = f"best of {samples}x{turns}"
    out = []
    for p in FAST_P:
        out += [fast_p(p, b), fast_p(p, b, turns, best)]
    out += [
        Metric(f"geomean speedup vs {b}, correct turn-1 samples", _log_correct(b), _geo,
               f"exp(mean log s^{b}) over correct turn-1 samples", "speedup"),
        Metric(f"median speedup vs {b}, correct turn-1 samples", _raw_correct(b), _median,
               f"median s^{b} over correct turn-1 samples", "speedup"),
        Metric(f"geomean speedup vs {b}, all tasks ({best}; failure = 1x)",
               _all_tasks(b, turns, 1.0, True), _geo,
               f"exp(mean over tasks of log best s^{b}), a task without a correct sample "
               "counted as 1x", "speedup"),
        Metric(f"median speedup vs {b}, all tasks ({best}; failure = 0)",
               _all_tasks(b, turns, 0.0, False), _median,
               f"median over tasks of best s^{b}, a task without a correct sample counted as 0",
               "speedup"),
    ]  # fmt: skip
    return [_with_baseline(m, b) for m in out]


def _with_baseline(m: Metric, b: str) -> Metric:
    return Metric(m.name, m.per_task, m.combine, m.doc, m.kind, b)


def turn_metrics(turn: int, baselines: Sequence[str]) -> list[Metric]:
    """Best-so-far by turn t: correct share, fast_1 and geomean (failure = 1x) per baseline."""
    ms = [Metric(f"correct by turn {turn}", _correct_best(turn), _mean,
                 f"share of tasks with a correct sample in turns 1..{turn}")]  # fmt: skip
    for b in baselines:
        ms.append(
            Metric(
                f"fast_1 vs {b} by turn {turn}",
                _fast_best(1.0, b, turn),
                _mean,
                f"share of tasks whose best correct sample by turn {turn} beats {b}",
            )
        )
        doc = (f"exp(mean over tasks with baseline {b} of log best s^{b} by turn {turn}), a "
               "task without a correct sample counted as 1x")  # fmt: skip
        per = _all_tasks(b, turn, 1.0, True)
        ms.append(Metric(f"geomean vs {b} by turn {turn}", per, _geo, doc, "speedup"))
    return ms


def rejected_reasons(rows: Sequence[BenchRow]) -> tuple[float, Counter[str]]:
    """(share of evaluated samples with status rejected, count of each fired check id among
    them); the reward-hacking watch."""
    evaluated = [r for r in rows if r.status not in ("format_error", "screened")]
    rej = [r for r in evaluated if r.status == "rejected"]
    reasons: Counter[str] = Counter(f for r in rej for f in (r.findings or ["(no check id)"]))
    return (len(rej) / len(evaluated) if evaluated else 0.0), reasons
