"""Metrics on hand-made rows with known answers, and the bootstrap's behaviour."""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np
import pytest

from cudaperf.report.metrics import (
    Metric,
    bootstrap,
    paired_bootstrap,
    pass_at_k,
    rejected_reasons,
    standard_metrics,
    turn_metrics,
    value,
)

from .helpers import meta, row, views


def by_name(ms: list[Metric]) -> dict[str, Metric]:
    return {m.name: m for m in ms}


def brute_pass_at_k(n: int, c: int, k: int) -> float:
    """Share of k-subsets of n samples (c correct) holding a correct one, by enumeration."""
    subsets = list(combinations(range(n), k))
    return sum(any(i < c for i in s) for s in subsets) / len(subsets)


@pytest.mark.parametrize("n,c,k", [(5, 0, 1), (5, 1, 1), (5, 2, 3), (8, 3, 4), (10, 9, 2)])
def test_pass_at_k_equals_its_closed_form_and_the_enumeration(n, c, k):
    closed = 1 - math.comb(n - c, k) / math.comb(n, k)
    assert pass_at_k(n, c, k) == pytest.approx(closed)
    assert pass_at_k(n, c, k) == pytest.approx(brute_pass_at_k(n, c, k))


def test_pass_at_k_rejects_k_above_n():
    with pytest.raises(ValueError, match="0 < k <= n"):
        pass_at_k(3, 1, 4)


# Two tasks of one family, 4 samples each, 2 turns. Task a: turn 1 has 2 correct samples
# (1.5x and 3x vs naive) and a compile error and a wrong output; turn 2 one correct at 5x.
# Task b: nothing correct in turn 1 (compile errors, one format error); turn 2 one at 0.5x.
# Task c (baseline cpu only): turn 1 correct at 10x vs cpu on all samples.
ROWS = [
    row("a", 1, 0, naive=1.5), row("a", 1, 1, naive=3.0), row("a", 1, 2, "compile_error"),
    row("a", 1, 3, "wrong_output"),
    row("a", 2, 0, naive=5.0), *[row("a", 2, i, "compile_error") for i in (1, 2, 3)],
    *[row("b", 1, i, "compile_error") for i in (0, 1, 2)], row("b", 1, 3, "format_error"),
    row("b", 2, 0, naive=0.5), *[row("b", 2, i, "runtime_error") for i in (1, 2, 3)],
    *[row("c", 1, i, family="g", cpu=10.0) for i in range(4)],
    *[row("c", 2, i, family="g", cpu=10.0) for i in range(4)],
]  # fmt: skip
METAS = [meta("a"), meta("b"), meta("c", family="g", baselines=("cpu",))]


def test_known_answers_on_hand_made_rows():
    v = views(ROWS, METAS)
    m = by_name(standard_metrics(4, 2, ["naive", "cpu"]))

    def val(name):
        return value(m[name], v)

    assert val("compile rate (turn 1)") == pytest.approx((3 / 4 + 0 + 1) / 3)
    assert val("correct rate (turn 1)") == pytest.approx((2 / 4 + 0 + 1) / 3)
    assert val("pass@1 (turn 1)") == pytest.approx((0.5 + 0 + 1) / 3)
    assert val("pass@2 (turn 1)") == pytest.approx((1 - math.comb(2, 2) / math.comb(4, 2) + 1) / 3)
    assert val("correct, best of 4x2") == pytest.approx(1.0)  # b turns correct in turn 2
    # fast_p vs naive only over the tasks having the naive baseline (a, b)
    assert val("fast_1 vs naive (turn 1)") == pytest.approx((2 / 4 + 0) / 2)
    assert val("fast_2 vs naive (turn 1)") == pytest.approx((1 / 4 + 0) / 2)
    assert val("fast_2 vs naive (best of 4x2)") == pytest.approx(1 / 2)  # a's 5x; b's 0.5x
    assert val("fast_1 vs cpu (turn 1)") == 1.0 and m["fast_1 vs cpu (turn 1)"].per_task(v[0]) == []
    geo = math.exp((math.log(1.5) + math.log(3.0)) / 2)
    assert val("geomean speedup vs naive, correct turn-1 samples") == pytest.approx(geo)
    assert val("median speedup vs naive, correct turn-1 samples") == pytest.approx(2.25)
    all_geo = "geomean speedup vs naive, all tasks (best of 4x2; failure = 1x)"
    assert val(all_geo) == pytest.approx(math.sqrt(5.0 * 0.5))
    all_med = "median speedup vs naive, all tasks (best of 4x2; failure = 0)"
    assert val(all_med) == pytest.approx((5.0 + 0.5) / 2)


