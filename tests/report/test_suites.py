"""Suites (`--suite`) and fixed subsets (`--limit`, `--tasks-per-family`, `--seed`)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from cudaperf.report.suites import load_suite, select
from cudaperf.tasks.io import load_sample

ROOT = Path(__file__).resolve().parents[2]
SPLIT_DOC = json.loads((ROOT / "data/splits.json").read_text())
SPLITS = SPLIT_DOC["families"]


@pytest.fixture(scope="module", autouse=True)
def _dataset_read_once():
    """The packaged dataset read once (tests.data_helpers), not at each load_suite."""
    import cudaperf.report.suites as suites
    from tests.data_helpers import read_tasks_once

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(suites, "load_tasks", read_tasks_once)
        yield


@pytest.fixture(scope="module")
def heldout():
    return load_suite("test-families")


def test_test_families_is_exactly_the_test_families_and_heldout_still_names_it(heldout):
    assert heldout.label == "test-families"
    old = load_suite("heldout")  # the suite's former name
    assert old.label == "test-families" and [t.id for t in old.tasks] == [
        t.id for t in heldout.tasks
    ]
    fams = {t.family for t in heldout.tasks}
    assert fams == {f for f, s in SPLITS.items() if s == "test"}
    assert sorted(t.id for t in heldout.tasks) == sorted(SPLIT_DOC["tasks"]["test"])


def test_train_unseen_is_the_manifest_of_a_training_run(tmp_path, heldout):
    train_ids = SPLIT_DOC["tasks"]["train"][:5]
    manifest = tmp_path / "holdout.json"
    manifest.write_text(json.dumps({"unseen_tasks": train_ids, "fit_tasks": 3000}))
    s = load_suite("train-unseen", manifest)
    assert [t.id for t in s.tasks] == train_ids and {SPLITS[t.family] for t in s.tasks} == {"train"}
    with pytest.raises(ValueError, match="--suite-path RUN/holdout.json"):
        load_suite("train-unseen")
    manifest.write_text(json.dumps({"unseen_tasks": [*train_ids, heldout.tasks[0].id]}))
    with pytest.raises(ValueError, match="non-training families"):
        load_suite("train-unseen", manifest)
    manifest.write_text(json.dumps({"unseen_tasks": ["gen/c2cuda/nope/00001"]}))
    with pytest.raises(ValueError, match="not in .*--dataset"):
        load_suite("train-unseen", manifest)
    manifest.write_text("{}")
    with pytest.raises(ValueError, match="not a holdout manifest"):
        load_suite("train-unseen", manifest)


def test_select_is_fixed_by_seed_and_independent_of_input_order(heldout):
    tasks = heldout.tasks
    a = select(tasks, limit=20, per_family=4, seed=7)
    b = select(list(reversed(tasks)), limit=20, per_family=4, seed=7)
    assert [t.id for t in a] == [t.id for t in b]
    assert [t.id for t in select(tasks, limit=20, per_family=4, seed=8)] != [t.id for t in a]
    counts = Counter(t.family for t in a)
    assert max(counts.values()) <= 4 and len(counts) == len({t.family for t in tasks})


def test_select_round_robins_families_so_a_limit_covers_many():
    tasks = load_sample()
    one_each = select(tasks, limit=len({t.family for t in tasks}))
    assert len({t.family for t in one_each}) == len(one_each)
    with pytest.raises(ValueError, match="limit=0"):
        select(tasks, limit=0)


def test_kernelbench_levels_from_the_users_checkout():
    path = ROOT / "tests/fixtures/kernelbench/KernelBench"
    s = load_suite("kernelbench:1", path)
    assert s.label == "kernelbench:1" and s.tasks
    assert all(t.id.startswith("kernelbench/level1/") for t in s.tasks)
    both = load_suite("kernelbench:1,2", path)
    assert {t.id.split("/")[1] for t in both.tasks} == {"level1", "level2"}


def test_bad_specs_say_how_to_fix_them(tmp_path):
    with pytest.raises(ValueError, match="--suite-path"):
        load_suite("babeltower")
    with pytest.raises(ValueError, match="not a task file or folder, nor a suite name"):
        load_suite(str(tmp_path / "nope.jsonl"))
    with pytest.raises(ValueError, match="use 1, 2 and/or 3"):
        load_suite("kernelbench:4", tmp_path)
    # a --dataset that does not exist is named as such (it was "pass --dataset PATH" though
    # one had been passed)
    with pytest.raises(FileNotFoundError, match=r"--dataset .*missing.jsonl.gz: no such file"):
        load_suite("test-families", dataset=tmp_path / "missing.jsonl.gz")


def test_several_suites_take_their_paths_in_order(tmp_path):
    from cudaperf.report.suites import load_suites

    kb = ROOT / "tests/fixtures/kernelbench/KernelBench"
    both = load_suites(["sample", "kernelbench:1"], [kb])
    assert [s.label for s in both] == ["sample", "kernelbench:1"] and all(s.tasks for s in both)
    with pytest.raises(ValueError, match="1 suite\\(s\\) read a checkout.*0 --suite-path"):
        load_suites(["sample", "kernelbench:1"], [])
    with pytest.raises(ValueError, match="share task ids"):
        load_suites(["sample", "sample"], [])
