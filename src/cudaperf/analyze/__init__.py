"""Structural analysis of CUDA kernels: static (tree-sitter, ptxas) and dynamic (Nsight Compute).

    from cudaperf.analyze import analyze, AnalyzeConfig
    for report in analyze(open("k.cu").read(), config=AnalyzeConfig(arch="sm_90")):
        print(report.name, report.score, report.features["coalesced_fraction"])

See report.py for the feature names, units and the score formula, rules.py for the rules.
"""

from cudaperf.analyze.resources import ARCHS, occupancy
from cudaperf.analyze.types import (
    FEATURES,
    PROFILE_FEATURES,
    RESOURCE_FEATURES,
    RESOURCE_RULES,
    RULES,
    AnalyzeConfig,
    Finding,
    ScoreWeights,
    Severity,
    StructuralReport,
    reports_for_config,
    score_features,
    without_resources,
)

__all__ = [
    "ARCHS",
    "FEATURES",
    "PROFILE_FEATURES",
    "RESOURCE_FEATURES",
    "RESOURCE_RULES",
    "RULES",
    "AnalyzeConfig",
    "Finding",
    "NoKernelsError",
    "ScoreWeights",
    "Severity",
    "StructuralReport",
    "analyze",
    "occupancy",
    "reports_for_config",
    "score_features",
    "without_resources",
]


def __getattr__(name: str):
    # `analyze` needs the parser and sympy (~0.4 s to import): loaded on first use, so that
    # code needing only the report types (the reward, the CLI) starts fast.
    if name in ("analyze", "NoKernelsError"):
        from cudaperf.analyze import api

        return getattr(api, name)
    raise AttributeError(f"module 'cudaperf.analyze' has no attribute {name!r}")
