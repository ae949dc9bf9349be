"""Building a task set: every family × its task count, deduplicated, with family splits.

A family's count is `per_family`, or, for a kind given a total (`c_tasks`, `torch_tasks`),
ceil(total / number of that kind's families), so totals spread evenly over the families.

Guaranteed: the same (families, counts, seed) gives byte-identical tasks (each task's
`random.Random` is seeded from a string of the seed, the family and the index, which
Python hashes with SHA-512, independent of PYTHONHASHSEED); no two implementations anywhere in
the set share their normalised code (a task whose code collides is drawn again with the next
attempt number); each family's split depends only on its name.
"""

from __future__ import annotations

import logging
import math
import random
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from cudaperf.datagen.base import FAMILIES, Family
from cudaperf.tasks.model import Task, TaskKind
from cudaperf.tasks.splits import SPLIT_SALT, SPLITS, split_of
from cudaperf.tasks.stats import normalize_code

__all__ = [
    "BuildConfig",
    "BuildReport",
    "build_tasks",
    "generate_one",
    "near_duplicate_rate",
    "plan",
    "refresh_tolerances",
    "regenerate",
    "splits_document",
]

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 20  # redraws of one task whose implementation code collides with another's
# A family whose tasks this many indices in a row were given up has no more distinct tasks:
# it stops there instead of drawing a --per-family of millions 20 times each.
EXHAUSTED_AFTER = 25


@dataclass(frozen=True)
class BuildConfig:
    """What `build_tasks` generates."""

    per_family: int = 5  # tasks per family (for a kind without a total below)
    seed: int = 0  # build seed; every task's rng derives from it
    families: tuple[str, ...] = ()  # family names; empty = all registered
    max_family_share: float = 0.10  # refuse a build where one family exceeds this share
    c_tasks: int = 0  # > 0: about this many C→CUDA tasks, spread evenly over the C families
    torch_tasks: int = 0  # > 0: about this many PyTorch→CUDA tasks, spread likewise

    def __post_init__(self) -> None:
        if self.per_family < 1:
            raise ValueError(f"per_family must be >= 1, got {self.per_family}")
        if self.c_tasks < 0 or self.torch_tasks < 0:
            raise ValueError("c_tasks and torch_tasks must be >= 0 (0: use per_family)")
        unknown = set(self.families) - set(FAMILIES)
        if unknown:
            raise ValueError(
                f"unknown famil(ies) {sorted(unknown)}; registered: {', '.join(sorted(FAMILIES))}"
            )
        if not 0 < self.max_family_share <= 1:
            raise ValueError(f"max_family_share must be in (0, 1], got {self.max_family_share}")


@dataclass
class BuildReport:
    """What a build produced."""

    tasks: list[Task] = field(default_factory=list)
    redraws: int = 0  # tasks drawn again because their code collided with an earlier task's
    dropped: list[str] = field(default_factory=list)  # "family/index: reason" for tasks given up


def _rng(seed: int, fam: str, index: int, attempt: int) -> random.Random:
    return random.Random(f"cudaperf-datagen:{seed}:{fam}:{index}:{attempt}")


def generate_one(fam: Family, seed: int, index: int, attempt: int = 0) -> Task:
    """One task of `fam`; deterministic in (seed, family, index, attempt)."""
    return fam.generate(_rng(seed, fam.name, index, attempt), index)


def plan(config: BuildConfig) -> list[tuple[Family, int]]:
    """(family, number of tasks) in build order; raises ValueError when one family's share of
    the planned total would exceed `max_family_share` (the message says how to fix it)."""
    names = config.families or tuple(sorted(FAMILIES))
    fams = [FAMILIES[n] for n in names]
    totals = {TaskKind.C2CUDA: config.c_tasks, TaskKind.TORCH2CUDA: config.torch_tasks}
    kinds = {k: sum(f.kind is k for f in fams) for k in totals}
    counts = [
        (f, math.ceil(totals[f.kind] / kinds[f.kind]) if totals[f.kind] else config.per_family)
        for f in fams
    ]
    total = sum(n for _, n in counts)
    biggest = max(counts, key=lambda fn: fn[1])
    if biggest[1] > config.max_family_share * total + 1e-9:
        raise ValueError(
            f"family {biggest[0].name} would hold {biggest[1]} of {total} tasks (share "
            f"{biggest[1] / total:.2f}) > --max-family-share {config.max_family_share}; use more "
            f"families (at least {int(1 / config.max_family_share + 0.999)} of equal size), "
            "balance the per-kind totals, or raise the limit (--max-family-share 1 for one "
            "family)"
        )
    return counts


def build_tasks(config: BuildConfig, progress: Callable[[str], None] | None = None) -> BuildReport:
    """Generate every family's tasks in a fixed order; `progress(family)` after each task.

    When a family gives up on tasks (its code kept colliding) and its kind was given a total,
    the other families of that kind make the missing tasks with their next indices (in name
    order, never past `max_family_share` of the planned total), so the kind still reaches its
    total where the families have the variety for it."""
    report = BuildReport()
    seen: set[str] = set()
    planned = plan(config)
    made: dict[str, list[Task]] = {}
    for fam, count in planned:
        made[fam.name] = []
        run = 0  # indices given up in a row
        for index in range(count):
            task = _draw_unique(fam, config.seed, index, seen, report)
            if task is not None:
                made[fam.name].append(task)
            run = 0 if task is not None else run + 1
            if progress:
                progress(fam.name)
            if run >= EXHAUSTED_AFTER and index + 1 < count:
                report.dropped.append(
                    f"{fam.name}: {EXHAUSTED_AFTER} tasks in a row collided, so the family has "
                    f"no more distinct tasks; its last {count - index - 1} were not drawn"
                )
                break
    _top_up(config, planned, made, seen, report)
    report.tasks = [t for fam, _ in planned for t in made[fam.name]]
    return report


