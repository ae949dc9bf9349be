"""Structural analysis of CUDA kernels: static (tree-sitter, ptxas) and dynamic (Nsight Compute).

    from cudaperf.analyze import analyze, AnalyzeConfig
    for report in analyze(open("k.cu").read(), config=AnalyzeConfig(arch="sm_90")):
        print(report.name, report.score, report.features["coalesced_fraction"])

See report.py for the feature names, units and the score formula, rules.py for the rules.
"""

from cudaperf.analyze.api import NoKernelsError, analyze
from cudaperf.analyze.report import (
    FEATURES,
    PROFILE_FEATURES,
    RULES,
    AnalyzeConfig,
    Finding,
    ScoreWeights,
    Severity,
    StructuralReport,
    score_features,
)
from cudaperf.analyze.resources import ARCHS, occupancy

__all__ = [
    "ARCHS",
    "FEATURES",
    "PROFILE_FEATURES",
    "RULES",
    "AnalyzeConfig",
    "Finding",
    "NoKernelsError",
    "ScoreWeights",
    "Severity",
    "StructuralReport",
    "analyze",
    "occupancy",
    "score_features",
]
