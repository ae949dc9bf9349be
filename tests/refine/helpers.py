"""The reward tests' builders of ExecResults, reports and rank scores (no GPU), for refine tests:
one copy, in `tests.reward.helpers` (reward sits below refine in the package flow)."""

from __future__ import annotations

from tests.reward.helpers import finding, rank, report, result

__all__ = ["finding", "rank", "report", "result"]
