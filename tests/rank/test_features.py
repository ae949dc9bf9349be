"""The ranker's features read from an analysis the reward scorer already ran (with ptxas) are
the ones the ranker computes itself (without ptxas), byte for byte: the packaged weights were
trained on the latter."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from cudaperf.analyze import AnalyzeConfig, analyze
from cudaperf.rank.features import clear_cache, code_features, features_from_analysis
from cudaperf.rank.ranker import load_ranker
from cudaperf.tasks.io import load_sample
from cudaperf.tasks.model import Task

DATA = Path(__file__).resolve().parents[2] / "data" / "tasks.jsonl.gz"


@pytest.fixture(autouse=True)
def _fresh_feature_cache():
    clear_cache()
    yield
    clear_cache()


def implementations(every: int = 700) -> list[tuple[str, str]]:
    """(name, code) of every sample implementation and of the dataset's tasks at every
    `every`-th line (C and PyTorch families)."""
    out = [(f"{t.id}:{i.id}", i.code) for t in load_sample() for i in t.implementations]
    if DATA.exists():
        with gzip.open(DATA, "rt", encoding="utf-8") as f:
            tasks = [Task.model_validate_json(ln) for n, ln in enumerate(f) if n % every == 0]
        out += [(f"{t.id}:{i.id}", i.code) for t in tasks for i in t.implementations]
    return out


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (ptxas) on PATH")
def test_features_from_the_scorers_analysis_are_the_rankers_own_byte_for_byte():
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
