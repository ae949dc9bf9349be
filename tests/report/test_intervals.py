"""The interval method's coverage on synthetic data with known truth, few and many clusters,
and where it gives no interval (`report.intervals`)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cudaperf.report.intervals import (
    Interval,
    bm_df,
    cluster_t,
    paired_cluster_t,
    t_quantile,
)

LEVEL = 0.95
FLOOR = 0.92  # the least empirical coverage a 95% method may show here (1,500 simulations)
REPS = 1500


def rates(rng, g: int, truth: float, spread: float):
    """(sums, counts) of G families: family rates ~ Beta(mean truth, sd spread), 2-20 tasks
    each (unequal sizes), each task's value the share of 4 samples correct."""
    k = truth * (1 - truth) / spread**2 - 1
    pg = rng.beta(truth * k, (1 - truth) * k, g)
    n = rng.integers(2, 21, g)
    sums = np.array([(rng.binomial(4, p, m) / 4).sum() for p, m in zip(pg, n, strict=True)])
    return sums, n.astype(float)


def log_speedups(rng, g: int, truth: float, spread: float):
    """(sums, counts) of log speedups (`truth`: their mean, the log of the true geomean):
    family effect N(0, spread), task noise N(0, 0.8)."""
    n = rng.integers(2, 21, g)
    mu = truth + rng.normal(0, spread, g)
    sums = np.array([rng.normal(m, 0.8, k).sum() for m, k in zip(mu, n, strict=True)])
    return sums, n.astype(float)


def coverage(method, data, g: int, truth: float, spread: float, seed: int = 0) -> float:
    """Share of REPS simulated data sets whose interval (`method(sums, counts) -> Interval`)
    holds `truth`; no interval counts as a miss, a one-sided bound as the half-line."""
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(REPS):
        iv = method(*data(rng, g, truth, spread))
        if iv.lo is None and iv.hi is None:
            continue
        lo = -math.inf if iv.lo is None else iv.lo
        hi = math.inf if iv.hi is None else iv.hi
        hits += lo <= truth <= hi
    return hits / REPS


def rate_t(sums, counts, level=LEVEL):
    return cluster_t(sums, counts, level, rate=True)[1]


def log_t(sums, counts, level=LEVEL):
    return cluster_t(sums, counts, level)[1]


def percentile_bootstrap(sums, counts, level=LEVEL, n_boot=400, seed=0):
    """The method used before: percentile bootstrap over clusters (for the negative test)."""
    pick = np.random.default_rng(seed).integers(0, len(sums), (n_boot, len(sums)))
    reps = sums[pick].sum(1) / counts[pick].sum(1)
    lo, hi = np.quantile(reps, [(1 - level) / 2, (1 + level) / 2])
    return Interval(float(lo), float(hi))


CASES = [  # (data, method, truth, spread between families)
    (rates, rate_t, 0.3, 0.15),
    (rates, rate_t, 0.1, 0.08),
    (rates, rate_t, 0.85, 0.1),
    (log_speedups, log_t, math.log(1.5), 0.5),  # a geomean of 1.5x
]


@pytest.mark.parametrize("g", [3, 5, 6, 30])
@pytest.mark.parametrize("data,method,truth,spread", CASES)
def test_the_95_percent_interval_covers_at_least_92_percent(g, data, method, truth, spread):
    cov = coverage(method, data, g, truth, spread)
    assert FLOOR <= cov <= 0.99, cov  # nominal 0.95; not wildly conservative either


@pytest.mark.parametrize("g", [3, 30])
def test_a_90_percent_interval_labelled_95_fails_the_coverage_check(g):
    mislabelled = lambda s, n: rate_t(s, n, level=0.90)  # noqa: E731
    assert coverage(mislabelled, rates, g, 0.3, 0.15) < FLOOR


def test_the_percentile_bootstrap_over_few_clusters_fails_the_coverage_check():
    assert coverage(percentile_bootstrap, rates, 3, 0.3, 0.15) < FLOOR


@pytest.mark.parametrize("df,want", [(1, 12.706), (2, 4.303), (5, 2.571), (29, 2.045)])
def test_t_quantiles_match_the_table(df, want):
    assert t_quantile(0.975, df) == pytest.approx(want, abs=1e-3)


def test_one_cluster_gives_no_interval_and_says_why():
    est, iv = cluster_t(np.array([3.0]), np.array([4.0]), rate=True)
    assert est == 0.75 and iv.lo is None and iv.hi is None and "one family" in iv.note


def test_a_rate_at_100_or_0_percent_gets_a_one_sided_exact_bound_over_families():
    est, iv = cluster_t(np.array([4.0, 2.0, 6.0]), np.array([4.0, 2.0, 6.0]), rate=True)
    assert est == 1.0 and iv.hi is None and iv.note == "one-sided"
    assert iv.lo == pytest.approx(0.05 ** (1 / 3))  # P(all 3 succeed | p = lo) = 5%
    est, iv = cluster_t(np.zeros(6), np.full(6, 5.0), rate=True)
    assert est == 0.0 and iv.lo is None and iv.hi == pytest.approx(1 - 0.05 ** (1 / 6))


