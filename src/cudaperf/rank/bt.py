"""Bradley–Terry model: P(a faster than b) = sigmoid(w · (z(a) - z(b))), z = standardised features.

Fitted by Newton's method on the L2-regularised mean logistic loss of feature differences (no
intercept: swapping a and b flips the probability exactly). numpy only; deterministic — the
same pairs give bit-identical weights.

Config-aware (format v2): the columns may include the config features of `rank.configs`
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
from importlib import resources
from pathlib import Path

import numpy as np

__all__ = [
    "DEFAULT_WEIGHTS",
    "BTModel",
    "default_weights_path",
    "ModelNotTrainedError",
    "fit_bt",
    "load_default",
    "load_model",
    "model_from_json",
]

FORMAT = "cudaperf-feature-ranker-v2"
FORMAT_V1 = "cudaperf-feature-ranker-v1"  # config-free models written before v2; still read
DEFAULT_WEIGHTS = "weights/feature_ranker.json"  # inside the cudaperf.rank package


class ModelNotTrainedError(FileNotFoundError):
    """No trained ranker weights are available."""


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
        from cudaperf.rank.configs import needs_config

        return any(needs_config(n) for n in self.names)

    def config_strengths(self, task, codes: list[str]) -> np.ndarray:
        """Strengths per (config of `task`, code): shape (configs, codes); one row, config-free,
        for a model without config columns."""
        from cudaperf.rank.configs import row
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
        return float(_sigmoid(u[0] - u[1]))

    def save(self, path: str | Path) -> Path:
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(self.to_json(), indent=self._json_indent) + "\n")
        return p


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
        from cudaperf.rank.configs import matrix

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


def _sigmoid(x):
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(x, dtype=float)))


def standardise(rows: list[dict[str, float]], names: list[str]) -> tuple[list, list, list]:
    """(names kept, means, stds): features constant or unknown on `rows` are dropped."""
    from cudaperf.rank.configs import matrix

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
    if l2 <= 0:
        raise ValueError(f"l2 must be > 0 (it keeps the fit unique), got {l2}")
    w = np.ones(len(t)) if weights is None else np.asarray(weights, dtype=float)
    w = w / w.sum()
    beta = np.zeros(d.shape[1])
    eye = np.eye(d.shape[1])
    for _ in range(max_iter):
        p = _sigmoid(d @ beta)
        grad = d.T @ (w * (p - t)) + l2 * beta
        hess = (d * (w * p * (1 - p))[:, None]).T @ d + l2 * eye
        step = np.linalg.solve(hess, grad)
        beta = beta - step
        if float(np.max(np.abs(step))) < tol:
            break
    return beta


def load_model(path: str | Path):
    """Read a feature ranker JSON written by the `save` of `BTModel`, `LambdaRankModel` or
    `EnsembleModel` (raises ValueError on a bad file)."""
    p = Path(path)
    try:
        doc = json.loads(p.read_text())
    except FileNotFoundError:
        raise ModelNotTrainedError(
            f"{p}: no such ranker model; train one with `cudaperf rank train --out DIR`"
        ) from None
    except (OSError, ValueError) as e:
        raise ValueError(f"{p}: cannot read the ranker model ({e})") from None
    try:
        return model_from_json(doc)
    except ValueError as e:
        raise ValueError(f"{p}: {e}") from None


def model_from_json(doc) -> object:
    """A feature ranker from its JSON document, by its `format` tag (ValueError otherwise)."""
    from cudaperf.rank import ensemble, lambdarank

    fmt = doc.get("format") if isinstance(doc, dict) else None
    try:
        if fmt in (ensemble.FORMAT, lambdarank.FORMAT, ensemble.FORMAT_V1, lambdarank.FORMAT_V1):
            lambdarank.require_lightgbm()
        if fmt in (ensemble.FORMAT, ensemble.FORMAT_V1):
            return ensemble.from_json(doc)
        if fmt in (lambdarank.FORMAT, lambdarank.FORMAT_V1):
            return lambdarank.LambdaRankModel(**{**doc, "format": fmt})
        if fmt in (FORMAT, FORMAT_V1):
            m = BTModel(**doc)
            if not len(m.names) == len(m.means) == len(m.stds) == len(m.coef):
                raise ValueError("names, means, stds and coef must have the same length")
            return m
    except TypeError as e:
        raise ValueError(f"malformed ranker model ({e})") from None
    known = ", ".join(repr(f) for f in (ensemble.FORMAT, lambdarank.FORMAT, FORMAT))
    if isinstance(fmt, str) and fmt.startswith("cudaperf-feature-ranker"):
        raise ValueError(
            f"ranker format {fmt!r} is not one this cudaperf reads (it reads {known} and their "
            "v1 forms); upgrade cudaperf or retrain with `cudaperf rank train`"
        )
    raise ValueError(f"not a cudaperf feature ranker (expected format {known})")


def default_weights_path() -> Path:
    """Where the packaged weights live (`cudaperf/rank/weights/feature_ranker.json`)."""
    return Path(str(resources.files("cudaperf.rank") / DEFAULT_WEIGHTS))


def load_default():
    """The packaged weights (written by `cudaperf rank train --ship`).

    Raises ModelNotTrainedError, saying how to train one, while none ship.
    """
    path = default_weights_path()
    if not path.is_file():
        raise ModelNotTrainedError(
            "the feature ranker has not been trained on measured data yet, so no default "
            "weights ship; measure a task set (`cudaperf eval TASKS --implementations --out "
            "r.jsonl`, then `cudaperf tasks attach r.jsonl TASKS --out measured.jsonl`), train "
            "with `cudaperf rank train --tasks measured.jsonl --out DIR` and pass "
            "--model DIR (or add --ship to write src/cudaperf/rank/" + DEFAULT_WEIGHTS + ")"
        )
    return load_model(path)
