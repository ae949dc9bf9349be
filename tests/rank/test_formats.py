"""Reading saved feature rankers back by format, and the packaged default weights."""

import json

import numpy as np
import pytest

from cudaperf.rank import formats
from cudaperf.rank.bt import BTModel
from cudaperf.rank.formats import ModelNotTrainedError, load_default, load_model


def test_model_probabilities_save_and_load(tmp_path):
    m = BTModel(names=["a", "b"], means=[0.0, 1.0], stds=[1.0, 2.0], coef=[1.0, 0.0])
    fa, fb = {"a": 2.0, "b": 9.0}, {"a": 0.0, "b": float("nan")}
    assert m.prob(fa, fb) == pytest.approx(1 / (1 + np.exp(-2.0)))
    assert m.prob(fa, fb) + m.prob(fb, fa) == pytest.approx(1.0)
    back = load_model(m.save(tmp_path / "m.json"))
    assert back == m and back.id == m.id and m.id.startswith("feature-bt-")


def test_load_errors(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": "other"}))
    with pytest.raises(ValueError, match="not a cudaperf feature ranker"):
        load_model(bad)
    with pytest.raises(ModelNotTrainedError, match="rank train"):
        load_model(tmp_path / "missing.json")


def test_missing_default_weights_say_how_to_train(monkeypatch, tmp_path):
    monkeypatch.setattr(formats, "default_weights_path", lambda: tmp_path / "none.json")
    with pytest.raises(ModelNotTrainedError, match="not been trained on measured data") as e:
        load_default()
    assert "cudaperf rank train" in str(e.value) and "tasks attach" in str(e.value)


def test_the_shipped_default_was_trained_on_the_measured_dataset():
    """The packaged weights carry their provenance and held-out metrics (`rank train --ship`)."""
    from cudaperf.rank.ensemble import EnsembleModel

    m = load_default()
    assert isinstance(m, EnsembleModel) and m.analyzer == {"resources": False, "arch": "sm_90"}
    assert {x.format for x in m.members} == {
        "cudaperf-feature-ranker-v2",
        "cudaperf-feature-ranker-lambdarank-v2",
    }
    assert m.config_aware and m.training["config_aware"] is True
    t = m.training
    assert t["gpus"] == ["NVIDIA H200"] and t["pairs"] > 10_000 and t["dataset_sha256"]
    h = t["heldout_metrics"]
    assert h["pairs"] >= 1000 and h["pairwise_accuracy"] >= 0.85  # the measured value: 0.873
    assert h["pairwise_accuracy"] > h["baseline_structural_accuracy"]
    assert not set(t["heldout_families"]) & set(t["families"])
