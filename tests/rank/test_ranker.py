import json

import pytest

from cudaperf.rank.bt import BTModel
from cudaperf.rank.features import FEATURE_NAMES, code_features
from cudaperf.rank.ranker import NoPairsError, TrainConfig, make_ranker, score, train_feature_ranker
from cudaperf.rank.types import RankScore
from tests.rank.helpers import SPLITS, kernel, task, unroll_tasks

NO_PTXAS = TrainConfig(resources=False)


def _unroll_model(coef=3.0):
    return BTModel(
        names=["c.unroll_pragmas"],
        means=[0.0],
        stds=[1.0],
        coef=[coef],
        analyzer={"resources": False},
    )


def test_features_have_stable_names_and_are_cached():
    from cudaperf.analyze import AnalyzeConfig

    cfg = AnalyzeConfig(resources=False)
    f = code_features(kernel(2), cfg)
    assert list(f) == list(FEATURE_NAMES)
    assert (
        f["k.count"] == 1
        and f["c.unroll_pragmas"] > code_features(kernel(0), cfg)["c.unroll_pragmas"]
    )
    f["k.count"] = 99  # the caller's copy; the cache is unaffected
    assert code_features(kernel(2), cfg)["k.count"] == 1
    assert code_features("int main() {}", cfg)["k.count"] == 0


def test_score_in_unit_interval_and_monotone_in_a_dominant_feature():
    t = task("t/x/0", "x", {"a": (kernel(0), {}), "b": (kernel(2), {})})
    m = _unroll_model()
    scores = [score(t, kernel(u), m) for u in range(5)]
    assert all(isinstance(s, RankScore) and 0 <= s.score <= 1 for s in scores)
    assert all(s.compared == 2 and s.model == m.id for s in scores)
    vals = [s.score for s in scores]
    assert vals == sorted(vals) and vals[0] < vals[-1]
    assert make_ranker(m)(t, kernel(4)).score == vals[-1]


def test_score_without_implementations_is_neutral():
    t = task("t/x/0", "x", {})
    assert score(t, kernel(1), _unroll_model()) == RankScore(
        score=0.5, compared=0, model=_unroll_model().id
    )


def test_training_learns_the_preference_and_is_deterministic():
    tasks = unroll_tasks()
    m1 = train_feature_ranker(tasks, SPLITS, NO_PTXAS)
    m2 = train_feature_ranker(tasks, SPLITS, NO_PTXAS)
    assert m1 == m2
    assert m1.training["families"] == ["fam0", "fam1", "fam2", "fam3"]
    assert m1.training["heldout_families"] == ["fam4", "fam5"]
    assert m1.training["pairs"] == 8 * 3
    held = [t for t in tasks if t.family == "fam5"][0]
    assert score(held, kernel(3), m1).score > 0.5 > score(held, kernel(0), m1).score


def test_training_without_measurements_says_how_to_measure():
    tasks = [task("t/fam0/0", "fam0", {"a": (kernel(0), {}), "b": (kernel(1), {})})]
    with pytest.raises(NoPairsError, match="cudaperf eval .*tasks attach"):
        train_feature_ranker(tasks, SPLITS, NO_PTXAS)


def test_train_config_validation():
    with pytest.raises(ValueError, match="l2"):
        TrainConfig(l2=0)
    with pytest.raises(ValueError, match=">= 1"):
        TrainConfig(min_ratio=0.9)


def test_features_many_uses_a_pool_and_a_disk_cache(tmp_path, monkeypatch):
    from cudaperf.analyze import AnalyzeConfig
    from cudaperf.rank import features

    cfg = AnalyzeConfig(resources=False)
    codes = [kernel(u, pad=p) for u in range(3) for p in range(2)] + [kernel(0)]
    want = [code_features(c, cfg) for c in codes]
    got = features.features_many(codes, cfg, workers=2, cache_dir=tmp_path)
    assert [list(g) for g in got] == [list(FEATURE_NAMES)] * len(codes)
    assert json.dumps(got) == json.dumps(want)  # NaN-aware equality
    assert len(list(tmp_path.glob("features-*.jsonl"))) == 1

    def boom(*a, **k):
        raise AssertionError("computed again instead of read from the disk cache")

    features.clear_cache()
    monkeypatch.setattr(features, "code_features", boom)
    again = features.features_many(codes, cfg, workers=2, cache_dir=tmp_path)
    assert json.dumps(again) == json.dumps(want)


def test_weights_table_sorted_by_magnitude():
    m = BTModel(names=["a", "b"], means=[0.0, 1.0], stds=[2.0, 1.0], coef=[0.5, -3.0])
    rows = m.weights_table()
    assert [r["feature"] for r in rows] == ["b", "a"] and rows[1]["per_unit"] == 0.25


def _count_analyses(monkeypatch) -> list[str]:
    """Every analyze() call, from the reward scorer's analyzer or the ranker's features."""
    import cudaperf.analyze
    import cudaperf.rank.features as features

    seen: list[str] = []
    real = cudaperf.analyze.analyze

    def counting(code, config=None):
        seen.append(code)
        return real(code, config=config)

    monkeypatch.setattr(cudaperf.analyze, "analyze", counting)
    monkeypatch.setattr(features, "analyze", counting)
    return seen


def test_features_of_reports_are_code_features_byte_for_byte():
    import json

    from cudaperf.analyze import AnalyzeConfig, analyze
    from cudaperf.rank.features import clear_cache, features_of_reports
    from cudaperf.tasks.io import load_sample

    cfg = AnalyzeConfig(resources=False)
    for t in load_sample():
        for impl in t.implementations[:2]:
            clear_cache()
            want = json.dumps(code_features(impl.code, cfg))
            clear_cache()
            got = json.dumps(features_of_reports(impl.code, analyze(impl.code, config=cfg), cfg))
            assert got == want, (t.id, impl.id)


def test_a_scored_candidate_is_analysed_once_and_implementations_once_per_task(monkeypatch):
    from cudaperf.execute.types import Status
    from cudaperf.rank.features import clear_cache
    from cudaperf.rank.ranker import load_ranker, make_ranker
    from cudaperf.reward import RewardScorer, default_analyzer
    from cudaperf.tasks.io import load_sample
    from tests.refine.helpers import result

    task = next(t for t in load_sample() if t.id.endswith("saxpy"))
    ranker = make_ranker(load_ranker())
    clear_cache()
    seen = _count_analyses(monkeypatch)
    sc = RewardScorer(
        [task],
        evaluator=lambda jobs: [result(Status.OK, c.code, t.id) for t, c in jobs],
        analyzer=default_analyzer(ranker.analyze_config),
        ranker=ranker,
    )
    cands = [kernel(0), kernel(1)]
    for code in cands:
        (s,) = sc.score_code(task, [code])
        assert s.reports and s.rank is not None
    impls = [i.code for i in task.implementations]
    assert sorted(seen) == sorted(impls + cands)  # each code analysed exactly once


def test_a_non_finite_l2_is_refused_by_the_training_config():
    for bad in (float("nan"), float("inf"), -1.0):
        with pytest.raises(ValueError, match="l2 must be a finite number > 0"):
            TrainConfig(l2=bad)