def _top_up(config, planned, made, seen, report) -> None:
    cap = int(config.max_family_share * sum(n for _, n in planned) + 1e-9)
    totals = {TaskKind.C2CUDA: config.c_tasks, TaskKind.TORCH2CUDA: config.torch_tasks}
    for kind, total in totals.items():
        fams = [f for f, _ in planned if f.kind is kind]
        next_index = {f.name: n for f, n in planned if f.kind is kind}
        have = sum(len(made[f.name]) for f in fams)
        open_ = [f for f in fams if len(made[f.name]) == next_index[f.name]]  # none dropped
        while total and have < total and open_:
            for fam in list(open_):
                if have >= total:
                    break
                if len(made[fam.name]) >= cap:
                    open_.remove(fam)
                    continue
                task = _draw_unique(fam, config.seed, next_index[fam.name], seen, report)
                next_index[fam.name] += 1
                if task is None:
                    open_.remove(fam)
                    continue
                made[fam.name].append(task)
                have += 1


def _draw_unique(fam: Family, seed: int, index: int, seen: set[str], report: BuildReport):
    for attempt in range(MAX_ATTEMPTS):
        task = generate_one(fam, seed, index, attempt)
        keys = [normalize_code(i.code) for i in task.implementations]
        if len(set(keys)) == len(keys) and not seen.intersection(keys):
            seen.update(keys)
            return task
        report.redraws += 1
    report.dropped.append(f"{fam.name}/{index}: code collided in {MAX_ATTEMPTS} draws")
    log.warning(
        "dropped %s/%d: implementation code collided %d times", fam.name, index, MAX_ATTEMPTS
    )
    return None


_NUM = re.compile(r"\b\d+(\.\d*)?([eE][-+]?\d+)?[fFuUlL]*\b")


def _skeleton(code: str) -> str:
    """Normalised code with every numeric literal replaced by 0."""
    return _NUM.sub("0", normalize_code(code))


def near_duplicate_rate(tasks: Iterable[Task]) -> float:
    """Share of implementations whose code equals another task's implementation once
    comments, whitespace and all numeric literals (constants, block and tile sizes) are
    erased: code that differs only in its numbers."""
    owners: dict[str, set[str]] = {}
    impls: list[tuple[str, str]] = []
    for t in tasks:
        for i in t.implementations:
            key = _skeleton(i.code)
            owners.setdefault(key, set()).add(t.id)
            impls.append((t.id, key))
    if not impls:
        return 0.0
    near = sum(1 for tid, key in impls if len(owners[key] - {tid}) > 0)
    return near / len(impls)


def splits_document(tasks: list[Task]) -> dict:
    """The splits file: each family's split and the task ids per split."""
    fams = sorted({t.family for t in tasks})
    by_split: dict[str, list[str]] = {name: [] for name, _ in SPLITS}
    for t in tasks:
        by_split[split_of(t.family)].append(t.id)
    return {
        "salt": SPLIT_SALT,
        "rule": "split of a family = bucket of sha256(salt:family) (80/10/10 train/val/test)",
        "families": {f: split_of(f) for f in fams},
        "tasks": by_split,
    }


def regenerate(task: Task, seed: int = 0) -> Task | None:
    """What the generator now writes for `task` (a task of a build with `seed`): its family
    and index (`provenance`), at the first attempt whose implementations include every one of
    `task`'s with the same code; None when the task is not such a task (an imported one, or a
    family that no longer draws it)."""
    fam = FAMILIES.get(task.family)
    index = (task.provenance or {}).get("index")
    if fam is None or index is None or not str(index).isdigit():
        return None
    have = {i.id: i.code for i in task.implementations}
    for attempt in range(MAX_ATTEMPTS):
        new = generate_one(fam, seed, int(index), attempt)
        codes = {i.id: i.code for i in new.implementations}
        if new.id == task.id and all(codes.get(k) == c for k, c in have.items()):
            return new
    return None


def _as_built(task: Task) -> dict:
    """`task` without what a measurement adds (implementation measurements) or drops
    (implementations that failed it), for comparing with the generator's."""
    d = task.model_dump(mode="json")
    for i in d["implementations"]:
        i.pop("measurements", None)
    return d


def refresh_tolerances(tasks: list[Task], seed: int = 0) -> tuple[list[Task], list[str]]:
    """`tasks` (a measured build with `seed`) with each tolerance replaced by the one the
    generator now gives, and the ids whose tolerance changed. Everything else must be what the
    generator writes (measurements and dropped implementations aside): a tolerance does not
    change a measured time, any other field would, so a task that differs elsewhere, or is not
    generated, raises ValueError naming it."""
    out, changed = [], []
    for t in tasks:
        new = regenerate(t, seed)
        if new is None:
            raise ValueError(f"{t.id}: not a task this generator draws (seed {seed})")
        keep = {i.id for i in t.implementations}
        built = new.model_copy(
            update={
                "implementations": [i for i in new.implementations if i.id in keep],
                "tolerance": t.tolerance,
            }
        )
        a, b = _as_built(built), _as_built(t)
        if a != b:
            fields = sorted(k for k in a if a[k] != b.get(k))
            raise ValueError(
                f"{t.id}: the generator now writes {', '.join(fields)} differently, not only "
                "the tolerance; rebuild and measure the data instead (cudaperf data build, "
                "cudaperf data measure)"
            )
        if new.tolerance != t.tolerance:
            changed.append(t.id)
            t = t.model_copy(update={"tolerance": new.tolerance})
        out.append(t)
    return out, changed
