"""The ranker's features read from an analysis the reward scorer already ran (with ptxas) are
the ones the ranker computes itself (without ptxas), byte for byte: the packaged weights were
trained on the latter."""

from __future__ import annotations

import json
import shutil

import pytest

from cudaperf.analyze import AnalyzeConfig, analyze
from cudaperf.rank.features import clear_cache, code_features, features_from_analysis
from cudaperf.rank.ranker import load_ranker
from cudaperf.tasks.io import load_sample
from tests.data_helpers import implementations


@pytest.fixture(autouse=True)
def _fresh_feature_cache():
    clear_cache()
    yield
    clear_cache()


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (ptxas) on PATH")
def test_features_from_the_scorers_analysis_are_the_rankers_own_byte_for_byte(
    shared_ptxas_cache,
):
    from cudaperf.reward import default_analyzer

    have = default_analyzer().config  # what RewardScorer analyses with by default
    want = load_ranker().analyze_config()  # what the packaged ranker's features use
    assert have.resources and not want.resources
    codes = implementations()
    assert len(codes) > 40
    for name, code in codes:
        clear_cache()
        old = json.dumps(code_features(code, want))
        clear_cache()
        new = json.dumps(features_from_analysis(code, analyze(code, config=have), have, want))
        assert new == old, name


def test_nothing_is_read_or_cached_for_a_config_the_analysis_cannot_give(monkeypatch):
    import cudaperf.rank.features as features

    code = load_sample()[0].implementations[0].code
    off = AnalyzeConfig(resources=False)
    reports = analyze(code, config=off)
    assert features_from_analysis(code, reports, off, AnalyzeConfig()) is None
    calls = []
    monkeypatch.setattr(features, "analyze", lambda c, config: calls.append(c) or reports)
    code_features(code, AnalyzeConfig())  # not served from a cache seeded above
    assert calls == [code]