def test_no_variation_between_families_gives_no_interval_not_a_zero_width_one():
    est, iv = cluster_t(np.array([1.0, 2.0]), np.array([2.0, 4.0]), rate=True)
    assert est == 0.5 and iv.lo is None and iv.hi is None and "no variation" in iv.note
    est, iv = cluster_t(np.log([2.0, 2.0]), np.array([1.0, 1.0]))
    assert iv.lo is None and "no variation" in iv.note  # a speedup equal everywhere


def test_no_two_sided_interval_has_zero_width():
    rng = np.random.default_rng(5)
    for _ in range(300):
        g = int(rng.integers(1, 5))
        counts = rng.integers(1, 4, g).astype(float)
        sums = np.array([rng.integers(0, int(c) + 1) for c in counts], float)
        _, iv = cluster_t(sums, counts, rate=True)
        assert not iv.two_sided or iv.hi - iv.lo > 1e-9
        a, b = (sums, counts), (counts - sums, counts)
        _, pv = paired_cluster_t(a, b)
        assert not pv.two_sided or pv.hi - pv.lo > 1e-9


def test_equal_clusters_give_the_one_sample_t_interval_on_cluster_means():
    means = np.array([0.2, 0.5, 0.35, 0.6])
    est, iv = cluster_t(means * 10, np.full(4, 10.0))
    half = t_quantile(0.975, 3) * means.std(ddof=1) / 2
    assert est == pytest.approx(means.mean())
    assert (iv.lo, iv.hi) == pytest.approx((means.mean() - half, means.mean() + half))


def test_paired_interval_cancels_what_families_share():
    rng = np.random.default_rng(7)
    base = rng.uniform(0, 10, 6)  # family difficulty, shared by both runs
    a = (base, np.full(6, 10.0))
    b = (base + 1.0 + rng.normal(0, 0.05, 6), np.full(6, 10.0))  # +0.1 in every family
    d, iv = paired_cluster_t(a, b)
    assert d == pytest.approx(0.1, abs=0.01) and 0 < iv.lo < 0.1 < iv.hi < 0.2
    d, iv = paired_cluster_t(a, a)
    assert d == 0.0 and iv.lo is None and "same difference" in iv.note


def _unequal_coverage(df_rule=None, reps: int = 3000) -> float:
    """Coverage of cluster_t's 95% interval for a mean over 6 families of 2-18 tasks with a
    family effect (sd 0.53) and task noise (sd 0.6), truth 0.6 (a statistics review, session
    46). `df_rule`: the df to use instead of cluster_t's own (a negative control)."""
    rng = np.random.default_rng(11)
    n = np.array([2, 4, 8, 12, 16, 18])
    hits = 0
    for _ in range(reps):
        mu = 0.6 + rng.normal(0, 0.53, n.size)
        sums = np.array([(m + rng.normal(0, 0.6, k)).sum() for m, k in zip(mu, n, strict=True)])
        est, iv = cluster_t(sums, n.astype(float))
        if df_rule is not None:  # the same interval with another df
            w = (iv.hi - iv.lo) / 2 / t_quantile(0.975, bm_df(n / n.sum()))
            w *= t_quantile(0.975, df_rule(n))
            iv = Interval(est - w, est + w)
        hits += iv.lo <= 0.6 <= iv.hi
    return hits / reps


def test_the_95_percent_interval_covers_95_percent_at_unequal_family_sizes():
    """Bell and McCaffrey's df (3.49 for these sizes); with G - 1 = 5 it covered ~92%."""
    assert _unequal_coverage() >= 0.94  # binomial SE at 95%: 0.004
    assert _unequal_coverage(lambda n: len(n) - 1) < 0.935  # the df before session 46


def test_bell_mccaffrey_df_is_g_minus_1_for_equal_sizes_and_less_otherwise():
    assert bm_df(np.full(6, 1 / 6)) == pytest.approx(5.0)
    assert bm_df(np.array([2, 4, 8, 12, 16, 18]) / 60) == pytest.approx(3.487371, abs=1e-6)
    assert bm_df(np.array([1, 99]) / 100) == 1.0  # never below 1: the t quantile exists
    sizes = np.array([1, 2, 3] * 7 + [2], float)  # 22 families of 1-3 tasks, as the ablation's
    assert 17 < bm_df(sizes / sizes.sum()) < 21


def test_a_nan_or_inf_value_gives_no_interval_and_says_why():
    for bad in (math.nan, math.inf):
        _, iv = cluster_t(np.array([1.0, bad, 2.0]), np.array([2.0, 2.0, 2.0]))
        assert not iv.two_sided and iv.note == "a value is not finite"
        a = (np.array([1.0, 2.0, 3.0]), np.ones(3))
        _, iv = paired_cluster_t(a, (np.array([1.0, bad, 2.0]), np.ones(3)))
        assert not iv.two_sided and iv.note == "a value is not finite"
