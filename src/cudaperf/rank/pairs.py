"""Measured pairs: the ranker's training and evaluation data.

A pair is two implementations of the same task, timed on the same config on the same GPU.
Its label is which one is faster. Guaranteed: pairs never mix tasks, configs or GPUs; exact
ties (equal median times) are not pairs; `a` and `b` follow the task's implementation order.
Not guaranteed: that a small time difference is real — filter with `min_ratio` (issue 8
evaluates on pairs at least 1.2x apart).

Which tasks a pair may come from (train / validation / test families) is `cudaperf.tasks.splits`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from cudaperf.tasks.model import Task

__all__ = [
    "Group",
    "Pair",
    "build_pairs",
    "measured_groups",
]


@dataclass(frozen=True)
class Group:
    """The implementations of one task measured on one config on one GPU."""

    task_id: str  # Task.id
    family: str  # Task.family
    config: str  # InputConfig.name
    gpu: str  # Measurement.gpu
    times: dict[str, float]  # implementation id → median time (µs), task order


@dataclass(frozen=True)
class Pair:
    """Two implementations timed on the same task, config and GPU."""

    task_id: str  # Task.id
    family: str  # Task.family
    config: str  # InputConfig.name
    gpu: str  # Measurement.gpu
    a: str  # implementation id (earlier in the task's list)
    b: str  # implementation id
    time_a_us: float  # median time of a
    time_b_us: float  # median time of b

    @property
    def a_faster(self) -> bool:
        """The label: True when `a` is faster."""
        return self.time_a_us < self.time_b_us

    @property
    def ratio(self) -> float:
        """slower / faster time (>= 1)."""
        lo, hi = sorted((self.time_a_us, self.time_b_us))
        return hi / lo


def measured_groups(tasks: Iterable[Task]) -> list[Group]:
    """Every (task, config, GPU) with at least two measured implementations."""
    out: list[Group] = []
    for t in tasks:
        times: dict[tuple[str, str], dict[str, float]] = {}
        for impl in t.implementations:
            for m in impl.measurements:
                times.setdefault((m.config, m.gpu), {})[impl.id] = m.median_us
        for (config, gpu), by_impl in sorted(times.items()):
            if len(by_impl) >= 2:
                out.append(Group(t.id, t.family, config, gpu, by_impl))
    return out


def build_pairs(tasks: Iterable[Task], min_ratio: float = 1.0) -> list[Pair]:
    """All pairs of every measured group whose times differ by at least `min_ratio` (> ties)."""
    if min_ratio < 1.0:
        raise ValueError(f"min_ratio must be >= 1 (slower / faster), got {min_ratio}")
    out: list[Pair] = []
    for g in measured_groups(tasks):
        ids = list(g.times)
        for i, a in enumerate(ids):
            for b in ids[i + 1 :]:
                p = Pair(g.task_id, g.family, g.config, g.gpu, a, b, g.times[a], g.times[b])
                if p.time_a_us != p.time_b_us and p.ratio >= min_ratio:
                    out.append(p)
    return out
