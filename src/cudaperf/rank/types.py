"""`RankScore`: what the pairwise ranker says about one candidate (the contract of issue 8).

The ranker compares a candidate with the task's known implementations and predicts, for each,
the probability that the candidate is faster. `score` is the mean of those probabilities.
Guaranteed: `score` in [0, 1], `compared >= 0`. Not guaranteed: calibration — a score is an
opinion learned offline, never a measurement; the reward uses it only as a bounded bonus for
candidates that are already verified correct.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["RankScore"]


class RankScore(BaseModel):
    """The ranker's opinion of one candidate on one task."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    score: float = Field(ge=0.0, le=1.0)  # mean P(candidate beats a known implementation)
    compared: int = Field(default=0, ge=0)  # how many known implementations it was compared to
    model: str = ""  # ranker model id (name, version or checkpoint hash)
