"""Metrics on hand-made rows with known answers, and the bootstrap's behaviour."""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np
import pytest

from cudaperf.report.intervals import cluster_t
from cudaperf.report.metrics import (
    FAIL_FLOOR,
    Metric,
    interval,
    paired_interval,
    paired_tasks,
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
    row("a", 1, 0, naive=1.5),
    row("a", 1, 1, naive=3.0),
    row("a", 1, 2, "compile_error"),
    row("a", 1, 3, "wrong_output"),
    row("a", 2, 0, naive=5.0),
    *[row("a", 2, i, "compile_error") for i in (1, 2, 3)],
    *[row("b", 1, i, "compile_error") for i in (0, 1, 2)],
    row("b", 1, 3, "format_error"),
    row("b", 2, 0, naive=0.5),
    *[row("b", 2, i, "runtime_error") for i in (1, 2, 3)],
    *[row("c", 1, i, family="g", cpu=10.0) for i in range(4)],
    *[row("c", 2, i, family="g", cpu=10.0) for i in range(4)],
]
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
    all_geo = "geomean speedup vs naive, all tasks (best of 4x2; failure = 0.1x floor)"
    assert val(all_geo) == pytest.approx(math.sqrt(5.0 * 0.5))
    all_med = "median speedup vs naive, all tasks (best of 4x2; failure = 0)"
    assert val(all_med) == pytest.approx((5.0 + 0.5) / 2)


GEO_ALL = "geomean speedup vs naive, all tasks (best of 1x1; failure = 0.1x floor)"


def test_failures_count_as_the_floor_in_the_geomean_and_zero_in_the_median():
    rows = [row("a", 1, 0, naive=4.0), row("b", 1, 0, "compile_error")]
    v = views(rows, [meta("a"), meta("b")])
    m = by_name(standard_metrics(1, 1, ["naive"]))
    assert value(m[GEO_ALL], v) == pytest.approx(math.sqrt(4 * FAIL_FLOOR))
    assert value(m["median speedup vs naive, all tasks (best of 1x1; failure = 0)"], v) == 2.0


def test_no_failure_ranks_above_a_correct_kernel_in_the_all_tasks_geomean():
    m = by_name(standard_metrics(1, 1, ["naive"]))[GEO_ALL]
    metas = [meta("a"), meta("b")]
    for slow in (0.5, FAIL_FLOOR / 2):  # a slow correct kernel, and one below the floor
        failed = views([row("a", 1, 0, naive=2.0), row("b", 1, 0, "wrong_output")], metas)
        correct = views([row("a", 1, 0, naive=2.0), row("b", 1, 0, naive=slow)], metas)
        assert value(m, correct) >= value(m, failed)  # 1x for the failure ranked it above 0.5x
    assert value(m, views([row("a", 1, 0, naive=0.5)], metas[:1])) > FAIL_FLOOR


def test_infra_errors_count_in_no_rate():
    rows = [
        row("a", 1, 0, naive=2.0),
        row("a", 1, 1, "infra_error"),
        row("b", 1, 0, "infra_error"),
        row("b", 1, 1, "infra_error"),
    ]
    v = views(rows, [meta("a"), meta("b")])
    m = by_name(standard_metrics(2, 1, ["naive"]))
    for name in (
        "compile rate (turn 1)",
        "correct rate (turn 1)",
        "correct, best of 2x1",
        "fast_1 vs naive (turn 1)",
        "fast_1 vs naive (best of 2x1)",
    ):
        assert value(m[name], v) == 1.0, name  # a alone: b has no scored sample
        assert [bool(m[name].per_task(t)) for t in v] == [True, False], name
    assert value(m["pass@2 (turn 1)"], v) is None  # a has one scored sample: pass@2 undefined
    assert value(
        m[f"geomean speedup vs naive, all tasks (best of 2x1; failure = {FAIL_FLOOR:g}x floor)"], v
    ) == pytest.approx(2.0)
    share, _ = rejected_reasons([*rows, row("c", 1, 0, "rejected")])
    assert share == pytest.approx(1 / 2)  # of a's ok and c's rejection; infra errors left out


