"""Family splits: one stable rule, the splits file, selecting tasks by split."""

from __future__ import annotations

import json

import pytest

from cudaperf.datagen import FAMILIES
from cudaperf.tasks.model import Task
from cudaperf.tasks.splits import (
    family_splits,
    read_splits,
    split_of,
    splits_task_ids,
    tasks_in_split,
)
from tests.tasks.helpers import c_task


def _task(i: int, family: str) -> Task:
    return Task.model_validate(c_task(id=f"t/{family}/{i}", family=family))


def test_split_depends_only_on_family_name():
    # Pinned values: a change here reshuffles the splits of a published data set.
    assert split_of("stencil2d") == "train"
    assert split_of("torch_layernorm") == "test"
    assert split_of("torch_softmax") == "validation"
    assert {split_of(f) for f in FAMILIES} == {"train", "validation", "test"}


def test_the_rule_matches_the_committed_splits_file():
    doc = read_splits("data/splits.json")
    assert doc and all(split_of(f) == s for f, s in doc.items())


def test_read_splits_errors(tmp_path):
    p = tmp_path / "s.json"
    p.write_text(json.dumps({"families": {"a": "holdout"}}))
    with pytest.raises(ValueError, match="train"):
        read_splits(p)
    with pytest.raises(ValueError, match="cannot read"):
        read_splits(tmp_path / "missing.json")


def test_tasks_in_split_uses_the_file_then_the_rule():
    given = {"fa": "train", "fb": "validation", "fc": "test"}
    tasks = [_task(i, f) for i, f in enumerate(["fa", "fa", "fb", "fc", "stencil2d"])]
    assert [t.id for t in tasks_in_split(tasks, "train", given)] == [
        "t/fa/0",
        "t/fa/1",
        "t/stencil2d/4",  # not in the file: the hash rule says train
    ]
    assert {t.family for t in tasks_in_split(tasks, "heldout", given)} == {"fb", "fc"}
    assert {t.family for t in tasks_in_split(tasks, "test", given)} == {"fc"}
    assert family_splits(tasks, None)["fa"] == split_of("fa")
    with pytest.raises(ValueError, match="heldout"):
        tasks_in_split(tasks, "dev", given)


def test_splits_task_ids_reads_the_task_lists_or_says_it_cannot(tmp_path):
    p = tmp_path / "splits.json"
    p.write_text(
        json.dumps({"families": {"a": "train"}, "tasks": {"train": ["x", "y"], "test": []}})
    )
    assert splits_task_ids(p) == {"x", "y"}
    assert splits_task_ids(tmp_path / "missing.json") is None
    for bad in ("{", json.dumps({"families": {"a": "train"}}), json.dumps({"tasks": ["x"]}), "[]"):
        p.write_text(bad)
        assert splits_task_ids(p) is None, bad
