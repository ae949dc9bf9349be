"""Deterministic generator of C→CUDA and PyTorch→CUDA tasks with several implementations each.

`build_tasks(BuildConfig(per_family=N, seed=S))` runs every registered family (see
`cudaperf.datagen.families`); a family's train/validation/test split is
`cudaperf.tasks.splits.split_of(family)`.
"""

from cudaperf.datagen import families as _families  # noqa: F401 - registers the families
from cudaperf.datagen.base import FAMILIES, Family, family
from cudaperf.datagen.build import (
    BuildConfig,
    BuildReport,
    build_tasks,
    generate_one,
    near_duplicate_rate,
    splits_document,
)

__all__ = [
    "FAMILIES",
    "BuildConfig",
    "BuildReport",
    "Family",
    "build_tasks",
    "family",
    "generate_one",
    "near_duplicate_rate",
    "splits_document",
]