def test_failures_count_as_one_in_the_geomean_and_zero_in_the_median():
    rows = [row("a", 1, 0, naive=4.0), row("b", 1, 0, "compile_error")]
    v = views(rows, [meta("a"), meta("b")])
    m = by_name(standard_metrics(1, 1, ["naive"]))
    assert value(m["geomean speedup vs naive, all tasks (best of 1x1; failure = 1x)"], v) == (
        pytest.approx(2.0)
    )  # sqrt(4 * 1)
    assert value(m["median speedup vs naive, all tasks (best of 1x1; failure = 0)"], v) == 2.0


def test_per_turn_best_so_far_rises_and_never_falls():
    v = views(ROWS, METAS)
    t1, t2 = (by_name(turn_metrics(t, ["naive"])) for t in (1, 2))
    assert value(t1["correct by turn 1"], v) == pytest.approx(2 / 3)
    assert value(t2["correct by turn 2"], v) == 1.0
    assert value(t1["geomean vs naive by turn 1"], v) == pytest.approx(math.sqrt(3.0 * 1.0))
    assert value(t2["geomean vs naive by turn 2"], v) == pytest.approx(math.sqrt(5.0 * 0.5))
    # a later turn that is worse than the best so far does not lower it
    worse = [*ROWS, *[row("a", 3, i, "compile_error") for i in range(4)]]
    t3 = by_name(turn_metrics(3, ["naive"]))
    assert value(t3["fast_1 vs naive by turn 3"], views(worse, METAS)) == 0.5


def test_rejected_share_and_reasons():
    rows = [
        row("a", 1, 0, "rejected").model_copy(update={"findings": ["timer_patch"]}),
        row("a", 1, 1, "rejected").model_copy(update={"findings": ["timer_patch", "side_stream"]}),
        row("a", 1, 2),
        row("a", 1, 3, "format_error"),  # not evaluated: not in the denominator
    ]
    share, reasons = rejected_reasons(rows)
    assert share == pytest.approx(2 / 3)
    assert reasons == {"timer_patch": 2, "side_stream": 1}


def synthetic(p: float, n_tasks: int, rng, families: int | None = None):
    rows, metas = [], []
    for i in range(n_tasks):
        fam = f"f{i % families}" if families else f"t{i}"
        ok = rng.random() < p
        rows.append(row(f"t{i}", 1, 0, "ok" if ok else "compile_error", family=fam, naive=2.0))
        metas.append(meta(f"t{i}", family=fam))
    return views(rows, metas)


def test_bootstrap_interval_covers_the_true_rate_about_95_percent_of_the_time():
    rng = np.random.default_rng(1)
    m = by_name(standard_metrics(1, 1, []))["correct rate (turn 1)"]
    hits, reps = 0, 160
    for r in range(reps):
        lo, hi = bootstrap(m, synthetic(0.3, 60, rng), n_boot=300, seed=r)
        hits += lo <= 0.3 <= hi
    assert 0.88 <= hits / reps <= 0.995  # nominal 0.95; percentile bootstrap, n = 60


def test_bootstrap_clusters_by_family():
    rng = np.random.default_rng(2)
    m = by_name(standard_metrics(1, 1, []))["correct rate (turn 1)"]
    one_family = synthetic(0.5, 40, rng, families=1)
    assert bootstrap(m, one_family, n_boot=200) == (value(m, one_family),) * 2  # one cluster
    lo, hi = bootstrap(m, one_family, n_boot=200, by="task")
    assert hi - lo > 0.1


def test_paired_bootstrap_of_identical_runs_is_zero_and_of_a_better_run_excludes_zero():
    rng = np.random.default_rng(3)
    m = by_name(standard_metrics(1, 1, []))["correct rate (turn 1)"]
    a = synthetic(0.3, 80, rng)
    assert paired_bootstrap(m, a, a, n_boot=200) == (0.0, (0.0, 0.0))
    better = [row(t.meta.id, 1, 0, family=t.meta.family, naive=2.0) for t in a]
    b = views(better, [t.meta for t in a])
    d, (lo, hi) = paired_bootstrap(m, a, b, n_boot=300)
    assert d == pytest.approx(1 - value(m, a)) and lo > 0


def test_paired_bootstrap_of_speedups_is_a_ratio():
    a = views([row("t", 1, 0, naive=2.0), row("u", 1, 0, naive=3.0)], [meta("t"), meta("u")])
    b = views([row("t", 1, 0, naive=4.0), row("u", 1, 0, naive=6.0)], [meta("t"), meta("u")])
    m = by_name(standard_metrics(1, 1, ["naive"]))
    d, ci = paired_bootstrap(m["geomean speedup vs naive, correct turn-1 samples"], a, b, 100)
    assert d == pytest.approx(2.0) and ci == pytest.approx((2.0, 2.0))
