"""`RewardScorer` with the default analyzer (ptxas on) and the packaged ranker (features without
ptxas): one analysis per candidate, and the ranker's scores those of its own analysis."""

from __future__ import annotations

import shutil

import pytest

from cudaperf.execute.types import Status
from cudaperf.rank.features import clear_cache
from cudaperf.rank.ranker import load_ranker, make_ranker
from cudaperf.reward import RewardScorer
from cudaperf.tasks.io import load_sample
from tests.rank.helpers import kernel
from tests.reward.helpers import result

SAXPY = next(t for t in load_sample() if t.id.endswith("saxpy"))
SERIAL = kernel(1).replace("<<<(n + 255) / 256, 256>>>", "<<<1, 1>>>")
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc on PATH")


@pytest.fixture(autouse=True)
def _fresh_feature_cache():
    clear_cache()
    yield
    clear_cache()


def _count(monkeypatch) -> dict[str, list[str]]:
    """Every analyze() call (the scorer's analyzer, the ranker's features) and ptxas run."""
    import cudaperf.analyze
    import cudaperf.analyze.api as api
    import cudaperf.rank.features as features

    seen: dict[str, list[str]] = {"analyze": [], "ptxas": []}
    real, ptxas = api.analyze, api.ptxas_resources

    def analyze(code, config=None):
        seen["analyze"].append(code)
        return real(code, config=config)

    def resources(code, *a, **k):
        seen["ptxas"].append(code)
        return ptxas(code, *a, **k)

    monkeypatch.setattr(cudaperf.analyze, "analyze", analyze)
    monkeypatch.setattr(features, "analyze", analyze)
    monkeypatch.setattr(api, "ptxas_resources", resources)
    return seen


def _scorer(ranker) -> RewardScorer:
    ok = lambda jobs: [result(Status.OK, c.code, t.id) for t, c in jobs]  # noqa: E731
    return RewardScorer([SAXPY], evaluator=ok, ranker=ranker)  # default analyzer and analysis


def _own_opinion(ranker, code: str):
    """The ranker's score computed as before: its own analysis of the code, without ptxas."""
    clear_cache()
    return ranker(SAXPY, code)


@needs_nvcc
def test_with_the_defaults_each_candidate_is_analysed_once(monkeypatch):
    ranker = make_ranker(load_ranker())
    seen = _count(monkeypatch)
    sc, cands = _scorer(ranker), [kernel(0), kernel(2, stride=2)]
    got = [sc.score_code(SAXPY, [c])[0] for c in cands]
    assert all(s.reports and s.reports[0].features["registers"] is not None for s in got)
    impls = [i.code for i in SAXPY.implementations]
    assert sorted(seen["analyze"]) == sorted(impls + cands)  # each code once, no second pass
    assert sorted(seen["ptxas"]) == sorted(cands)  # the ranker's features need no ptxas
    for code, s in zip(cands, got, strict=True):
        assert s.rank == _own_opinion(ranker, code)  # the ranker's score is unchanged


def test_a_candidate_without_credited_kernels_is_analysed_once(monkeypatch):
    from cudaperf.analyze.launches import credited_source

    blank = credited_source(SERIAL, None)  # <<<1, 1>>>: blanked, no structure credit
    assert blank != SERIAL
    ranker = make_ranker(load_ranker())
    seen = _count(monkeypatch)
    (s,) = _scorer(ranker).score_code(SAXPY, [SERIAL])
    assert s.reports == () and s.rank is not None
    assert sorted(seen["analyze"]) == sorted([i.code for i in SAXPY.implementations] + [blank])
    assert s.rank == _own_opinion(ranker, blank)


def test_a_failed_analysis_is_not_handed_on_and_the_ranker_analyses_itself(monkeypatch):
    import cudaperf.analyze.api as api

    def broken(*a, **k):
        raise RuntimeError("ptxas crashed")  # escapes analyze(): the analysis fails

    monkeypatch.setattr(api, "ptxas_resources", broken)
    ranker = make_ranker(load_ranker())
    (s,) = _scorer(ranker).score_code(SAXPY, [kernel(1)])
    assert s.reports == ()
    assert s.rank == _own_opinion(ranker, kernel(1))  # its features saw the kernel


def test_the_default_analyzer_tells_no_kernel_from_a_failure(monkeypatch):
    import cudaperf.analyze.api as api
    from cudaperf.reward import StructureAnalyzer, default_analyzer

    an = default_analyzer()
    assert isinstance(an, StructureAnalyzer) and an.config.resources  # ptxas on by default
    assert an.analyse("int main() { return 0; }") == [] == an("int main() { return 0; }")
    monkeypatch.setattr(api, "find_kernels", lambda *a: 1 / 0)
    assert an.analyse(kernel(1)) is None and an(kernel(1)) == []


