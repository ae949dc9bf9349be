"""The unified reward: ordering of outcomes, bounds, and what each component gets."""

from __future__ import annotations

import math

import pytest

from cudaperf.execute.types import Status
from cudaperf.reward import RewardConfig, compute_reward, format_error_reward, speed_term

from .helpers import rank, report, result

CFG = RewardConfig()
PERFECT = dict(reports=[report(1.0)], rank=rank(1.0))


def total(status: Status, **kw) -> float:
    reports = kw.pop("reports", ())
    rk = kw.pop("rank", None)
    return compute_reward(result(status, **kw), reports, rk, CFG).total


def test_ordering_of_the_issue():
    hacked = total(Status.REJECTED, **PERFECT)
    no_code = format_error_reward(CFG).total
    compile_err = total(Status.COMPILE_ERROR)
    crash = total(Status.RUNTIME_ERROR)
    hang = total(Status.TIMEOUT)
    wrong_perfect_structure = total(Status.WRONG_OUTPUT, **PERFECT)
    correct_slow = total(Status.OK, speedup_vs_naive=0.01, reports=[report(0.0)])
    correct_fast = total(Status.OK, speedup_vs_naive=8.0, **PERFECT)
    assert hacked < no_code <= compile_err < wrong_perfect_structure <= crash == hang
    assert crash < correct_slow < correct_fast
    lo, hi = CFG.bounds()
    assert lo == hacked and correct_fast <= hi


def test_wrong_output_gets_no_bonus_from_structure_or_ranker():
    bd = compute_reward(result(Status.WRONG_OUTPUT), [report(1.0)], rank(1.0), CFG)
    assert (bd.speed, bd.structure, bd.ranker) == (0.0, 0.0, 0.0)
    assert bd.total == CFG.wrong_output
    assert bd.structure_score == 1.0 and bd.rank_score == 1.0  # recorded, not rewarded


def test_rejected_is_lowest_even_with_everything_perfect():
    bd = compute_reward(
        result(Status.REJECTED, speedup_vs_naive=100.0), [report(1.0)], rank(1.0), CFG
    )
    assert bd.total == CFG.rejected == CFG.bounds()[0]


def test_compiled_never_earns_speed_or_bonuses():
    bd = compute_reward(
        result(Status.COMPILED, mode="compile-only", speedup_vs_naive=50.0),
        [report(1.0)],
        rank(1.0),
        CFG,
    )
    assert bd.total == CFG.compiled and bd.speed == 0 and bd.structure == 0 and bd.ranker == 0
    assert CFG.compile_error < bd.total <= CFG.wrong_output
    assert "compile-only" in " ".join(bd.notes)


def test_infra_error_is_not_a_reward():
    bd = compute_reward(result(Status.INFRA_ERROR), config=CFG)
    assert not bd.valid and bd.total == 0.0


def test_correct_fast_components_add_up_and_saturate():
    bd = compute_reward(
        result(Status.OK, speedup_vs_naive=1000.0), [report(0.8), report(0.4)], rank(0.5), CFG
    )
    assert bd.speed == CFG.speed_weight  # clipped at the cap
    assert bd.structure == pytest.approx(CFG.structure_weight * 0.6)
    assert bd.ranker == pytest.approx(CFG.ranker_weight * 0.5)
    assert bd.total == pytest.approx(sum(bd.components.values()))
    assert bd.baseline == "naive" and bd.speedup == 1000.0


def test_speed_term_is_clipped_log_speedup():
    assert speed_term(1.0, CFG) == 0.0
    assert speed_term(4.0, CFG) == pytest.approx(math.log(4) / math.log(16))
    assert speed_term(1e-9, CFG) == CFG.speed_weight * CFG.speed_floor
    assert speed_term(None, CFG) == 0.0 and speed_term(float("nan"), CFG) == 0.0


def test_auto_baseline_prefers_eager_then_naive_then_cpu():
    r = result(Status.OK, speedup_vs_eager=2.0, speedup_vs_naive=3.0, speedup_vs_cpu=90.0)
    assert compute_reward(r, config=CFG).baseline == "eager"
    assert compute_reward(result(Status.OK, speedup_vs_cpu=90.0), config=CFG).baseline == "cpu"
    cpu = CFG.with_(baseline="cpu")
    assert compute_reward(r, config=cpu).speedup == 90.0


def test_ok_without_any_speedup_gets_zero_speed_and_says_so():
    bd = compute_reward(result(Status.OK), config=CFG)
    assert bd.speed == 0.0 and bd.speedup is None
    assert any("no speedup" in n for n in bd.notes)


def test_outcome_only_preset_ignores_structure_and_ranker():
    cfg = RewardConfig.preset("outcome_only")
    bd = compute_reward(result(Status.OK, speedup_vs_naive=2.0), [report(1.0)], rank(1.0), cfg)
    assert bd.structure == 0 and bd.ranker == 0 and bd.config == "outcome_only"
    assert bd.total == pytest.approx(cfg.correct + speed_term(2.0, cfg))


def test_breakdown_round_trips_json():
    bd = compute_reward(result(Status.OK, speedup_vs_naive=2.0), [report(0.5)], rank(0.7), CFG)
    again = type(bd).model_validate_json(bd.model_dump_json())
    assert again == bd
