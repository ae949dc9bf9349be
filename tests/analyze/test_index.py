"""`analyze.index.fold`: the one evaluator of size and index expressions (warp lanes here, the
ranker's launch features in `tests/rank/test_config_features.py`, which compares the two)."""

from __future__ import annotations

import pytest
import sympy as sp

from cudaperf.analyze.index import _DIV, fold, warp_values


def test_fold_numbers_arithmetic_and_c_division():
    n = sp.Symbol("n", integer=True)
    sizes = {"n": 1000}

    def value(s: sp.Symbol) -> float:
        return float(sizes[s.name])

    def other(e: sp.Expr) -> float:
        raise LookupError(str(e))

    assert fold(3 * n**2 + sp.Rational(1, 2), value, other) == 3e6 + 0.5
    assert fold(_DIV(n + 255, 256), value, other) == 4.0
    assert fold(_DIV(-n, 300), value, other) == -3.0  # toward zero, as C
    assert fold(_DIV(n, -300), value, other) == -3.0
    with pytest.raises(ZeroDivisionError):
        fold(_DIV(n, n - 1000), value, other)
    with pytest.raises(KeyError):  # `value` says "unknown"
        fold(n + sp.Symbol("m"), value, other)
    with pytest.raises(LookupError):  # so does `other`
        fold(n + sp.Function("load")(n), value, other)
    assert fold(n + sp.Function("load")(n), value, lambda _: 0.0) == 1000.0


def test_warp_values_fold_lanes_through_integer_division():
    tx = sp.Symbol("TX", integer=True, nonnegative=True)
    assert warp_values(_DIV(tx, 16) * 64 + tx) == [(k // 16) * 64 + k for k in range(32)]
    assert warp_values(_DIV(tx, 0)) is None  # ZeroDivisionError: no values