def test_a_task_whose_baseline_was_not_timed_takes_no_part_in_its_metrics():
    # a: correct, but the evaluator could not time the naive baseline (no speedup recorded)
    rows = [row("a", 1, 0), row("b", 1, 0, naive=3.0)]
    v = views(rows, [meta("a"), meta("b")])
    m = by_name(standard_metrics(1, 1, ["naive"]))
    assert v[0].unmeasured("naive") and not v[1].unmeasured("naive")
    for name in (
        "fast_1 vs naive (turn 1)",
        "fast_1 vs naive (best of 1x1)",
        GEO_ALL,
        "median speedup vs naive, all tasks (best of 1x1; failure = 0)",
    ):
        assert [bool(m[name].per_task(t)) for t in v] == [False, True], name
    assert value(m["fast_1 vs naive (turn 1)"], v) == 1.0  # not 0.5: a is not "not fast"
    assert value(m[GEO_ALL], v) == pytest.approx(3.0)  # not sqrt(3 * 1)
    assert value(m["correct rate (turn 1)"], v) == 1.0  # correctness is still counted


def test_per_turn_best_so_far_rises_and_never_falls():
    v = views(ROWS, METAS)
    t1, t2 = (by_name(turn_metrics(t, ["naive"])) for t in (1, 2))
    assert value(t1["correct by turn 1"], v) == pytest.approx(2 / 3)
    assert value(t2["correct by turn 2"], v) == 1.0
    assert value(t1["geomean vs naive by turn 1"], v) == pytest.approx(math.sqrt(3 * FAIL_FLOOR))
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


def test_a_metric_interval_is_the_cluster_t_interval_of_its_family_sums():
    rng = np.random.default_rng(1)
    m = by_name(standard_metrics(1, 1, []))["correct rate (turn 1)"]
    v = synthetic(0.3, 60, rng, families=6)
    sums = [sum(t.turns[1][0].correct for t in v if t.meta.family == f"f{k}") for k in range(6)]
    _, want = cluster_t(np.array(sums, float), np.full(6, 10.0), 0.95, rate=True)
    assert interval(m, v) == want and want.two_sided


def test_one_family_gives_no_interval_and_tasks_within_it_do():
    rng = np.random.default_rng(2)
    m = by_name(standard_metrics(1, 1, []))["correct rate (turn 1)"]
    one_family = synthetic(0.5, 40, rng, families=1)
    iv = interval(m, one_family)
    assert iv.lo is None and iv.hi is None and "one family" in iv.note  # not [x, x]
    iv = interval(m, one_family, by="task")
    assert iv.two_sided and iv.hi - iv.lo > 0.1


def test_every_task_correct_gives_a_one_sided_bound_not_a_zero_width_interval():
    rows = [row(f"t{i}", 1, 0, family=f"f{i % 3}", naive=2.0) for i in range(9)]
    v = views(rows, [meta(f"t{i}", family=f"f{i % 3}") for i in range(9)])
    m = by_name(standard_metrics(1, 1, []))["correct rate (turn 1)"]
    iv = interval(m, v)
    assert iv.note == "one-sided" and iv.hi is None and iv.lo == pytest.approx(0.05 ** (1 / 3))


def test_medians_get_no_interval():
    rng = np.random.default_rng(4)
    m = by_name(standard_metrics(1, 1, ["naive"]))
    v = synthetic(0.5, 30, rng, families=5)
    iv = interval(m["median speedup vs naive, correct turn-1 samples"], v)
    assert iv.lo is None and "median" in iv.note


def test_paired_interval_of_identical_runs_is_none_and_of_a_better_run_excludes_zero():
    rng = np.random.default_rng(3)
    m = by_name(standard_metrics(1, 1, []))["correct rate (turn 1)"]
    a = synthetic(0.3, 80, rng, families=8)
    d, iv = paired_interval(m, a, a)
    assert d == 0.0 and iv.lo is None and "same difference" in iv.note
    better = [row(t.meta.id, 1, 0, family=t.meta.family, naive=2.0) for t in a]
    b = views(better, [t.meta for t in a])
    d, iv = paired_interval(m, a, b)
    assert d == pytest.approx(1 - value(m, a)) and iv.lo > 0


