"""Config-aware ranking: config and launch features, per-config strengths, formats v1/v2."""

import json
import math

import numpy as np
import pytest
import sympy as sp

from cudaperf.analyze import index
from cudaperf.analyze.index import _DIV, TX, TY
from cudaperf.rank import config_features as cf
from cudaperf.rank.bt import BTModel
from cudaperf.rank.config_features import (
    CONFIG_NAMES,
    LAUNCH_NAMES,
    column,
    config_bytes,
    config_features,
    launch_features,
    needs_config,
    row,
)
from cudaperf.rank.formats import load_model
from cudaperf.rank.metrics import evaluate, pair_probabilities, pairwise_accuracy, strength_table
from cudaperf.rank.pairs import build_pairs
from cudaperf.rank.ranker import TrainConfig, score, score_many, train_feature_ranker
from cudaperf.tasks.model import Task
from tests.rank.helpers import H200, SPLITS, kernel, task

NO_PTXAS = TrainConfig(resources=False)


def _flip_tasks(families: int = 6, per_family: int = 2) -> list[Task]:
    """The unrolled kernel is slower on the small config (n = 10) and faster on the big one
    (n = 1000) and the held-out one (n = 333): the order flips with the problem size. (Not a
    pure XOR of size and code, which greedy trees could not split.)"""
    out = []
    for f in range(families):
        for j in range(per_family):
            small = {("small", H200): 1.0, ("big", H200): 10.0, ("heldout", H200): 5.0}
            unrolled = {("small", H200): 2.0, ("big", H200): 4.0, ("heldout", H200): 3.0}
            mid = {("small", H200): 1.5, ("big", H200): 6.0, ("heldout", H200): 4.0}
            impls = {
                "plain": (kernel(unroll=0, pad=(f + j) % 3), small),
                "mid": (kernel(unroll=1, pad=(f + j + 2) % 3), mid),
                "unrolled": (kernel(unroll=2, pad=(f + j + 1) % 3), unrolled),
            }
            out.append(task(f"t/fam{f}/{j}", f"fam{f}", impls))
    return out


def test_config_bytes_and_relative_size():
    t = _flip_tasks(1, 1)[0]  # x, y: n floats each; configs small n=10, big 1000, heldout 333
    assert config_bytes(t, t.config("small")) == 80.0
    assert config_bytes(t, t.config("big")) == 8000.0
    s, b = config_features(t, t.config("small")), config_features(t, t.config("big"))
    assert list(s) == list(CONFIG_NAMES)
    assert s["s.log_bytes"] == pytest.approx(math.log(80.0))
    assert s["s.rel"] < 0 < b["s.rel"]
    mean = np.mean([math.log(80.0), math.log(8000.0), math.log(2664.0)])
    assert b["s.rel"] == pytest.approx(math.log(8000.0) - mean)


def test_launch_features_fold_the_grid_at_the_configs_sizes():
    t = _flip_tasks(1, 1)[0]
    f = launch_features(kernel(), t, t.config("big"))  # <<<(n + 255) / 256, 256>>>, n = 1000
    assert list(f) == list(LAUNCH_NAMES)
    assert f["l.log_threads"] == pytest.approx(math.log(4 * 256))
    assert f["l.threads_per_byte"] == pytest.approx(math.log(1024 / 8000))
    assert f["l.fill"] == pytest.approx(1024 / (132 * 2048))
    assert f["l.waves"] == pytest.approx(math.log(4 / 132))
    small = launch_features(kernel(), t, t.config("small"))
    assert small["l.log_threads"] == pytest.approx(math.log(256))
    # unknown: no launch, a grid from an opaque call, or a PyTorch→CUDA task
    assert all(math.isnan(v) for v in launch_features("int x;", t, t.config("big")).values())
    opaque = kernel().replace("(n + 255) / 256", "pick(n)")
    assert all(math.isnan(v) for v in launch_features(opaque, t, t.config("big")).values())


def test_columns_and_rows():
    r = {"a": 2.0, "s.rel": -1.5}
    assert column(r, "a") == 2.0 and column(r, "a*s.rel") == -3.0
    assert math.isnan(column(r, "b")) and math.isnan(column(r, "b*s.rel"))
    assert needs_config("a*s.rel") and needs_config("s.rel") and needs_config("l.fill")
    assert not needs_config("k.count") and not needs_config("c.loops")
    t = _flip_tasks(1, 1)[0]
    full = row({"c.loops": 1.0}, t, t.config("big"), kernel())
    assert set(full) == {"c.loops", *CONFIG_NAMES, *LAUNCH_NAMES}


