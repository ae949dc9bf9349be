"""Offline pairwise ranker: which of two implementations of a task is faster (issue 8).

    from cudaperf.rank import train_feature_ranker, evaluate, score, load_model
    model = train_feature_ranker(measured_tasks, splits)   # BT + LambdaRank on static features
    print(evaluate(measured_tasks, model, splits))          # held-out families
    rs = score(task, candidate_code, model)                 # RankScore in [0, 1]

Modules: `pairs` (measured pairs, family splits), `features` (analyzer + code statistics,
cached per code hash), `config_features` (per-config input size and launch features: the
models are config-aware, so the predicted order may change between small and large configs),
`ensemble` (the default feature model: the mean of `lambdarank`, LightGBM LambdaRank
calibrated, and `bt`), `bt` (the Bradley–Terry model, feature-ranker JSON files,
`load_default`),
`ranker` (train, score, `load_ranker`, the `PairwiseRanker` interface), `neural` (LoRA
transformer ranker), `metrics` (accuracy, Kendall tau, top-1, baselines, calibration
plot), `types` (`RankScore`).
Names are imported lazily so that `cudaperf.rank.types` stays cheap for the reward.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "RankScore": "types",
    "Pair": "pairs",
    "build_pairs": "pairs",
    "read_splits": "pairs",
    "code_features": "features",
    "features_many": "features",
    "NeuralConfig": "neural",
    "NeuralRanker": "neural",
    "train_neural_ranker": "neural",
    "PairwiseRanker": "ranker",
    "load_ranker": "ranker",
    "score_many": "ranker",
    "provenance": "ranker",
    "strength_table": "metrics",
    "BTModel": "bt",
    "LambdaRankModel": "lambdarank",
    "EnsembleModel": "ensemble",
    "ModelNotTrainedError": "formats",
    "fit_bt": "bt",
    "load_default": "formats",
    "load_model": "formats",
    "NoPairsError": "ranker",
    "TrainConfig": "ranker",
    "make_ranker": "ranker",
    "score": "ranker",
    "train_feature_ranker": "ranker",
    "calibration_plot": "metrics",
    "evaluate": "metrics",
    "kendall_tau": "metrics",
    "top1_accuracy": "metrics",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"cudaperf.rank.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'cudaperf.rank' has no attribute {name!r}")
