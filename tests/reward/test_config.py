"""RewardConfig validation: the failure order is enforced with messages that say how to fix."""

from __future__ import annotations

import pytest

from cudaperf.reward import PRESETS, RewardConfig


def test_presets_are_valid_and_named():
    assert set(PRESETS) == {"unified", "outcome_only"}
    assert RewardConfig.preset("outcome_only").structure_weight == 0
    with pytest.raises(ValueError, match="unknown reward preset"):
        RewardConfig.preset("nope")


@pytest.mark.parametrize(
    "changes, match",
    [
        (dict(rejected=0.5), "rejected=0.5 must be <"),
        (dict(wrong_output=0.6), "the slowest correct"),
        (dict(speed_floor=-1.0, speed_weight=1.3), "the slowest correct"),
        (dict(compiled=-0.6), "compile_error=-0.5 must be < compiled"),
        (dict(speed_cap=1.0), "speed_cap"),
        (dict(speed_floor=0.5), "speed_floor"),
        (dict(structure_weight=-1.0), "negative"),
        (dict(baseline="gpu"), "baseline"),
        (dict(correct=float("nan")), "finite"),
    ],
)
def test_invalid_values_are_refused(changes, match):
    with pytest.raises(ValueError, match=match):
        RewardConfig(**changes)


def test_every_field_has_help():
    assert all(RewardConfig.help().values())


def test_baselines_read_the_speedup_fields_in_their_order():
    from cudaperf.reward import BASELINES

    assert BASELINES == {
        "auto": ("speedup_vs_eager", "speedup_vs_naive", "speedup_vs_cpu"),
        "cpu": ("speedup_vs_cpu",),
        "naive": ("speedup_vs_naive",),
        "eager": ("speedup_vs_eager",),
        "compile": ("speedup_vs_compile",),
    }