def test_paired_interval_of_speedups_is_a_ratio():
    ids = ["t", "u", "w", "x"]
    ms = [meta(i, family=f"f{k}") for k, i in enumerate(ids)]
    a = views([row(i, 1, 0, family=f"f{k}", naive=2.0 + k) for k, i in enumerate(ids)], ms)
    b = views(
        [
            row(i, 1, 0, family=f"f{k}", naive=(2.0 + k) * (1.8 + 0.1 * k))
            for k, i in enumerate(ids)
        ],
        ms,
    )
    m = by_name(standard_metrics(1, 1, ["naive"]))
    d, iv = paired_interval(m["geomean speedup vs naive, correct turn-1 samples"], a, b)
    assert d == pytest.approx(math.prod(1.8 + 0.1 * k for k in range(4)) ** 0.25)
    assert 1.5 < iv.lo < d < iv.hi < 2.5 and iv.lo * iv.hi == pytest.approx(d * d)  # log scale


def _metric(name: str, baselines=()):
    return next(m for m in standard_metrics(2, 1, list(baselines)) if m.name == name)


def _run(spec: dict[str, tuple[str, list]]):
    """task -> (family, its turn-1 samples: statuses, or (status, speedup vs naive) pairs)."""
    rows, metas = [], []
    for tid, (fam, samples) in spec.items():
        metas.append(meta(tid, family=fam))
        for i, s in enumerate(samples):
            st, sp = s if isinstance(s, tuple) else (s, 2.0)
            rows.append(row(tid, 1, i, st, family=fam, naive=sp))
    return views(rows, metas)


OK, BAD, INFRA = "ok", "compile_error", "infra_error"


def test_a_paired_difference_uses_only_the_tasks_both_runs_score():
    """Every task equal in both runs except h1, whose samples were all infra errors in B: the
    paired difference is 0 (it was -0.083, h1 counting on A's side only)."""
    spec = {
        "f1": ("f", [OK, OK]),
        "f2": ("f", [BAD, BAD]),
        "g1": ("g", [OK, BAD]),
        "g2": ("g", [OK, OK]),
        "h1": ("h", [OK, OK]),
        "h2": ("h", [BAD, BAD]),
    }
    a, b = _run(spec), _run(spec | {"h1": ("h", [INFRA, INFRA])})
    m = _metric("correct rate (turn 1)")
    assert paired_tasks(m, a, b) == ["f1", "f2", "g1", "g2", "h2"]
    d, _ = paired_interval(m, a, b)
    assert d == pytest.approx(0.0)


def test_a_paired_difference_lies_inside_its_own_interval():
    """Family h is perfect in A and all infra errors in B: it takes part in neither the point
    nor the interval (the point was +0.1875, outside its interval [0.239, 0.636])."""
    a, b = {}, {}
    for f, second in (("f", [OK, OK]), ("g", [OK, OK]), ("k", [OK, BAD]), ("m", [OK, OK])):
        a[f + "1"], a[f + "2"] = (f, [BAD, BAD]), (f, [OK, BAD])
        b[f + "1"], b[f + "2"] = (f, [OK, BAD]), (f, second)  # B better by 0.5, .5, .25, .5
    for i in range(4):
        a[f"h{i}"], b[f"h{i}"] = ("h", [OK, OK]), ("h", [INFRA, INFRA])
    d, iv = paired_interval(_metric("correct rate (turn 1)"), _run(a), _run(b))
    assert d == pytest.approx((0.5 + 0.5 + 0.25 + 0.5) / 4)  # f, g, k, m: B better by those
    assert iv.two_sided and iv.lo <= d <= iv.hi


def test_a_paired_speedup_ratio_is_over_the_tasks_where_both_runs_have_a_correct_sample():
    """Beside the runs' own geomeans (each over its correct samples), the paired ratio is
    taken where both have a correct sample: here f and g, not h (correct in A only)."""
    a = _run(
        {
            "f1": ("f", [(OK, 2.0), (OK, 3.0)]),
            "g1": ("g", [(OK, 1.5), (OK, 1.2)]),
            "h1": ("h", [(OK, 8.0), (OK, 6.0)]),
        }
    )
    b = _run(
        {
            "f1": ("f", [(OK, 2.2), (OK, 3.1)]),
            "g1": ("g", [(OK, 1.4), (OK, 1.5)]),
            "h1": ("h", [BAD, BAD]),
        }
    )
    m = _metric("geomean speedup vs naive, correct turn-1 samples", ["naive"])
    assert paired_tasks(m, a, b) == ["f1", "g1"]
    d, _ = paired_interval(m, a, b)
    both = lambda v: [t for t in v if t.meta.id != "h1"]  # noqa: E731
    assert d == pytest.approx(value(m, both(b)) / value(m, both(a)))
    assert d != pytest.approx(value(m, b) / value(m, a))
