from __future__ import annotations

import pickle

from cudaperf.reward.scorer import default_analyzer
from cudaperf.tasks.io import load_sample
from cudaperf.train.analysis import PooledAnalyzer


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
