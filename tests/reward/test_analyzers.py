from __future__ import annotations

import pickle

from cudaperf.reward.analyzers import PooledAnalyzer
from cudaperf.reward.scorer import default_analyzer
from cudaperf.tasks.io import load_sample


def test_prefetch_analyses_a_batch_in_the_pool_and_calls_hit_the_cache():
    codes = [i.code for t in load_sample()[:2] for i in t.implementations][:3]
    an = PooledAnalyzer(workers=2)
    try:
        assert an.prefetch([*codes, None, codes[0]]) == 3
        assert an.prefetch(codes) == 0 and an.analysed == 3
        for c in codes:
            assert an(c) == default_analyzer()(c)  # same reports as the inline analyzer
        assert an.analysed == 3  # every call above was a cache hit
        assert an("not cuda at all") == [] and an.analysed == 4
        copy = pickle.loads(pickle.dumps(an))
        assert copy(codes[0]) == an(codes[0])
    finally:
        an.close()


def test_the_training_scorer_analyses_each_candidate_once(monkeypatch):
    """PooledAnalyzer hands its reports to the ranker (through RewardScorer): the packaged
    ranker's features come from the pool's analysis, not from a second one."""
    import shutil

    import pytest

    if shutil.which("nvcc") is None:
        pytest.skip("ptxas (nvcc) is part of the default analysis")
    from cudaperf.execute.types import Status
    from cudaperf.rank.features import clear_cache
    from cudaperf.rank.ranker import load_ranker, make_ranker
    from cudaperf.reward import RewardScorer
    from tests.rank.helpers import kernel
    from tests.reward.helpers import result
    from tests.reward.test_scorer import SAXPY, _count

    clear_cache()
    seen = _count(monkeypatch)
    ok = lambda jobs: [result(Status.OK, c.code, t.id) for t, c in jobs]  # noqa: E731
    an = PooledAnalyzer(workers=1)  # inline: the counting patch sees every analysis
    sc = RewardScorer([SAXPY], evaluator=ok, analyzer=an, ranker=make_ranker(load_ranker()))
    cands = [kernel(0), kernel(2, stride=2)]
    an.prefetch(cands)
    got = sc.score_code(SAXPY, cands)
    assert all(s.rank is not None for s in got)
    impls = [i.code for i in SAXPY.implementations]
    assert sorted(seen["analyze"]) == sorted(impls + cands)  # each candidate once
    assert an.analyse("int main() { return 0; }") == []  # no kernel: complete, handed on
    clear_cache()


def test_a_broken_pool_leaves_the_batch_to_inline_analysis_and_the_next_starts_anew(caplog):
    """A pool worker killed (out of host memory, a signal) broke `prefetch` with
    BrokenProcessPool, which ended the whole bench run or training step in a traceback."""
    codes = [i.code for t in load_sample()[:3] for i in t.implementations][:6]
    an = PooledAnalyzer(workers=2)
    try:
        assert an.prefetch(codes[:2]) == 2
        for proc in list(an._pool._processes.values()):  # what the OOM killer would do
            proc.kill()
        with caplog.at_level("WARNING"):
            assert an.prefetch(codes[2:4]) == 0
        assert "analysis pool broke; 2 code(s) left to inline analysis" in caplog.text
        assert an._pool is None
        assert an(codes[2]) == default_analyzer()(codes[2])  # analysed inline when asked
        assert an.prefetch(codes[4:]) == 2  # a new pool
    finally:
        an.close()
