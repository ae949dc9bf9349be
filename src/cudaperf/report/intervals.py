"""Confidence intervals for benchmark metrics when tasks come in few clusters (families).

Method: a cluster-robust t interval. A metric of the mean form (a mean of per-task values,
or a geomean: a mean of logs) is the ratio estimator  y = sum_g S_g / sum_g N_g  over
clusters g = 1..G (S_g: the sum of cluster g's values, N_g: how many). Its standard error
is the bias-reduced (CR2, Bell and McCaffrey 2002) cluster-robust one,

    se^2 = sum_g (S_g - y N_g)^2 / (1 - h_g) / (sum_g N_g)^2,   h_g = N_g / sum_g N_g,

and the interval is  y +- t_{df, (1+level)/2} * se  with Bell and McCaffrey's degrees of
freedom: the Satterthwaite df of that variance estimator under a working model of
independent values (`bm_df`), at most G - 1. With equal cluster sizes it is G - 1 and the
interval is exactly the one-sample t interval on the G cluster means; with unequal sizes a
few large clusters carry the variance and df falls below G - 1 (sizes 2, 4, 8, 12, 16 and
18: 3.49). Until session 46 the df was G - 1 whatever the sizes: with those six sizes a
review's simulation (`tests/report/test_intervals.py`) covers 92.2% for a nominal 95% with
G - 1 and 94.1% with these df. A
geomean's interval is exp of the log-scale one. A rate's is built on the logit scale
(logit y +- t * se / (y (1 - y)), mapped back), so it stays inside (0, 1) and is
asymmetric near the edges, where a rate's cluster means are skewed.

Why this and not the percentile bootstrap over clusters used before: with G clusters the
bootstrap's spread is the plug-in one (it divides by G, not G - 1) and its quantiles are
normal-like, so it undercovers at the cluster counts a benchmark has (simulated with 3, 5, 6
and 30 families: 73%, 82%, 87% and 95% for a nominal 95%). The t interval with few
degrees of freedom widens with few clusters as it must; `tests/report/test_intervals.py`
simulates data with known truth at 3, 5, 6 and 30 clusters (unequal sizes, rates between
10% and 90%, log-normal speedups) and checks its coverage (simulated: 93-95% for 95%).

Where no honest two-sided interval exists, none is given (`Interval.note` says why):

- fewer than 2 clusters (nothing measures the variation between families): n/a;
- a value that is not finite (NaN, infinity): n/a;
- a median: this method covers means; n/a;
- no variation between clusters (se = 0). For a rate at 0% or 100% a one-sided bound is
  given instead: the exact (Clopper-Pearson) one-sided `level` bound for all G clusters
  failing or succeeding, i.e.  upper = 1 - (1 - level)^(1/G)  at 0% and
  lower = (1 - level)^(1/G)  at 100% (the rule of three, 3/G, is its approximation). It
  counts clusters, not tasks, as the sample size: the design effect cannot be estimated
  without variation, and a family counted once is the conservative choice. Any other
  metric without variation gets n/a.

Guaranteed: an interval printed as two-sided never has zero width. Not guaranteed: nominal
coverage when cluster means are far from normal with very few clusters; the report prints
the family count beside each interval. Known to be uneven: a rate at 0% gets the bound over
clusters above, far more cautious than the logit interval one success more gets (5 families
of 48 samples: at most 45.1% at 0 of 240, [0.03%, 6.4%] at 1 of 240), so the bound does not
fall monotonically with the count; a review (session 46) simulated the logit interval at
2% or less covering 97% or more, so neither undercovers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

__all__ = ["Interval", "bm_df", "cluster_t", "one_sided_bound", "paired_cluster_t", "t_quantile"]


@dataclass(frozen=True)
class Interval:
    """An interval, a one-sided bound, or none with the reason."""

    lo: float | None  # None: no lower end (n/a, or an upper bound only)
    hi: float | None  # None: no upper end (n/a, or a lower bound only)
    note: str = ""  # "" a two-sided interval; "one-sided" a bound; else why there is none

    @property
    def two_sided(self) -> bool:
        return self.lo is not None and self.hi is not None and not self.note

    @classmethod
    def none(cls, why: str) -> Interval:
        return cls(None, None, why)


@lru_cache(maxsize=256)
def t_quantile(q: float, df: float) -> float:
    """The q-quantile (0.5 < q < 1) of Student's t with `df` >= 1 degrees of freedom
    (bisection on the CDF, integrated by Simpson's rule; |error| < 1e-6)."""
    if not 0.5 < q < 1 or df < 1:
        raise ValueError(f"t_quantile needs 0.5 < q < 1 and df >= 1; got q={q}, df={df}")
    c = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)

    def cdf(x: float) -> float:  # in atan coordinates, so heavy tails integrate evenly
        u = np.linspace(0.0, math.atan(x), 4001)
        t = np.tan(u)
        f = c * (1 + t * t / df) ** (-(df + 1) / 2) / np.cos(u) ** 2
        h = u[1] - u[0]
        return 0.5 + h / 3 * (f[0] + f[-1] + 4 * f[1:-1:2].sum() + 2 * f[2:-1:2].sum())

    lo, hi = 0.0, 1.0
    while cdf(hi) < q:
        hi *= 2
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if cdf(mid) < q else (lo, mid)
    return (lo + hi) / 2


