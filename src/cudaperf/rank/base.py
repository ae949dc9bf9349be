"""`FeatureRanker`: what every feature ranker shares (`BTModel`, `LambdaRankModel`,
`EnsembleModel`): strengths per code and config from analyzer features, pair probabilities and
saving. The formats that read a saved ranker back are `cudaperf.rank.formats`.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

__all__ = ["FeatureRanker", "sigmoid"]


def sigmoid(x):
    """The logistic function, stable for large |x|."""
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(x, dtype=float)))


class FeatureRanker:
    """What every feature ranker shares (`BTModel`, `LambdaRankModel`, `EnsembleModel`): a
    subclass provides `utility(rows)` (strengths whose differences are BT logits), the
    `analyzer` settings and `to_json()`."""

    analyzer: dict
    _json_indent: int | None = None  # of the saved file

    def analyze_config(self):
        """The `AnalyzeConfig` the model's features were computed with."""
        from cudaperf.analyze import AnalyzeConfig

        return AnalyzeConfig(**self.analyzer) if self.analyzer else AnalyzeConfig()

    @property
    def config_aware(self) -> bool:
        """Whether some column depends on the config (then strengths differ per config)."""
        from cudaperf.rank.config_features import needs_config

        return any(needs_config(n) for n in self.names)

    def config_strengths(self, task, codes: list[str]) -> np.ndarray:
        """Strengths per (config of `task`, code): shape (configs, codes); one row, config-free,
        for a model without config columns."""
        from cudaperf.rank.config_features import row
        from cudaperf.rank.features import code_features

        cfg = self.analyze_config()
        feats = [code_features(c, cfg) for c in codes]
        if not self.config_aware or not codes:
            return self.utility(feats).reshape(1, len(codes))
        rows = [
            row(f, task, c, code)
            for c in task.configs
            for f, code in zip(feats, codes, strict=True)
        ]
        return self.utility(rows).reshape(len(task.configs), len(codes))

    def strengths(self, task, codes: list[str]) -> np.ndarray:
        """The common ranker interface: strength per code of `task` (higher = faster); a
        config-aware model's mean strength over the task's configs."""
        return self.config_strengths(task, codes).mean(axis=0)

    def prob(self, a: dict[str, float], b: dict[str, float]) -> float:
        """P(a is faster than b)."""
        u = self.utility([a, b])
        return float(sigmoid(u[0] - u[1]))

    def save(self, path: str | Path) -> Path:
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(self.to_json(), indent=self._json_indent) + "\n")
        return p
