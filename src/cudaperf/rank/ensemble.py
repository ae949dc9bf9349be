"""The default feature ranker: the mean of the Bradley–Terry and the LambdaRank strengths.

Both members read the same analyzer features and are calibrated to Bradley–Terry logits
(P(a faster than b) = sigmoid(s(a) - s(b))), so their strengths average to a strength on the
same scale. Why two: they err on different families (the linear model generalises where the
relation is monotone, the trees where features interact), and in leave-family-out
cross-validation on the training families the mean ordered more pairs correctly than either
member (`bench/rank_cv.py`). Saved as one JSON document holding both members.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

import numpy as np

from cudaperf.rank.base import FeatureRanker

__all__ = ["FORMAT", "FORMAT_V1", "EnsembleModel", "from_json"]

FORMAT = "cudaperf-feature-ranker-ensemble-v2"  # v2: members may be config-aware
FORMAT_V1 = "cudaperf-feature-ranker-ensemble-v1"  # written before v2; still read


@dataclass(frozen=True)
class EnsembleModel(FeatureRanker):
    """Feature rankers whose strengths are averaged (all computed from the same features)."""

    members: tuple  # BTModel / LambdaRankModel instances
    analyzer: dict = field(default_factory=dict)  # AnalyzeConfig fields the features used
    training: dict = field(default_factory=dict)  # what it was trained on
    format: str = FORMAT

    @property
    def id(self) -> str:
        """A short content hash: 'feature-ensemble-<12 hex>'."""
        blob = json.dumps([m.id for m in self.members])
        return "feature-ensemble-" + hashlib.sha256(blob.encode()).hexdigest()[:12]

    @property
    def names(self) -> list[str]:
        """Every feature some member reads."""
        return sorted({n for m in self.members for n in m.names})

    def utility(self, rows: list[dict[str, float]]) -> np.ndarray:
        """Mean of the members' strengths: higher = predicted faster; differences are logits."""
        if not rows:
            return np.zeros(0)
        return np.mean([m.utility(rows) for m in self.members], axis=0)

    def weights_table(self) -> list[dict]:
        """Each member's table (largest first), the member's format named in `model`."""
        return [{"model": m.format, **r} for m in self.members for r in m.weights_table()]

    def to_json(self) -> dict:
        return {
            "format": self.format,
            "members": [m.to_json() for m in self.members],
            "analyzer": self.analyzer,
            "training": self.training,
        }


def from_json(doc: dict, member_from_json) -> EnsembleModel:
    """An `EnsembleModel` from `to_json`'s document, each member read by `member_from_json`
    (`cudaperf.rank.formats.model_from_json`); ValueError when malformed."""

    members = doc.get("members")
    if not isinstance(members, list) or not members:
        raise ValueError("an ensemble needs a non-empty 'members' list")
    return EnsembleModel(
        members=tuple(member_from_json(m) for m in members),
        analyzer=doc.get("analyzer") or {},
        training=doc.get("training") or {},
        format=doc.get("format") or FORMAT,
    )
