"""Implementation features for the ranker: analyzer features aggregated over kernels + code stats.

`code_features(code)` returns a flat dict of named floats (NaN = unknown):

- `k.count`: number of `__global__` kernels the analyzer found (0 when analysis failed);
- `k.<feature>.mean|min|max` for every numeric analyzer feature in `FEATURES`, and
  `k.score.mean|min`: the analyzer's structural score;
- `c.<stat>`: code statistics read from the text (log1p of counts, log of the length).

Static only: nothing runs on a GPU. Results are cached per (code hash, analyzer config), since
one analysis costs ~10 ms plus an nvcc/ptxas call (~0.4 s) when `resources` is on.
`features_many` computes many at once in a process pool and keeps them in an on-disk cache
(`FeatureCache`: one JSONL file per analyzer config and feature-code fingerprint). A caller that
has analysed the code already (the reward scorer, with ptxas) hands its reports on through
`features_from_analysis`, so the code is not analysed a second time.

Adding a feature: a regex count goes into `_PATTERNS`, any other text statistic into
`_FUNCTIONS` (name → function of the code returning a float); a new analyzer feature in
`cudaperf.analyze.FEATURES` is picked up as `k.<name>.mean|min|max`. Models store the names
they were trained on, so older weights keep working; the disk cache key changes by itself.
Guaranteed: the same code and config always give the same dict with the same keys in the same
order. Not guaranteed: that every value is known (ptxas off or failing leaves NaNs).
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import json
import logging
import math
import re
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from cudaperf.analyze import (
    FEATURES,
    AnalyzeConfig,
    NoKernelsError,
    StructuralReport,
    analyze,
    reports_for_config,
)
from cudaperf.jsonl import append_lines
from cudaperf.procpool import pool_map

__all__ = [
    "FEATURE_NAMES",
    "FeatureCache",
    "analyzer_score",
    "clear_cache",
    "code_features",
    "code_stats",
    "features_from_analysis",
    "features_many",
    "features_of_reports",
    "visible_code",
]

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


def _max_brace_depth(code: str) -> float:
    depth = best = 0
    for ch in code:
        if ch == "{":
            depth += 1
            best = max(best, depth)
        elif ch == "}":
            depth = max(0, depth - 1)
    return float(best)


# Code statistic → function of the code (a float). Length is logged: ratios matter, not sizes.
_FUNCTIONS: dict[str, Callable[[str], float]] = {
    "log_chars": lambda c: math.log(max(1, len(c))),
    "log_lines": lambda c: math.log(max(1, c.count("\n") + 1)),
    "brace_depth": _max_brace_depth,  # nesting (loops in loops in kernels)
}
CODE_STATS = (*_FUNCTIONS, *_PATTERNS)

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


_C_TOKENS = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


def _c_token(m: re.Match) -> str:
    t = m.group(0)
    if t.startswith("//"):
        return ""
    if t.startswith("/*"):
        return "\n" * t.count("\n")
    return t[0] + "x" * (len(t) - 2) + t[-1]  # a literal keeps its length, not its words


def _python_comments_removed(code: str) -> str | None:
    """A Python file without its `#` comments (None when it is not Python)."""
    import io
    import tokenize

    try:
        ast.parse(code)
        toks = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (SyntaxError, tokenize.TokenError, ValueError):
        return None
    lines = code.split("\n")
    for t in reversed([t for t in toks if t.type == tokenize.COMMENT]):
        (row, col), (_, end) = t.start, t.end
        lines[row - 1] = lines[row - 1][:col] + lines[row - 1][end:]
    return "\n".join(lines)


def visible_code(code: str) -> str:
    """What the code statistics read: comments removed (lines that held only a comment
    dropped) and, in CUDA/C text, string and character literals masked to the same length.
    In a Python candidate only `#` comments go (its CUDA lives in string literals). Text
    without comments or literals comes back unchanged."""
    stripped = _python_comments_removed(code)  # CUDA text never parses as Python
    if stripped is None:
        stripped = _C_TOKENS.sub(_c_token, code)
    if stripped == code:
        return code
    old, new = code.split("\n"), stripped.split("\n")
    kept = [n if n == o else n.rstrip() for o, n in zip(old, new, strict=True)]
    return "\n".join(n for o, n in zip(old, kept, strict=True) if n.strip() or not o.strip())


def code_stats(code: str) -> dict[str, float]:
    """Text statistics of a candidate (log length, log1p of pattern counts), read from
    `visible_code(code)`: comments and string literals never reach them."""
    code = visible_code(code)
    out = {name: float(fn(code)) for name, fn in _FUNCTIONS.items()}
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
    """The feature dict of one implementation or candidate (keys: FEATURE_NAMES, in order).
    Cached per (code, config) in this process, so a task's implementations are analysed once
    however many candidates are ranked against them."""
    cfg = config or AnalyzeConfig()
    key = (hashlib.sha256(code.encode()).hexdigest(), cfg.model_dump_json())
    hit = _CACHE.get(key)
    if hit is not None:
        _CACHE.move_to_end(key)
        return dict(hit)
    return _remember(key, code, _reports(code, cfg))


def features_of_reports(
    code: str, reports: Sequence[StructuralReport], config: AnalyzeConfig
) -> dict[str, float]:
    """`code_features(code, config)` from reports someone already computed: they must be
    `analyze(code, config=config)`'s (`[]` when it found no kernel or failed). The result is
    cached, so a later `code_features` call on the same code does not analyse it again."""
    key = (hashlib.sha256(code.encode()).hexdigest(), config.model_dump_json())
    return _remember(key, code, list(reports))


def features_from_analysis(
    code: str,
    reports: Sequence[StructuralReport],
    analysed_with: AnalyzeConfig,
    config: AnalyzeConfig,
) -> dict[str, float] | None:
    """`code_features(code, config)` read from an analysis someone already ran: `reports` are
    `analyze(code, config=analysed_with)`'s (`[]` when it found no kernel; a failed analysis
    must not be passed). Byte-identical to `code_features`, and cached like it, when `config`'s
    reports can be read from these (`analyze.reports_for_config`: the same config, or the same
    with ptxas off, as the packaged ranker's features are); None otherwise, and nothing cached,
    so `code_features` analyses the code itself."""
    mine = reports_for_config(reports, analysed_with, config)
    return None if mine is None else features_of_reports(code, mine, config)


def _remember(key: tuple[str, str], code: str, reports: list[StructuralReport]) -> dict:
    feats = _aggregate(reports)
    feats.update({f"c.{k}": v for k, v in code_stats(code).items()})
    feats = {n: feats[n] for n in FEATURE_NAMES}
    _CACHE[key] = feats
    while len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return dict(feats)


def _fingerprint() -> str:
    """Hash of the feature names and of the analyzer's and this module's source code."""
    import cudaperf.analyze as pkg

    h = hashlib.sha256(json.dumps(FEATURE_NAMES).encode())
    files = sorted(Path(pkg.__file__).parent.glob("*.py")) + [Path(__file__)]
    for f in files:
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def _code_key(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()


class FeatureCache:
    """Feature dicts on disk: `<dir>/features-<config+code fingerprint>.jsonl`, keyed by code hash.

    Appends only; a stale analyzer or feature set writes a new file instead of reusing old rows.
    Not safe for two processes writing the same file at once (features_many writes from the
    parent only).
    """

    def __init__(self, directory: str | Path, config: AnalyzeConfig) -> None:
        tag = hashlib.sha256((config.model_dump_json() + _fingerprint()).encode()).hexdigest()
        self.path = Path(directory) / f"features-{tag[:16]}.jsonl"
        self.rows: dict[str, dict[str, float]] = {}
        if self.path.is_file():
            for line in self.path.read_text().splitlines():
                try:
                    doc = json.loads(line)
                    self.rows[doc["sha256"]] = doc["features"]
                except (ValueError, KeyError, TypeError):
                    continue  # a torn last line after a crash

    def get(self, code: str) -> dict[str, float] | None:
        hit = self.rows.get(_code_key(code))
        return dict(hit) if hit is not None and list(hit) == list(FEATURE_NAMES) else None

    def put_many(self, items: Iterable[tuple[str, dict[str, float]]]) -> None:
        lines = []
        for code, feats in items:
            key = _code_key(code)
            self.rows[key] = feats
            lines.append(json.dumps({"sha256": key, "features": feats}))
        if lines:
            append_lines(self.path, lines, shared=True)  # processes may share the cache


def _worker(args: tuple[str, AnalyzeConfig]) -> dict[str, float]:
    return code_features(*args)


def features_many(
    codes: list[str],
    config: AnalyzeConfig | None = None,
    workers: int = 1,
    cache_dir: str | Path | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[dict[str, float]]:
    """`code_features` of every code, in order: from the disk cache, else in `workers` processes.

    `progress(done, total)` is called as results arrive (unique uncached codes only).
    """
    cfg = config or AnalyzeConfig()
    disk = FeatureCache(cache_dir, cfg) if cache_dir is not None else None
    known: dict[str, dict[str, float]] = {}
    todo: list[str] = []
    for c in dict.fromkeys(codes):
        hit = disk.get(c) if disk is not None else None
        if hit is not None:
            known[c] = hit
        else:
            todo.append(c)
    if todo:
        log.info("computing features of %d implementations (%d workers)", len(todo), workers)
    done: list[tuple[str, dict[str, float]]] = []
    if workers > 1 and len(todo) > 1:
        # closing: any exception here (Ctrl-C, a failing progress callback) stops the workers
        with contextlib.closing(pool_map(_worker, [(c, cfg) for c in todo], workers, 8)) as res:
            for c, f in zip(todo, res, strict=True):
                done.append((c, f))
                if progress:
                    progress(len(done), len(todo))
                if disk is not None and len(done) % 256 == 0:
                    disk.put_many(done[-256:])
        if disk is not None and len(done) % 256:
            disk.put_many(done[-(len(done) % 256) :])
    else:
        for c in todo:
            done.append((c, code_features(c, cfg)))
            if progress:
                progress(len(done), len(todo))
        if disk is not None:
            disk.put_many(done)
    known.update(done)
    return [dict(known[c]) for c in codes]
