"""The scorer's structural analyzers. `StructureAnalyzer`: `cudaperf.analyze.analyze` with one
config, one candidate at a time. `PooledAnalyzer`: the same for a whole batch at once, in a
process pool.

`RewardScorer` calls its analyzer once per candidate, one after another; with ptxas that is
about half a second per kernel, so a bench chunk or GRPO step of dozens of candidates would
wait on it. `prefetch(codes)` analyses the codes not seen before in `workers` processes at once
and keeps them (an LRU of `cache_size` codes); the scorer's later per-candidate calls are then
cache hits. `RewardScorer` prefetches a batch's candidates once the evaluator has returned
(not during: nvcc and the serial C reference's timing have the CPUs then), and the GRPO
rollout a turn's before scoring it. A code that was not prefetched is analysed inline, exactly
as `StructureAnalyzer` does (a failing analysis gives `[]`, never an error). Like
`StructureAnalyzer` it has a `config` and an `analyse` that tells "no kernel" (`[]`) from a
failed analysis (None), so the scorer hands its reports to the ranker and a candidate is
analysed once on its way to a reward.
Every command's scorer (`reward.scorer.build_scorer`) uses one.
"""

from __future__ import annotations

import hashlib
import logging
import multiprocessing
import os
from collections import OrderedDict
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from itertools import repeat

from cudaperf.analyze.types import AnalyzeConfig, StructuralReport
from cudaperf.procpool import worker_init

log = logging.getLogger(__name__)

__all__ = ["PooledAnalyzer", "StructureAnalyzer"]


class StructureAnalyzer:
    """The default `Analyzer`: `cudaperf.analyze.analyze` with one `AnalyzeConfig` (`config`,
    which `RewardScorer` compares with the ranker's). Calling it gives `[]` when there is no
    kernel or the analysis fails; `analyse` tells the two apart."""

    def __init__(self, config=None) -> None:
        self.config = config or AnalyzeConfig()

    def analyse(self, code: str) -> list[StructuralReport] | None:
        """`analyze(code, config=self.config)`: `[]` when the code has no kernel, None (with a
        warning in the log) when the analysis failed."""
        from cudaperf.analyze import NoKernelsError, analyze

        try:
            return analyze(code, config=self.config)
        except NoKernelsError:
            return []
        except Exception:  # noqa: BLE001 - a broken analysis must not cost the candidate
            log.warning("structural analysis failed", exc_info=True)
            return None

    def __call__(self, code: str) -> list[StructuralReport]:
        return self.analyse(code) or []


def _analyze(code: str, config: AnalyzeConfig) -> list[StructuralReport] | None:
    """The default analyzer's `analyse` with `config`: reports, `[]` (no kernel) or None (it
    failed)."""
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
            try:
                results = list(self._pool.map(_analyze, new.values(), repeat(self.config)))
            except BrokenProcessPool:  # a worker died (killed, out of memory): the batch's
                log.warning(  # codes are analysed inline when asked for, as before the pool
                    "analysis pool broke; %d code(s) left to inline analysis", len(new)
                )
                self.close()  # a later prefetch starts a new pool
                return 0
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
