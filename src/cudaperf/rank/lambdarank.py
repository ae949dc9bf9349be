"""LightGBM LambdaRank feature ranker: gradient-boosted trees scoring each implementation.

Trained on groups of implementations of one task timed on one config (label = speed rank in
the group, 0 = slowest), with the analyzer features and code statistics the Bradley–Terry
model reads (raw values; LightGBM handles unknown values itself). The ranking score u(x) is
made into a Bradley–Terry strength by one calibration factor k, fitted on the training pairs
by logistic regression: P(a faster than b) = sigmoid(k · (u(a) - u(b))). So it plugs into
everything that takes a `PairwiseRanker` (`score`, `evaluate`, the reward).

Why trees: the features act together (a coalesced access matters when the kernel is memory
bound; shared-memory staging pays off when data is reused) and their effects saturate, which
a linear model on feature differences cannot express. On the measured dataset's held-out
families it orders more pairs correctly than the Bradley–Terry model (`bench/rank_eval.py`).

Saved as JSON (format tag, feature names, the booster as LightGBM's own text format, k, the
analyzer settings, the training description). Deterministic: `deterministic=True`, one thread
count, fixed seed. Needs the `lightgbm` package (a core dependency).
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import asdict, dataclass, field

import numpy as np

from cudaperf.rank.base import FeatureRanker
from cudaperf.rank.bt import fit_bt

__all__ = [
    "FORMAT",
    "FORMAT_V1",
    "LambdaRankModel",
    "default_params",
    "fit_lambdarank",
    "require_lightgbm",
]

# v2: may read config columns (rank.config_features)
FORMAT = "cudaperf-feature-ranker-lambdarank-v2"
FORMAT_V1 = "cudaperf-feature-ranker-lambdarank-v1"  # config-free, written before v2; still read


def require_lightgbm() -> None:
    """Raise ImportError, saying how to fix it, when lightgbm cannot be imported (so a model
    fails when it is loaded, not at its first score inside a reward)."""
    try:
        import lightgbm  # noqa: F401
    except ImportError as e:
        raise ImportError(
            f"this ranker needs lightgbm ({e}); install it with `pip install lightgbm`, or "
            "train one without it: `cudaperf rank train --objective bt`"
        ) from None


def default_params(threads: int = 1) -> dict:
    """LightGBM settings: small trees with large leaves, because families differ. Chosen by
    leave-family-out cross-validation on the training families only (`bench/rank_cv.py`, on
    the config-aware columns: 7 leaves of >= 500 rows, 200 rounds, CV 0.873 against 0.861 for
    the earlier 15 / 100 / 300), never on the held-out ones."""
    return {
        "objective": "lambdarank",
        "learning_rate": 0.05,
        "num_leaves": 7,
        "min_data_in_leaf": 500,
        "num_iterations": 200,
        "lambdarank_truncation_level": 10,
        "deterministic": True,
        "force_row_wise": True,
        "num_threads": threads,
        "seed": 0,
        "verbose": -1,
    }


@dataclass(frozen=True)
class LambdaRankModel(FeatureRanker):
    """A trained LambdaRank feature ranker."""

    names: list[str]  # feature names, in the booster's column order
    booster: str  # LightGBM model, its text format
    scale: float  # calibration k: strength = k · score
    params: dict = field(default_factory=dict)  # the LightGBM parameters it was trained with
    analyzer: dict = field(default_factory=dict)  # AnalyzeConfig fields the features used
    training: dict = field(default_factory=dict)  # what it was trained on
    format: str = FORMAT

    @property
    def id(self) -> str:
        """A short content hash: 'feature-lambdarank-<12 hex>'."""
        blob = json.dumps([self.names, self.booster, self.scale], sort_keys=True)
        return "feature-lambdarank-" + hashlib.sha256(blob.encode()).hexdigest()[:12]

    @functools.cached_property
    def _booster(self):
        import lightgbm as lgb

        return lgb.Booster(model_str=self.booster)

    def matrix(self, rows: list[dict[str, float]]) -> np.ndarray:
        """Raw feature matrix, one row per feature dict (unknown = NaN)."""
        from cudaperf.rank.config_features import matrix

        return matrix(rows, self.names)

    def utility(self, rows: list[dict[str, float]]) -> np.ndarray:
        """Calibrated strength per row: higher = predicted faster; differences are BT logits."""
        if not rows:
            return np.zeros(0)
        return self.scale * np.asarray(self._booster.predict(self.matrix(rows)), dtype=float)

    def weights_table(self) -> list[dict]:
        """Features by total gain in the trees, largest first (what the ranker relies on);
        `coef` is the gain share, so the table reads like the BT model's."""
        gain = np.asarray(self._booster.feature_importance("gain"), dtype=float)
        total = float(gain.sum()) or 1.0
        rows = [
            {"feature": n, "coef": float(g / total), "gain": float(g)}
            for n, g in zip(self.names, gain, strict=True)
        ]
        return sorted(rows, key=lambda r: -r["coef"])

    def to_json(self) -> dict:
        return asdict(self)


def fit_lambdarank(
    groups: list[list[tuple[dict[str, float], float]]],
    pairs: list[tuple[dict[str, float], dict[str, float], bool]],
    names: list[str],
    params: dict | None = None,
) -> tuple[str, float, dict]:
    """(booster text, calibration k, params) from ranking groups and calibration pairs.

    groups: per (task, config), the implementations' (features, median time); label = rank by
    speed (0 = slowest). pairs: (features a, features b, a faster) for the calibration factor.
    """
    import lightgbm as lgb

    from cudaperf.rank.config_features import matrix

    prm = {**default_params(), **(params or {})}
    rounds = int(prm.pop("num_iterations"))
    rows, y, sizes = [], [], []
    for g in groups:
        order = sorted(g, key=lambda r: -r[1])  # slowest first
        for rank, (feats, _) in enumerate(order):
            rows.append(feats)
            y.append(rank)
        sizes.append(len(order))
    if not sizes:
        raise ValueError("no ranking groups: need tasks with >= 2 measured implementations")
    if "min_data_in_leaf" not in (params or {}):  # small task sets: leaves of 2% of the rows
        prm["min_data_in_leaf"] = max(1, min(prm["min_data_in_leaf"], len(y) // 50))
    prm.setdefault("min_data_in_bin", 1)
    data = lgb.Dataset(
        matrix(rows, names),
        np.array(y, dtype=float),
        group=sizes,
        feature_name=[_safe(n) for n in names],
        free_raw_data=True,
    )
    booster = lgb.train(prm, data, num_boost_round=rounds)
    text = booster.model_to_string()
    ua = booster.predict(matrix([a for a, _, _ in pairs], names))
    ub = booster.predict(matrix([b for _, b, _ in pairs], names))
    lab = np.array([1.0 if f else 0.0 for _, _, f in pairs])
    k = float(fit_bt((ua - ub).reshape(-1, 1), lab, l2=1e-4)[0])
    return text, k, {**prm, "num_iterations": rounds}


def _safe(name: str) -> str:
    """LightGBM feature names may not hold JSON special characters."""
    return "".join(c if c.isalnum() or c in "_." else "_" for c in name)
