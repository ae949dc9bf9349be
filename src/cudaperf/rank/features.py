"""Implementation features for the ranker: analyzer features aggregated over kernels + code stats.

`code_features(code)` returns a flat dict of named floats (NaN = unknown):

- `k.count`: number of `__global__` kernels the analyzer found (0 when analysis failed);
- `k.<feature>.mean|min|max` for every numeric analyzer feature in `FEATURES`, and
  `k.score.mean|min`: the analyzer's structural score;
- `c.<stat>`: code statistics read from the text (log1p of counts, log of the length).

Static only: nothing runs on a GPU. Results are cached per (code hash, analyzer config), since
one analysis costs ~10 ms plus an nvcc/ptxas call when `resources` is on.
Guaranteed: the same code and config always give the same dict with the same keys in the same
order. Not guaranteed: that every value is known (ptxas off or failing leaves NaNs).
"""

from __future__ import annotations

import hashlib
import logging
import math
import re
from collections import OrderedDict

from cudaperf.analyze import FEATURES, AnalyzeConfig, NoKernelsError, StructuralReport, analyze

__all__ = ["FEATURE_NAMES", "analyzer_score", "clear_cache", "code_features", "code_stats"]

log = logging.getLogger(__name__)

_AGGS = ("mean", "min", "max")

# Code statistic → regex whose matches are counted (reported as log1p(count)). Each is a cheap
# text signal that the analyzer does not already count per kernel, or counts only inside kernels.
_PATTERNS: dict[str, str] = {
    "loops": r"\b(?:for|while)\s*\(",
    "unroll_pragmas": r"#\s*pragma\s+unroll",
    "shared_decls": r"__shared__",
    "syncthreads": r"__syncthreads\w*\s*\(",
    "shuffles": r"__shfl\w*_sync\s*\(",
    "atomics": r"\batomic\w+\s*\(",
    "vector_types": r"\b(?:float|int|double|uint|half)[24]\b|__half2\b",
    "restrict": r"__restrict__",
    "ldg": r"__ldg\s*\(",
    "launches": r"<<<",
    "grid_stride": r"gridDim\.[xyz]\s*\*\s*blockDim|blockDim\.[xyz]\s*\*\s*gridDim",
    "templates": r"\btemplate\s*<",
    "device_functions": r"__device__",
    "fma_intrinsics": r"\b__?f?fmaf?\w*\s*\(|__expf|__fdividef|rsqrtf",
    "branches": r"\bif\s*\(",
}
_COMPILED = {k: re.compile(v) for k, v in _PATTERNS.items()}
CODE_STATS = ("log_chars", "log_lines", *_PATTERNS)

# Analyzer features used, in FEATURES order (all of them are numeric).
_KERNEL_FEATURES = tuple(FEATURES)
FEATURE_NAMES: tuple[str, ...] = (
    "k.count",
    "k.score.mean",
    "k.score.min",
    *(f"k.{f}.{a}" for f in _KERNEL_FEATURES for a in _AGGS),
    *(f"c.{s}" for s in CODE_STATS),
)

_CACHE: OrderedDict[tuple[str, str], dict[str, float]] = OrderedDict()
_CACHE_SIZE = 65536


def clear_cache() -> None:
    """Forget every cached feature dict (tests; a changed analyzer)."""
    _CACHE.clear()


def code_stats(code: str) -> dict[str, float]:
    """Text statistics of a candidate (log length, log1p of pattern counts)."""
    out = {
        "log_chars": math.log(max(1, len(code))),
        "log_lines": math.log(max(1, code.count("\n") + 1)),
    }
    for name, rx in _COMPILED.items():
        out[name] = math.log1p(len(rx.findall(code)))
    return out


def _reports(code: str, config: AnalyzeConfig) -> list[StructuralReport]:
    try:
        return analyze(code, config=config)
    except NoKernelsError:
        return []
    except Exception:  # noqa: BLE001 - an analyzer bug must not stop training or scoring
        log.warning("structural analysis failed; analyzer features are unknown", exc_info=True)
        return []


def analyzer_score(reports: list[StructuralReport]) -> float:
    """The analyzer's score for a whole implementation: mean over kernels (NaN without one)."""
    return sum(r.score for r in reports) / len(reports) if reports else math.nan


def _aggregate(reports: list[StructuralReport]) -> dict[str, float]:
    out: dict[str, float] = {"k.count": float(len(reports))}
    scores = [r.score for r in reports]
    out["k.score.mean"] = analyzer_score(reports)
    out["k.score.min"] = min(scores) if scores else math.nan
    for f in _KERNEL_FEATURES:
        vals = [float(v) for r in reports if (v := r.features.get(f)) is not None]
        if vals:
            out[f"k.{f}.mean"] = sum(vals) / len(vals)
            out[f"k.{f}.min"] = min(vals)
            out[f"k.{f}.max"] = max(vals)
        else:
            out.update({f"k.{f}.{a}": math.nan for a in _AGGS})
    return out


def code_features(code: str, config: AnalyzeConfig | None = None) -> dict[str, float]:
    """The feature dict of one implementation or candidate (keys: FEATURE_NAMES, in order)."""
    cfg = config or AnalyzeConfig()
    key = (hashlib.sha256(code.encode()).hexdigest(), cfg.model_dump_json())
    hit = _CACHE.get(key)
    if hit is not None:
        _CACHE.move_to_end(key)
        return dict(hit)
    feats = _aggregate(_reports(code, cfg))
    feats.update({f"c.{k}": v for k, v in code_stats(code).items()})
    feats = {n: feats[n] for n in FEATURE_NAMES}
    _CACHE[key] = feats
    while len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return dict(feats)
