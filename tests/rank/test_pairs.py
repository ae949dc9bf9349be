import json

import pytest

from cudaperf.datagen.build import split_of
from cudaperf.rank.pairs import build_pairs, family_splits, hash_split, read_splits, tasks_in_split
from tests.rank.helpers import H200, SPLITS, kernel, task, unroll_tasks

A100 = "NVIDIA A100"


def test_pairs_need_same_task_config_and_gpu():
    t = task("t/x/0", "x", {
        "a": (kernel(0), {("small", H200): 10.0, ("big", A100): 5.0}),
        "b": (kernel(1), {("small", H200): 20.0, ("big", H200): 6.0}),
    })  # fmt: skip
    u = task("t/x/1", "x", {"c": (kernel(2), {("small", H200): 1.0})})
    pairs = build_pairs([t, u])
    assert [(p.task_id, p.config, p.gpu, p.a, p.b) for p in pairs] == [
        ("t/x/0", "small", H200, "a", "b")
    ]
    assert pairs[0].a_faster and pairs[0].ratio == 2.0


def test_ratio_filter_and_ties():
    t = task("t/x/0", "x", {
        "a": (kernel(0), {("small", H200): 10.0, ("big", H200): 10.0}),
        "b": (kernel(1), {("small", H200): 11.0, ("big", H200): 10.0}),
        "c": (kernel(2), {("small", H200): 13.0}),
    })  # fmt: skip
    all_pairs = build_pairs([t])
    assert {(p.config, p.a, p.b) for p in all_pairs} == {
        ("small", "a", "b"),
        ("small", "a", "c"),
        ("small", "b", "c"),
    }  # the tie on "big" is no pair
    strong = build_pairs([t], min_ratio=1.2)
    assert {(p.a, p.b) for p in strong} == {("a", "c")}
    with pytest.raises(ValueError, match=">= 1"):
        build_pairs([t], min_ratio=0.5)


def test_hash_split_matches_the_generator_and_data_splits():
    for fam in ("stencil1d", "torch_softmax", "torch_layernorm", "saxpy", "whatever"):
        assert hash_split(fam) == split_of(fam)
    doc = read_splits("data/splits.json")
    assert all(hash_split(f) == s for f, s in doc.items())


def test_read_splits_errors(tmp_path):
    p = tmp_path / "s.json"
    p.write_text(json.dumps({"families": {"a": "holdout"}}))
    with pytest.raises(ValueError, match="train"):
        read_splits(p)
    with pytest.raises(ValueError, match="cannot read"):
        read_splits(tmp_path / "missing.json")


def test_tasks_in_split():
    tasks = unroll_tasks()
    assert {t.family for t in tasks_in_split(tasks, "train", SPLITS)} == {
        "fam0",
        "fam1",
        "fam2",
        "fam3",
    }
    assert {t.family for t in tasks_in_split(tasks, "heldout", SPLITS)} == {"fam4", "fam5"}
    assert {t.family for t in tasks_in_split(tasks, "test", SPLITS)} == {"fam5"}
    assert family_splits(tasks, None)["fam0"] == hash_split("fam0")
    with pytest.raises(ValueError, match="heldout"):
        tasks_in_split(tasks, "dev", SPLITS)
