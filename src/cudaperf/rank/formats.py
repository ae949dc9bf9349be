"""Saved feature rankers: read one back by its `format` tag, and the packaged default weights.

The one place that knows every format (`BTModel`, `LambdaRankModel`, `EnsembleModel` and their
v1 forms), so the model modules need not know each other.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

from cudaperf.rank import bt, ensemble, lambdarank

__all__ = [
    "DEFAULT_WEIGHTS",
    "ModelNotTrainedError",
    "default_weights_path",
    "load_default",
    "load_model",
    "model_from_json",
]

DEFAULT_WEIGHTS = "weights/feature_ranker.json"  # inside the cudaperf.rank package


class ModelNotTrainedError(FileNotFoundError):
    """No trained ranker weights are available."""


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
    fmt = doc.get("format") if isinstance(doc, dict) else None
    try:
        if fmt in (ensemble.FORMAT, lambdarank.FORMAT, ensemble.FORMAT_V1, lambdarank.FORMAT_V1):
            lambdarank.require_lightgbm()
        if fmt in (ensemble.FORMAT, ensemble.FORMAT_V1):
            return ensemble.from_json(doc, model_from_json)
        if fmt in (lambdarank.FORMAT, lambdarank.FORMAT_V1):
            return lambdarank.LambdaRankModel(**{**doc, "format": fmt})
        if fmt in (bt.FORMAT, bt.FORMAT_V1):
            m = bt.BTModel(**doc)
            if not len(m.names) == len(m.means) == len(m.stds) == len(m.coef):
                raise ValueError("names, means, stds and coef must have the same length")
            return m
    except TypeError as e:
        raise ValueError(f"malformed ranker model ({e})") from None
    known = ", ".join(repr(f) for f in (ensemble.FORMAT, lambdarank.FORMAT, bt.FORMAT))
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