@pytest.mark.parametrize("objective", ["bt", "lambdarank", "ensemble"])
def test_a_flip_between_small_and_large_configs_is_learnt(objective):
    tasks = _flip_tasks()
    cfg = TrainConfig(resources=False, objective=objective)
    m = train_feature_ranker(tasks, SPLITS, cfg)
    assert m.config_aware and m.training["config_aware"] is True
    held = [t for t in tasks if t.family in ("fam4", "fam5")]
    for t in held:
        u = m.config_strengths(t, [i.code for i in t.implementations])
        small, big = (u[[c.name for c in t.configs].index(n)] for n in ("small", "big"))
        assert small[0] > small[1] > small[2]  # plain wins small, unrolled wins big
        assert big[2] > big[1] > big[0]
    s = strength_table(held, m)
    assert pairwise_accuracy(build_pairs(held), s) == 1.0
    rep = evaluate(tasks, m, SPLITS, min_ratio=1.2)
    assert rep["pairwise_accuracy"] == 1.0
    assert set(rep["by_config"]) == {"small", "big", "heldout"}
    # a config-free model cannot: it predicts one order on every config (2 of 3 at best)
    free = train_feature_ranker(
        tasks, SPLITS, TrainConfig(resources=False, objective=objective, config_aware=False)
    )
    assert not free.config_aware
    assert pairwise_accuracy(build_pairs(held), strength_table(held, free)) <= 2 / 3


def test_per_config_probabilities_are_antisymmetric():
    tasks = _flip_tasks()
    m = train_feature_ranker(tasks, SPLITS, TrainConfig(resources=False, objective="bt"))
    held = [t for t in tasks if t.family == "fam5"]
    pairs = build_pairs(held)
    s = strength_table(held, m)
    swapped = [
        p.__class__(p.task_id, p.family, p.config, p.gpu, p.b, p.a, p.time_b_us, p.time_a_us)
        for p in pairs
    ]
    np.testing.assert_allclose(pair_probabilities(pairs, s) + pair_probabilities(swapped, s), 1.0)
    assert not np.allclose(pair_probabilities(pairs, s), 0.5)


def test_score_averages_the_probability_over_the_visible_configs():
    """Over the visible configs only: a held-out config's sizes (which feedback must not give
    away) neither enter the average nor the relative sizes; moving them changes nothing."""
    tasks = _flip_tasks()
    m = train_feature_ranker(tasks, SPLITS, NO_PTXAS)
    t = [t for t in tasks if t.family == "fam5"][0]
    cands = [kernel(unroll=1), kernel(unroll=3)]
    got = score_many(t, cands, m)
    visible = t.model_copy(update={"configs": [c for c in t.configs if not c.held_out]})
    u = m.config_strengths(visible, [i.code for i in t.implementations] + cands)
    assert len(visible.configs) < len(t.configs)
    for n_held in (7, 10**6):
        configs = [
            c.model_copy(update={"sizes": {**c.sizes, "n": n_held}}) if c.held_out else c
            for c in t.configs
        ]
        moved = t.model_copy(update={"configs": configs})
        assert [r.score for r in score_many(moved, cands, m)] == [r.score for r in got]
    n = len(t.implementations)
    for k, rs in enumerate(got):
        p = 1 / (1 + np.exp(-(u[:, n + k][:, None] - u[:, :n])))
        assert rs.score == pytest.approx(float(p.mean())) and 0 <= rs.score <= 1
        assert rs.compared == n and rs.model == m.id
    assert score(t, cands[0], m).score == pytest.approx(got[0].score, rel=1e-12)
    np.testing.assert_allclose(m.strengths(visible, cands), u[:, n:].mean(axis=0))


@pytest.mark.parametrize("objective", ["bt", "lambdarank", "ensemble"])
def test_config_aware_models_save_and_load(tmp_path, objective):
    tasks = _flip_tasks()
    m = train_feature_ranker(tasks, SPLITS, TrainConfig(resources=False, objective=objective))
    assert m.format.endswith("-v2")
    back = load_model(m.save(tmp_path / "m.json"))
    assert back.id == m.id and back.config_aware
    t = tasks[0]
    codes = [i.code for i in t.implementations]
    np.testing.assert_allclose(back.config_strengths(t, codes), m.config_strengths(t, codes))


