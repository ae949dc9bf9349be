"""Measured pairs and family splits: the ranker's training and evaluation data.

A pair is two implementations of the same task, timed on the same config on the same GPU.
Its label is which one is faster. Guaranteed: pairs never mix tasks, configs or GPUs; exact
ties (equal median times) are not pairs; `a` and `b` follow the task's implementation order.
Not guaranteed: that a small time difference is real — filter with `min_ratio` (issue 8
evaluates on pairs at least 1.2x apart).

Splits are by family: `data/splits.json` maps each family to train / validation / test. A task
set without a splits file gets the same salted-hash rule as `cudaperf.datagen.build.split_of`
(copied here so that `rank` does not import the generator).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cudaperf.tasks.model import Task

__all__ = [
    "SPLIT_NAMES",
    "Group",
    "Pair",
    "build_pairs",
    "family_splits",
    "hash_split",
    "measured_groups",
    "read_splits",
    "tasks_in_split",
]

SPLIT_SALT = "cudaperf-split-v1"  # must equal cudaperf.datagen.build.SPLIT_SALT
_THRESHOLDS = (("train", 0.8), ("validation", 0.9), ("test", 1.0))
SPLIT_NAMES = ("train", "validation", "test")
# What `tasks_in_split` accepts: a split name, or "heldout" for validation + test.
SPLIT_CHOICES = (*SPLIT_NAMES, "heldout")


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


def hash_split(family: str) -> str:
    """train / validation / test from a salted SHA-256 of the family name (80/10/10)."""
    h = hashlib.sha256(f"{SPLIT_SALT}:{family}".encode()).digest()
    u = int.from_bytes(h[:8], "big") / 2**64
    for name, upper in _THRESHOLDS:
        if u < upper:
            return name
    return _THRESHOLDS[-1][0]


def read_splits(path: str | Path) -> dict[str, str]:
    """family → split from a splits.json (the `families` mapping `cudaperf data build` writes)."""
    p = Path(path)
    try:
        doc = json.loads(p.read_text())
    except (OSError, ValueError) as e:
        raise ValueError(f"{p}: cannot read the splits file ({e})") from None
    fams = doc.get("families") if isinstance(doc, dict) else None
    if not isinstance(fams, dict) or not all(v in SPLIT_NAMES for v in fams.values()):
        raise ValueError(f"{p}: expected {{'families': {{family: 'train'|'validation'|'test'}}}}")
    return dict(fams)


def family_splits(tasks: Iterable[Task], splits: dict[str, str] | None = None) -> dict[str, str]:
    """family → split for every family of `tasks`: from `splits`, else the stable hash."""
    given = splits or {}
    return {t.family: given.get(t.family) or hash_split(t.family) for t in tasks}


def tasks_in_split(tasks: list[Task], split: str, splits: dict[str, str] | None) -> list[Task]:
    """The tasks whose family is in `split` (a split name, or "heldout": validation + test)."""
    if split not in SPLIT_CHOICES:
        raise ValueError(f"unknown split {split!r}; use one of {', '.join(SPLIT_CHOICES)}")
    want = {"validation", "test"} if split == "heldout" else {split}
    of = family_splits(tasks, splits)
    return [t for t in tasks if of[t.family] in want]
