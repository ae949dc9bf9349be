import json

import numpy as np
import pytest

from cudaperf.rank.bt import BTModel
from cudaperf.rank.ensemble import EnsembleModel
from cudaperf.rank.formats import load_model
from cudaperf.rank.lambdarank import FORMAT, LambdaRankModel, fit_lambdarank
from cudaperf.rank.ranker import TrainConfig, load_ranker, score, train_feature_ranker
from tests.rank.helpers import SPLITS, kernel, unroll_tasks

NO_PTXAS = TrainConfig(resources=False)


def _synthetic(n_groups: int = 60, seed: int = 0):
    """Groups whose fastest member has x nearest 5: not monotone in x, so no linear model on
    feature differences can rank them, trees can."""
    rng = np.random.default_rng(seed)
    groups, pairs = [], []
    for _ in range(n_groups):
        xs = rng.uniform(0, 10, size=4)
        g = [({"x": float(x), "noise": float(rng.normal())}, 1.0 + abs(x - 5.0)) for x in xs]
        groups.append(g)
        for i in range(4):
            for j in range(i + 1, 4):
                pairs.append((g[i][0], g[j][0], g[i][1] < g[j][1]))
    return groups, pairs


def test_fit_learns_a_non_monotone_preference_and_calibrates():
    groups, pairs = _synthetic()
    text, k, params = fit_lambdarank(groups, pairs, ["x", "noise"])
    assert params["objective"] == "lambdarank" and k > 0
    m = LambdaRankModel(names=["x", "noise"], booster=text, scale=k, params=params)
    assert m.prob({"x": 5.2, "noise": 0.0}, {"x": 9.5, "noise": 0.0}) > 0.8
    assert m.prob({"x": 5.2, "noise": 0.0}, {"x": 0.5, "noise": 0.0}) > 0.8
    test_groups, test_pairs = _synthetic(20, seed=1)
    u = {
        id(f): v
        for g in test_groups
        for (f, _), v in zip(g, m.utility([f for f, _ in g]), strict=True)
    }
    acc = np.mean([(u[id(a)] > u[id(b)]) == faster for a, b, faster in test_pairs])
    assert acc > 0.85
    assert m.weights_table()[0]["feature"] == "x"


def test_fit_is_deterministic_and_needs_groups():
    groups, pairs = _synthetic()
    assert fit_lambdarank(groups, pairs, ["x", "noise"]) == fit_lambdarank(
        groups, pairs, ["x", "noise"]
    )
    with pytest.raises(ValueError, match="no ranking groups"):
        fit_lambdarank([], [], ["x"])


def test_objectives_ensemble_lambdarank_bt_train_save_and_load(tmp_path):
    tasks = unroll_tasks()
    ens = train_feature_ranker(tasks, SPLITS, NO_PTXAS)  # the default: the mean of both
    lr = train_feature_ranker(tasks, SPLITS, TrainConfig(resources=False, objective="lambdarank"))
    bt = train_feature_ranker(tasks, SPLITS, TrainConfig(resources=False, objective="bt"))
    assert isinstance(ens, EnsembleModel) and isinstance(lr, LambdaRankModel)
    assert isinstance(bt, BTModel) and lr.training["groups"] > 0
    assert [m.id for m in ens.members] == [bt.id, lr.id]
    held = [t for t in tasks if t.family == "fam5"][0]
    codes = [i.code for i in held.implementations]
    mean = (bt.strengths(held, codes) + lr.strengths(held, codes)) / 2
    assert np.allclose(ens.strengths(held, codes), mean)
    for m in (ens, lr, bt):
        assert score(held, kernel(3), m).score > 0.5 > score(held, kernel(0), m).score
        d = tmp_path / m.id
        path = m.save(d / "feature_ranker.json")
        back = load_ranker(d)  # a folder holding feature_ranker.json
        assert type(back) is type(m) and back.id == m.id
        assert np.allclose(back.strengths(held, codes), m.strengths(held, codes))
        assert json.loads(path.read_text())["format"] == m.format
    assert lr.format == FORMAT


def test_bad_files_and_objectives_are_named(tmp_path):
    p = tmp_path / "m.json"
    p.write_text(json.dumps({"format": FORMAT, "names": ["x"]}))
    with pytest.raises(ValueError, match="malformed ranker model"):
        load_model(p)
    p.write_text(json.dumps({"format": "something-else"}))
    with pytest.raises(ValueError, match="lambdarank"):
        load_model(p)
    p.write_text(json.dumps({"format": "cudaperf-feature-ranker-ensemble-v1", "members": []}))
    with pytest.raises(ValueError, match="members"):
        load_model(p)
    with pytest.raises(ValueError, match="objective"):
        TrainConfig(objective="xgboost")


def test_loading_a_tree_model_without_lightgbm_says_how_to_fix_it(tmp_path, monkeypatch):
    import builtins

    groups, pairs = _synthetic(10)
    text, k, params = fit_lambdarank(groups, pairs, ["x", "noise"])
    path = LambdaRankModel(names=["x", "noise"], booster=text, scale=k).save(tmp_path / "m.json")
    real = builtins.__import__

    def no_lightgbm(name, *a, **kw):
        if name == "lightgbm":
            raise ImportError("No module named 'lightgbm'")
        return real(name, *a, **kw)

    monkeypatch.setattr(builtins, "__import__", no_lightgbm)
    with pytest.raises(ImportError, match="pip install lightgbm"):
        load_model(path)
