"""train.rewards: advantages per (task, turn), never across turns."""

from __future__ import annotations

import statistics

import pytest

from cudaperf.train.rewards import TurnReturn, turn_advantages


def test_a_failure_is_not_pushed_up_or_down_by_its_turn():
    """The repro of the turn bias: every reply a compile error (score -0.5), two turns, so
    returns -0.70 (turn 1) and -0.50 (turn 2). Normalised over the whole group they became
    -0.865 and +0.865; within a turn they are equal, so no sample is pushed either way."""
    returns, turns = [-0.7, -0.5, -0.7, -0.5], [1, 2, 1, 2]
    assert turn_advantages(returns, turns, 4) == [0.0, 0.0, 0.0, 0.0]
    mixed = statistics.mean(returns), statistics.stdev(returns)
    old = [(r - mixed[0]) / (mixed[1] + 1e-4) for r in returns]  # one group over both turns
    assert old[0] == pytest.approx(-0.866, abs=1e-3) and old[1] == pytest.approx(0.866, abs=1e-3)


def test_each_cell_is_standardised_on_its_own_and_none_takes_no_part():
    returns = [1.0, 0.2, 3.0, 0.4, None, 0.9, 5.0, 5.0]  # two groups of 4 (chains x turns)
    turns = [1, 2, 1, 2, 1, 2, 1, 2]
    got = turn_advantages(returns, turns, 4)
    for cell in ([0, 2], [1, 3], [6], [5, 7]):
        vals = [returns[i] for i in cell]
        sd = statistics.stdev(vals) if len(vals) > 1 else 0.0
        for i in cell:
            assert got[i] == pytest.approx((returns[i] - statistics.mean(vals)) / (sd + 1e-4))
    assert got[4] is None and got[6] == 0.0  # alone in its cell: nothing to compare with
    with pytest.raises(ValueError, match="whole groups"):
        turn_advantages(returns[:5], turns[:5], 4)


def test_turn_return_uses_the_turns_and_says_when_they_are_missing():
    fn = TurnReturn(group_size=2)
    assert fn(cudaperf_return=[1.0, 3.0], cudaperf_turn=[1, 1]) == pytest.approx(
        [-0.7071, 0.7071], abs=1e-3
    )
    with pytest.raises(ValueError, match="cudaperf_turn"):
        fn(cudaperf_return=[1.0, 3.0])
    assert TurnReturn()(cudaperf_return=[1.0, float("nan")]) == [1.0, None]  # raw returns
