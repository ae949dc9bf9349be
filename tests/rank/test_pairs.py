import pytest

from cudaperf.rank.pairs import build_pairs
from tests.rank.helpers import H200, kernel, task

A100 = "NVIDIA A100"


def test_pairs_need_same_task_config_and_gpu():
    t = task(
        "t/x/0",
        "x",
        {
            "a": (kernel(0), {("small", H200): 10.0, ("big", A100): 5.0}),
            "b": (kernel(1), {("small", H200): 20.0, ("big", H200): 6.0}),
        },
    )
    u = task("t/x/1", "x", {"c": (kernel(2), {("small", H200): 1.0})})
    pairs = build_pairs([t, u])
    assert [(p.task_id, p.config, p.gpu, p.a, p.b) for p in pairs] == [
        ("t/x/0", "small", H200, "a", "b")
    ]
    assert pairs[0].a_faster and pairs[0].ratio == 2.0


def test_ratio_filter_and_ties():
    t = task(
        "t/x/0",
        "x",
        {
            "a": (kernel(0), {("small", H200): 10.0, ("big", H200): 10.0}),
            "b": (kernel(1), {("small", H200): 11.0, ("big", H200): 10.0}),
            "c": (kernel(2), {("small", H200): 13.0}),
        },
    )
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
