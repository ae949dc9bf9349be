"""Bradley–Terry model: P(a faster than b) = sigmoid(w · (z(a) - z(b))), z = standardised features.

Fitted by Newton's method on the L2-regularised mean logistic loss of feature differences (no
intercept: swapping a and b flips the probability exactly). numpy only; deterministic — the
same pairs give bit-identical weights.

Config-aware (format v2): the columns may include the config features of `rank.config_features`
(`s.*`, `l.*`) and products `a*b` of a feature and a config feature, so the strength of an
implementation depends on the config it is timed on; P(a faster than b on config c) =
sigmoid(u(a, c) - u(b, c)) stays exactly antisymmetric (no intercept, same c on both sides).
Saved as a small JSON document: feature names, means, stds, coefficients, the L2 strength, the
analyzer settings the features were computed with, and a description of the training data.
Unknown feature values (NaN) are replaced by the training mean, i.e. contribute nothing.
Format v1 files (config-free models, same fields) still load and score as before.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field

import numpy as np

from cudaperf.rank.base import FeatureRanker, sigmoid

__all__ = ["FORMAT", "FORMAT_V1", "BTModel", "fit_bt", "standardise"]

FORMAT = "cudaperf-feature-ranker-v2"
FORMAT_V1 = "cudaperf-feature-ranker-v1"  # config-free models written before v2; still read


@dataclass(frozen=True)
class BTModel(FeatureRanker):
    """A trained feature ranker."""

    names: list[str]  # feature names (a subset of features.FEATURE_NAMES), in order
    means: list[float]  # training mean per feature (NaN imputation and centring)
    stds: list[float]  # training standard deviation per feature (> 0)
    coef: list[float]  # BT weight per standardised feature
    l2: float = 1e-2  # L2 strength the model was fitted with
    analyzer: dict = field(default_factory=dict)  # AnalyzeConfig fields the features used
    training: dict = field(default_factory=dict)  # what it was trained on (tasks, pairs, ...)
    format: str = FORMAT  # file format tag
    _json_indent = 1

    @property
    def id(self) -> str:
        """A short content hash: 'feature-bt-<12 hex>'."""
        blob = json.dumps([self.names, self.means, self.stds, self.coef], sort_keys=True)
        return "feature-bt-" + hashlib.sha256(blob.encode()).hexdigest()[:12]

    def matrix(self, rows: list[dict[str, float]]) -> np.ndarray:
        """Standardised feature matrix (one row per feature dict; NaN → 0 = the mean)."""
        from cudaperf.rank.config_features import matrix

        z = (matrix(rows, self.names) - np.asarray(self.means)) / np.asarray(self.stds)
        return np.nan_to_num(z, nan=0.0, posinf=0.0, neginf=0.0)

    def utility(self, rows: list[dict[str, float]]) -> np.ndarray:
        """BT strength per row: higher = predicted faster."""
        return self.matrix(rows) @ np.asarray(self.coef, dtype=float)

    def weights_table(self) -> list[dict]:
        """Per-feature coefficients, largest |coef| first (what the ranker relies on).

        `coef` is per standard deviation of the feature; `per_unit` per raw unit.
        """
        rows = [
            {"feature": n, "coef": c, "per_unit": c / s, "mean": m, "std": s}
            for n, c, m, s in zip(self.names, self.coef, self.means, self.stds, strict=True)
        ]
        return sorted(rows, key=lambda r: -abs(r["coef"]))

    def to_json(self) -> dict:
        return asdict(self)


def standardise(rows: list[dict[str, float]], names: list[str]) -> tuple[list, list, list]:
    """(names kept, means, stds): features constant or unknown on `rows` are dropped."""
    from cudaperf.rank.config_features import matrix

    x = matrix(rows, names)
    kept, means, stds = [], [], []
    for j, n in enumerate(names):
        col = x[:, j][np.isfinite(x[:, j])]
        if col.size < 2:
            continue
        sd = float(col.std())
        if sd > 1e-9:
            kept.append(n)
            means.append(float(col.mean()))
            stds.append(sd)
    return kept, means, stds


def fit_bt(
    diffs: np.ndarray,
    y: np.ndarray,
    l2: float = 1e-2,
    weights: np.ndarray | None = None,
    max_iter: int = 100,
    tol: float = 1e-10,
) -> np.ndarray:
    """Coefficients minimising mean_i w_i·logloss(y_i, σ(d_i·β)) + l2/2·|β|² (Newton).

    `diffs`: (n, d) standardised feature differences z(a) - z(b); `y`: 1 when a is faster.
    """
    d = np.asarray(diffs, dtype=float)
    t = np.asarray(y, dtype=float)
    if d.ndim != 2 or d.shape[0] != t.shape[0] or d.shape[0] == 0:
        raise ValueError(f"need (n, d) differences and n labels with n > 0, got {d.shape}")
    if not 0 < l2 < float("inf"):  # a NaN passes `l2 <= 0` and makes every coefficient NaN
        raise ValueError(f"l2 must be a finite number > 0 (it keeps the fit unique), got {l2}")
    w = np.ones(len(t)) if weights is None else np.asarray(weights, dtype=float)
    w = w / w.sum()
    beta = np.zeros(d.shape[1])
    eye = np.eye(d.shape[1])
    for _ in range(max_iter):
        p = sigmoid(d @ beta)
        grad = d.T @ (w * (p - t)) + l2 * beta
        hess = (d * (w * p * (1 - p))[:, None]).T @ d + l2 * eye
        step = np.linalg.solve(hess, grad)
        beta = beta - step
        if float(np.max(np.abs(step))) < tol:
            break
    return beta