def test_build_scorer_is_every_commands_scorer():
    """`build_scorer`: the given reward and evaluator as they are, every candidate analysed
    (feedback shows findings, also of a failing one), the ranker a spec names or the one
    given."""
    from cudaperf.reward import RewardConfig
    from cudaperf.reward.analyzers import PooledAnalyzer
    from cudaperf.reward.scorer import build_scorer

    seen = []
    bad = lambda jobs: [result(Status.COMPILE_ERROR, c.code, t.id) for t, c in jobs]  # noqa: E731
    cfg = RewardConfig.preset("outcome_only")
    sc = build_scorer([SAXPY], cfg, bad, "none", analyzer=lambda code: seen.append(code) or [])
    assert sc.config is cfg and sc.evaluator is bad and sc.ranker is None
    sc.score_code(SAXPY, [kernel(1)])
    assert seen == [kernel(1)]  # analysed though it failed and the structure weight is 0
    mine = make_ranker(load_ranker())
    assert build_scorer([SAXPY], cfg, bad, mine).ranker is mine
    assert build_scorer([SAXPY], cfg, bad).ranker is not None  # "default": the packaged one
    pooled = build_scorer([SAXPY], cfg, bad).analyzer  # a batch's analyses in a pool
    assert isinstance(pooled, PooledAnalyzer) and pooled.config == default_config()


def default_config():
    from cudaperf.analyze.types import AnalyzeConfig

    return AnalyzeConfig()


class _Prefetching:
    """An analyzer with a batch `prefetch`, which records what it is asked for and when."""

    def __init__(self, events: list) -> None:
        self.events = events

    def prefetch(self, codes) -> None:
        self.events.append(("prefetch", list(codes)))

    def analyse(self, code: str):
        self.events.append(("analyse", code))
        return []

    def __call__(self, code: str):
        return self.analyse(code) or []

    def close(self) -> None:
        self.events.append(("close",))


def test_a_batch_is_prefetched_once_after_the_evaluator_and_before_each_analysis():
    """With an analyzer that can prefetch (`reward.analyzers.PooledAnalyzer`), the scorer hands
    it every code it will analyse in one call, after the evaluator returned (not while nvcc and
    the C reference's timing have the CPUs) and before any per-candidate analysis: the codes
    analysed, the credited one of a correct kernel, not one it does not analyse."""
    from cudaperf.analyze.launches import credited_source

    events: list = []

    def evaluate(jobs):
        events.append(("evaluate", len(jobs)))
        ok = {SERIAL}
        return [
            result(Status.OK if c.code in ok else Status.COMPILE_ERROR, c.code, t.id)
            for t, c in jobs
        ]

    an = _Prefetching(events)
    sc = RewardScorer([SAXPY], evaluator=evaluate, analyzer=an, analyze="always")
    sc.score_code(SAXPY, [kernel(1), SERIAL, kernel(1)])
    blank = credited_source(SERIAL, None)
    assert events[0] == ("evaluate", 2)
    assert events[1] == ("prefetch", [kernel(1), blank])
    assert sorted(e[1] for e in events[2:]) == sorted([kernel(1), blank])
    assert all(e[0] == "analyse" for e in events[2:])
    events.clear()
    sc = RewardScorer([SAXPY], evaluator=evaluate, analyzer=an, analyze="needed")
    sc.score_code(SAXPY, [kernel(2), SERIAL])  # only the correct one needs its structure
    assert events[1] == ("prefetch", [blank]) and events[2:] == [("analyse", blank)]
    events.clear()
    sc.close()
    assert events == [("close",)]  # the evaluator (a function) has no close: left alone


def test_the_scorer_clocks_its_evaluator_analysis_and_ranker_apart():
    """`RewardScorer.seconds`: what a bench chunk's timing.jsonl line splits its scoring into."""
    import time

    from cudaperf.rank.types import RankScore

    def slow(seconds, value):
        def f(*a):
            time.sleep(seconds)
            return value(*a)

        return f

    ok = lambda jobs: [result(Status.OK, c.code, t.id) for t, c in jobs]  # noqa: E731
    ranked = RankScore(score=0.5)
    sc = RewardScorer(
        [SAXPY],
        evaluator=slow(0.2, ok),
        analyzer=slow(0.1, lambda code: []),
        ranker=slow(0.3, lambda t, code: ranked),
        analyze="always",
    )
    sc.score_code(SAXPY, [kernel(1)])
    got = dict(sc.seconds)
    assert 0.2 <= got["evaluate_s"] < 0.28  # the evaluator alone
    assert 0.1 <= got["analyse_s"] < 0.18  # the analysis, without the ranker's 0.3 s
    assert 0.3 <= got["rank_s"] < 0.38
    sc.score_code(SAXPY, [kernel(1)])  # a cache hit: nothing runs, nothing is added
    assert sc.seconds == got
