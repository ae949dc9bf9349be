import numpy as np
import pytest

from cudaperf.rank.bt import fit_bt, standardise


def _synthetic(seed=0, n_items=200, n_pairs=3000):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n_items, 3))
    true = np.array([2.0, -1.0, 0.0])
    i, j = rng.integers(0, n_items, size=(2, n_pairs))
    d = x[i] - x[j]
    p = 1 / (1 + np.exp(-(d @ true)))
    y = (rng.random(n_pairs) < p).astype(float)
    return d, y, true


def test_recovers_a_known_linear_preference():
    d, y, true = _synthetic()
    beta = fit_bt(d, y, l2=1e-4)
    cos = beta @ true / np.linalg.norm(beta) / np.linalg.norm(true)
    assert cos > 0.98
    assert np.allclose(beta, true, atol=0.35)
    assert abs(beta[2]) < 0.2


def test_fit_is_deterministic_and_l2_shrinks():
    d, y, _ = _synthetic(seed=1)
    assert np.array_equal(fit_bt(d, y), fit_bt(d, y))
    assert np.linalg.norm(fit_bt(d, y, l2=10.0)) < np.linalg.norm(fit_bt(d, y, l2=1e-3))


def test_fit_rejects_bad_input():
    with pytest.raises(ValueError, match="l2"):
        fit_bt(np.ones((2, 1)), np.ones(2), l2=0)
    with pytest.raises(ValueError, match="n > 0"):
        fit_bt(np.ones((0, 1)), np.ones(0))


def test_standardise_drops_constant_and_unknown_features():
    rows = [{"a": 1.0, "b": 5.0, "c": float("nan")}, {"a": 3.0, "b": 5.0, "c": float("nan")}]
    names, means, stds = standardise(rows, ["a", "b", "c"])
    assert names == ["a"] and means == [2.0] and stds == [1.0]


def test_a_non_finite_l2_is_refused_as_a_non_positive_one_is():
    d, y = np.array([[1.0], [-1.0]]), np.array([1.0, 0.0])
    for bad in (float("nan"), float("inf"), 0.0):
        with pytest.raises(ValueError, match="l2 must be a finite number > 0"):
            fit_bt(d, y, l2=bad)
