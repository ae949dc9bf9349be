"""`PooledAnalyzer`: the structural analyzer for a whole batch at once, in a process pool.

`RewardScorer` calls its analyzer once per candidate, one after another; with ptxas that is
about half a second per kernel, so a GRPO step of dozens of candidates would wait on it. The
rollout calls `prefetch(codes)` with every candidate of a turn before scoring it: the codes
not seen before are analysed in `workers` processes at once and kept (an LRU of `cache_size`
codes); the scorer's later per-candidate calls are then cache hits. A code that was not
prefetched is analysed inline, exactly as `reward.scorer.default_analyzer` does (a failing
analysis gives `[]`, never an error). Like `reward.scorer.StructureAnalyzer` it has a `config`
and an `analyse` that tells "no kernel" (`[]`) from a failed analysis (None), so the scorer
hands its reports to the ranker and a candidate is analysed once on its way to a reward.
"""

from __future__ import annotations

import hashlib
import logging
import multiprocessing
import os
from collections import OrderedDict
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from itertools import repeat

from cudaperf.analyze.types import AnalyzeConfig, StructuralReport
from cudaperf.procpool import worker_init

log = logging.getLogger(__name__)

__all__ = ["PooledAnalyzer"]


def _analyze(code: str, config: AnalyzeConfig) -> list[StructuralReport] | None:
    """The default analyzer's `analyse` with `config`: reports, `[]` (no kernel) or None (it
    failed)."""
    from cudaperf.reward.scorer import StructureAnalyzer

    return StructureAnalyzer(config).analyse(code)


def _key(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()


class PooledAnalyzer:
    """An `Analyzer` (code -> reports) with a batch `prefetch` in a process pool."""

    def __init__(self, workers: int | None = None, cache_size: int = 4096) -> None:
        self.workers = workers or max(1, (os.cpu_count() or 2) // 2)
        self.cache_size = cache_size
        self.config = AnalyzeConfig()  # what every analysis runs with (the scorer compares it)
        self._cache: OrderedDict[str, list[StructuralReport] | None] = OrderedDict()
        self._pool: ProcessPoolExecutor | None = None
        self.analysed = 0  # codes analysed so far (pool and inline)

    def prefetch(self, codes: Iterable[str | None]) -> int:
        """Analyse the new codes among `codes` in the pool; how many were new."""
        new = {_key(c): c for c in codes if c is not None and _key(c) not in self._cache}
        if not new:
            return 0
        if self.workers == 1 or len(new) == 1:
            results = [_analyze(c, self.config) for c in new.values()]
        else:
            if self._pool is None:
                # spawn: the trainer's process may hold a CUDA context, which fork must not copy
                ctx = multiprocessing.get_context("spawn")
                self._pool = ProcessPoolExecutor(
                    self.workers, mp_context=ctx, initializer=worker_init
                )
            results = list(self._pool.map(_analyze, new.values(), repeat(self.config)))
        for k, reports in zip(new, results, strict=True):
            self._put(k, reports)
        self.analysed += len(new)
        return len(new)

    def analyse(self, code: str) -> list[StructuralReport] | None:
        """The reports of `code` (from the cache, else analysed inline); None: it failed."""
        k = _key(code)
        if k not in self._cache:
            self._put(k, _analyze(code, self.config))
            self.analysed += 1
        self._cache.move_to_end(k)
        return self._cache[k]

    def __call__(self, code: str) -> list[StructuralReport]:
        return self.analyse(code) or []

    def _put(self, k: str, reports: list[StructuralReport] | None) -> None:
        self._cache[k] = reports
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)

    def close(self) -> None:
        """Stop the pool (a later prefetch starts a new one)."""
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None

    def __getstate__(self):  # the pool is not picklable; a copy starts without it
        return {**self.__dict__, "_pool": None}
