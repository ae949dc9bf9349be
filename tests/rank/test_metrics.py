import numpy as np
import pytest

from cudaperf.rank.bt import BTModel
from cudaperf.rank.metrics import (
    calibration_bins,
    calibration_plot,
    evaluate,
    kendall_tau,
    pairwise_accuracy,
    top1_accuracy,
)
from cudaperf.rank.pairs import Pair
from cudaperf.rank.ranker import NoPairsError, TrainConfig, train_feature_ranker
from tests.rank.helpers import H200, SPLITS, kernel, task, unroll_tasks

KEYS = {
    "pairwise_accuracy",
    "pairs",
    "kendall_tau",
    "top1_accuracy",
    "baseline_structural_accuracy",
    "baseline_length_accuracy",
    "baseline_random_accuracy",
    "all_pairs",
}


def test_kendall_tau_hand_cases():
    assert kendall_tau([3, 2, 1], [1, 2, 3]) == 1.0  # strongest is fastest
    assert kendall_tau([1, 2, 3], [1, 2, 3]) == -1.0
    assert kendall_tau([3, 1, 2], [1, 2, 3]) == pytest.approx(1 / 3)
    assert kendall_tau([1, 1], [1, 2]) == 0.0 and kendall_tau([1], [1]) == 0.0


def test_top1_hand_cases():
    groups = [([0.9, 0.1], [1, 2]), ([0.1, 0.9], [1, 2]), ([0.5, 0.5], [1, 2])]
    assert top1_accuracy(groups) == pytest.approx(0.5)
    assert top1_accuracy([([1, 5, 2], [3, 1, 2])]) == 1.0
    assert top1_accuracy([]) is None


def test_pairwise_accuracy_counts_ties_as_half():
    pairs = [
        Pair("t", "f", "c", H200, "a", "b", 1.0, 2.0),
        Pair("t", "f", "c", H200, "b", "c", 1, 2),
    ]
    s = {("t", "a"): 2.0, ("t", "b"): 1.0, ("t", "c"): 1.0}
    assert pairwise_accuracy(pairs, s) == 0.75
    assert pairwise_accuracy([], s) is None


def _timed(fast_code, slow_code, families=("fam4", "fam5")):
    return [
        task(
            f"t/{f}/0",
            f,
            {
                "fast": (fast_code, {("small", H200): 1.0}),
                "slow": (slow_code, {("small", H200): 3.0}),
            },
        )
        for f in families
    ]


def test_baselines():
    m = BTModel(
        names=["c.unroll_pragmas"],
        means=[0.0],
        stds=[1.0],
        coef=[1.0],
        analyzer={"resources": False},
    )
    # the fast one is coalesced and longer: both baselines right
    r = evaluate(_timed(kernel(0, pad=5), kernel(0, stride=33)), m, SPLITS)
    assert r["baseline_structural_accuracy"] == 1.0 and r["baseline_length_accuracy"] == 1.0
    assert r["baseline_random_accuracy"] == 0.5 and r["pairs"] == 2
    assert r["pairwise_accuracy"] == 0.5  # equal unroll counts: a tie
    # the fast one is shorter: length baseline wrong
    r = evaluate(_timed(kernel(0), kernel(0, pad=5)), m, SPLITS)
    assert r["baseline_length_accuracy"] == 0.0


def test_evaluate_on_heldout_families(tmp_path):
    tasks = unroll_tasks()
    m = train_feature_ranker(tasks, SPLITS, TrainConfig(resources=False))
    r = evaluate(tasks, m, SPLITS, min_ratio=1.6, calibration_png=tmp_path / "cal.png")
    assert KEYS <= set(r) and r["families"] == ["fam4", "fam5"]
    assert r["pairwise_accuracy"] == 1.0 and r["kendall_tau"] == 1.0 and r["top1_accuracy"] == 1.0
    assert r["pairs"] == 4 * 2 and r["all_pairs"]["pairs"] == 4 * 3  # 5 vs 3.33 µs is < 1.6x
    assert (tmp_path / "cal.png").read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(NoPairsError, match="measured pairs"):
        evaluate([t for t in tasks if t.family == "fam0"], m, SPLITS)


def test_calibration_bins_are_symmetric(tmp_path):
    probs, labels = np.array([0.9, 0.8, 0.3]), np.array([1, 0, 0])
    rows = calibration_bins(probs, labels, bins=10)
    assert sum(r["count"] for r in rows) == 6
    assert sum(r["observed"] * r["count"] for r in rows) == 3  # both orientations
    assert calibration_plot(probs, labels, tmp_path / "c.png").is_file()


def test_kendall_tau_of_non_finite_strengths_is_one_clear_error():
    """A ranker whose weights hold NaN predicts NaN: int(NaN) crashed the evaluation."""
    for bad in (float("nan"), float("inf")):
        with pytest.raises(ValueError, match="not finite .*train it again"):
            kendall_tau([0.1, bad, 0.3], [1.0, 2.0, 3.0])
    assert kendall_tau([0.3, 0.2, 0.1], [1.0, 2.0, 3.0]) == 1.0