def _resid(sums: np.ndarray, counts: np.ndarray, est: float) -> np.ndarray:
    """Each cluster's linearised contribution (S_g - y N_g) / sum N."""
    return (sums - est * counts) / counts.sum()


def _cr2(e: np.ndarray, h: np.ndarray) -> float:
    """The CR2 standard error from contributions `e` and leverages `h` (module doc)."""
    return math.sqrt(float((e * e / (1 - h)).sum()))


def bm_df(h: np.ndarray) -> float:
    """Bell and McCaffrey's (2002) degrees of freedom for the CR2 variance of a ratio mean
    whose clusters have shares `h` of the values (h_g = N_g / sum N): the Satterthwaite
    approximation tr(B)^2 / tr(B^2), B = C A W A', under a working model of independent
    values of one variance (W = diag(h): a cluster's sum varies as its size), A = I - h 1'
    (the residuals' map from the cluster sums), C = diag(1 / (1 - h)) (CR2's correction).
    G - 1 for equal sizes; never above G - 1, never below 1 (where the t quantile exists)."""
    h = np.asarray(h, float)
    g = len(h)
    a = np.eye(g) - np.outer(h, np.ones(g))
    b = np.diag(1 / (1 - h)) @ a @ np.diag(h) @ a.T
    df = float(np.trace(b) ** 2 / np.trace(b @ b))
    return round(min(g - 1.0, max(1.0, df)), 6)


def _logit_interval(est: float, se: float, w: float) -> Interval:
    """est +- w*se on the logit scale, mapped back (0 < est < 1)."""
    lg, s = math.log(est / (1 - est)), se / (est * (1 - est))
    return Interval(1 / (1 + math.exp(-(lg - w * s))), 1 / (1 + math.exp(-(lg + w * s))))


def one_sided_bound(at: float, clusters: int, level: float) -> Interval:
    """The exact one-sided `level` bound of a rate observed at `at` (0 or 1) in every one of
    `clusters` clusters (see the module doc)."""
    b = (1 - level) ** (1 / clusters)
    return Interval(None, 1 - b, "one-sided") if at == 0 else Interval(b, None, "one-sided")


def _plural(unit: str) -> str:
    return "families" if unit == "family" else unit + "s"


def cluster_t(
    sums: np.ndarray,
    counts: np.ndarray,
    level: float = 0.95,
    rate: bool = False,
    unit: str = "family",
) -> tuple[float | None, Interval]:
    """(estimate, interval) of the ratio mean sum(sums) / sum(counts) over clusters (clusters
    with count 0 take no part); `rate`: values in [0, 1] (logit scale; one-sided bound at 0/1).
    `unit` names a cluster in the notes ("family", "task")."""
    sums, counts = np.asarray(sums, float), np.asarray(counts, float)
    keep = counts > 0
    sums, counts = sums[keep], counts[keep]
    g = len(counts)
    if g == 0:
        return None, Interval.none("no task takes part")
    est = float(sums.sum() / counts.sum())
    if not np.isfinite(sums).all():
        return est, Interval.none("a value is not finite")
    if g < 2:
        return est, Interval.none(f"one {unit}: no interval")
    h = counts / counts.sum()
    se = _cr2(_resid(sums, counts, est), h)
    if se <= 1e-12 * max(1.0, abs(est)):
        if rate and (est <= 1e-12 or est >= 1 - 1e-12):
            return est, one_sided_bound(round(est), g, level)
        return est, Interval.none(f"no variation between {_plural(unit)}")
    w = t_quantile((1 + level) / 2, bm_df(h))
    if rate:
        return est, _logit_interval(est, se, w)
    return est, Interval(est - w * se, est + w * se)


def paired_cluster_t(
    a: tuple[np.ndarray, np.ndarray],
    b: tuple[np.ndarray, np.ndarray],
    level: float = 0.95,
    unit: str = "family",
) -> tuple[float | None, Interval]:
    """(est_b - est_a, interval) for two ratio means on the same clusters (a and b: (sums,
    counts) per cluster, aligned): the per-cluster linearised contributions are differenced,
    so what the clusters share cancels. Clusters where either run has no value take no part."""
    sa, na = (np.asarray(x, float) for x in a)
    sb, nb = (np.asarray(x, float) for x in b)
    keep = (na > 0) & (nb > 0)
    sa, na, sb, nb = sa[keep], na[keep], sb[keep], nb[keep]
    g = len(na)
    if g == 0:
        return None, Interval.none("no task takes part in both")
    ea, eb = float(sa.sum() / na.sum()), float(sb.sum() / nb.sum())
    d = eb - ea
    if not (np.isfinite(sa).all() and np.isfinite(sb).all()):
        return d, Interval.none("a value is not finite")
    if g < 2:
        return d, Interval.none(f"one {unit}: no interval")
    h = (na / na.sum() + nb / nb.sum()) / 2
    se = _cr2(_resid(sb, nb, eb) - _resid(sa, na, ea), h)
    if se <= 1e-12 * max(1.0, abs(d)):
        return d, Interval.none(f"the same difference in every {unit}")
    w = t_quantile((1 + level) / 2, bm_df(h)) * se
    return d, Interval(d - w, d + w)