def test_old_format_weights_still_load_and_score(tmp_path):
    doc = {
        "format": "cudaperf-feature-ranker-v1",
        "names": ["c.unroll_pragmas"],
        "means": [0.0],
        "stds": [1.0],
        "coef": [3.0],
        "l2": 0.01,
        "analyzer": {"resources": False},
        "training": {},
    }
    p = tmp_path / "v1.json"
    p.write_text(json.dumps(doc))
    m = load_model(p)
    assert isinstance(m, BTModel) and not m.config_aware
    assert m.format == "cudaperf-feature-ranker-v1"
    t = _flip_tasks(1, 1)[0]
    assert m.config_strengths(t, [kernel(0), kernel(2)]).shape == (1, 2)
    assert score(t, kernel(3), m).score > 0.5 > score(t, kernel(0), m).score
    ens = {"format": "cudaperf-feature-ranker-ensemble-v1", "members": [doc]}
    p.write_text(json.dumps(ens))
    assert load_model(p).members[0] == m


def test_a_newer_format_fails_with_a_clear_message(tmp_path):
    p = tmp_path / "v9.json"
    p.write_text(json.dumps({"format": "cudaperf-feature-ranker-v9", "names": []}))
    with pytest.raises(ValueError, match="upgrade cudaperf or retrain"):
        load_model(p)


# ---- the size-expression evaluator (analyze.index.fold) -----------------------------------
# One table of sympy expressions, folded as `analyze.index.warp_values` does for the lane
# (TX, TY) = (3, 1) (a symbol without a value gets a generic one, any other node is a uniform
# opaque term, 0) and as `launch_features` does at the sizes {"n": 1000} (a symbol without a
# value or another node is unknown: NaN features). `div` is C's integer division in both.
_n, _m = sp.Symbol("n", integer=True), sp.Symbol("m")
_BDX = sp.Symbol("BDX", integer=True, nonnegative=True)
UNKNOWN = "unknown"
FOLD_CASES = {  # name: (expression, analyze's lane value, the launch features' value)
    "int": (sp.Integer(7), 7.0, 7.0),
    "rational": (sp.Rational(1, 2), 0.5, 0.5),
    "float": (sp.Float(2.5) * sp.Integer(3), 7.5, 7.5),
    "affine": (_n * 4 + 3, 4099.0, 4003.0),  # n: 1024 (generic) in a lane, 1000 in the config
    "power": (_n**2, 1024.0**2, 1e6),
    "div": (_DIV(_n + 255, 256), 4.0, 4.0),
    "div-negative": (_DIV(-_n, 300), -3.0, -3.0),  # toward zero, as C
    # A negative divisor truncates toward zero in both (analyze floored it before the two
    # evaluators were merged: -4 here).
    "div-by-negative": (_DIV(_n, -300), -3.0, -3.0),
    "div-by-zero": (_DIV(_n, 0), ZeroDivisionError, ZeroDivisionError),
    "lane": (TX + 32 * TY, 35.0, UNKNOWN),  # the lane's threadIdx; a config has none
    "generic": (sp.Symbol("iter@4") + _BDX, 256.0, UNKNOWN),  # loop counter 0, blockDim.x 256
    "missing-symbol": (_m, 1024.0, UNKNOWN),
    "min-call": (sp.Function("call_min")(_n, 5), 0.0, 5.0),  # opaque in a lane, folded here
    "sympy-min": (sp.Min(_n, 5), 0.0, 5.0),
    "other-call": (sp.Function("call_foo")(_n), 0.0, UNKNOWN),
    "load": (sp.Function("load")(_n) + 1, 1.0, UNKNOWN),
}


@pytest.mark.parametrize("name", FOLD_CASES)
def test_size_expressions_fold_alike_in_analyze_and_in_launch_features(name):
    e, lane, launch = FOLD_CASES[name]
    if lane is ZeroDivisionError:
        with pytest.raises(ZeroDivisionError):
            index._num(e, (3, 1))
    else:
        assert index._num(e, (3, 1)) == lane
    if launch is UNKNOWN:
        with pytest.raises(cf._Unknown):
            cf._eval(e, {"n": 1000})
    elif launch is ZeroDivisionError:
        with pytest.raises(ZeroDivisionError):
            cf._eval(e, {"n": 1000})
    else:
        assert cf._eval(e, {"n": 1000}) == launch
