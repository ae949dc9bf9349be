"""Family splits: which families are train, validation or test (one rule for the whole package).

A family's split depends only on its name: the bucket of a salted SHA-256 of the name, 80/10/10
train/validation/test. `cudaperf data build` writes the result into `data/splits.json`
(`families`: family → split); every stage that needs splits reads that file, or applies this
same rule to a task set that has none. Guaranteed: the same family always gets the same split;
changing `SPLIT_SALT` would reshuffle every family, so it never changes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path

from cudaperf.tasks.model import Task

__all__ = [
    "SPLITS",
    "SPLIT_CHOICES",
    "SPLIT_NAMES",
    "SPLIT_SALT",
    "family_splits",
    "read_splits",
    "split_of",
    "splits_task_ids",
    "tasks_in_split",
]

SPLIT_SALT = "cudaperf-split-v1"  # changing it reshuffles every family: never change it
SPLITS = (("train", 0.8), ("validation", 0.9), ("test", 1.0))  # cumulative hash thresholds
SPLIT_NAMES = tuple(name for name, _ in SPLITS)
# What `tasks_in_split` accepts: a split name, or "heldout" for validation + test.
SPLIT_CHOICES = (*SPLIT_NAMES, "heldout")


def split_of(family: str) -> str:
    """train / validation / test for a family, from a salted SHA-256 of its name (stable)."""
    h = hashlib.sha256(f"{SPLIT_SALT}:{family}".encode()).digest()
    u = int.from_bytes(h[:8], "big") / 2**64
    for name, upper in SPLITS:
        if u < upper:
            return name
    return SPLITS[-1][0]


def read_splits(path: str | Path) -> dict[str, str]:
    """family → split from a splits.json (the `families` mapping `cudaperf data build` writes)."""
    p = Path(path)
    try:
        doc = json.loads(p.read_text())
    except (OSError, ValueError) as e:
        raise ValueError(
            f"{p}: cannot read the splits file ({e}); give the splits.json `cudaperf data "
            "build` wrote (its 'families' maps each family to train, validation or test)"
        ) from None
    fams = doc.get("families") if isinstance(doc, dict) else None
    if not isinstance(fams, dict) or not all(v in SPLIT_NAMES for v in fams.values()):
        raise ValueError(f"{p}: expected {{'families': {{family: 'train'|'validation'|'test'}}}}")
    return dict(fams)


def splits_task_ids(path: str | Path) -> set[str] | None:
    """The task ids a splits file's `tasks` lists name (split → [task id], what `cudaperf data
    build` writes beside the families); None when the file is missing, unreadable, or has no
    such lists: the caller decides what a file it cannot read means."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
        return {str(i) for ids in doc["tasks"].values() for i in ids}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def family_splits(tasks: Iterable[Task], splits: dict[str, str] | None = None) -> dict[str, str]:
    """family → split for every family of `tasks`: from `splits`, else the stable hash."""
    given = splits or {}
    return {t.family: given.get(t.family) or split_of(t.family) for t in tasks}


def tasks_in_split(tasks: list[Task], split: str, splits: dict[str, str] | None) -> list[Task]:
    """The tasks whose family is in `split` (a split name, or "heldout": validation + test)."""
    if split not in SPLIT_CHOICES:
        raise ValueError(f"unknown split {split!r}; use one of {', '.join(SPLIT_CHOICES)}")
    want = {"validation", "test"} if split == "heldout" else {split}
    of = family_splits(tasks, splits)
    return [t for t in tasks if of[t.family] in want]
