"""cudaperf.fields: the one `--wall-budget` check that train sft, train grpo and bench run
share."""

from __future__ import annotations

import math

import pytest

from cudaperf.fields import wall_budget_problem
from cudaperf.train.runlog import TimeBudget


@pytest.mark.parametrize("ok", [None, 0.5, 600, 1e9])
def test_a_positive_finite_budget_or_none_passes(ok):
    assert wall_budget_problem(ok) is None
    TimeBudget(ok)


@pytest.mark.parametrize("bad", [0, 0.0, -1, math.inf, math.nan])
def test_zero_negative_infinite_or_nan_is_one_line_naming_the_option(bad):
    line = f"--wall-budget {bad}: give seconds > 0 (or leave it out)"
    assert wall_budget_problem(bad) == line
    with pytest.raises(ValueError, match="give seconds > 0"):
        TimeBudget(bad)  # inf once passed here: `inf > 0`
