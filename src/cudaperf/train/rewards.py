"""GRPO reward functions: picklable classes in TRL's reward-function contract.

`TurnReturn` returns each row's discounted return, which the multi-turn rollout computed
from the unified reward (`cudaperf.reward`, preset `unified` or `outcome_only`) and put in
the row (`cudaperf_return`). It holds no evaluator, only its name, so it pickles (TRL and
accelerate may copy reward functions between processes). It logs the breakdown through
the `log_metric` / `log_extra` hooks TRL passes: the mean of every component and of the
turn's own score, the share of each status, and per completion its status, turn and score.
A row without a return (evaluator failure) gets None, which TRL ignores.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from cudaperf.train.rollout import COMPONENTS

__all__ = ["TurnReturn"]


class TurnReturn:
    """Reward = the rollout's discounted return for the row (see the module doc)."""

    def __init__(self, name: str = "cudaperf_return") -> None:
        self.__name__ = name

    def __call__(self, prompts: Any = None, completions: Any = None, **kw: Any):
        if "cudaperf_return" not in kw:
            raise ValueError(
                "the rows carry no cudaperf_return: TurnReturn needs the multi-turn rollout "
                "(cudaperf.train.rollout.MultiTurnRollout as GRPOTrainer's rollout_func)"
            )
        returns = list(kw["cudaperf_return"])
        log_metric, log_extra = kw.get("log_metric"), kw.get("log_extra")
        if log_metric is not None:
            for c in (*COMPONENTS, "score"):
                m = _mean(kw.get(f"cudaperf_{c}", []))
                if m is not None:
                    log_metric(f"cudaperf/{c}", m)
            status = Counter(kw.get("cudaperf_status", []))
            for s, k in status.items():
                log_metric(f"cudaperf/status_{s}", k / max(1, len(returns)))
        if log_extra is not None:
            for key in ("status", "turn", "score"):
                if f"cudaperf_{key}" in kw:
                    log_extra(key, list(kw[f"cudaperf_{key}"]))
        return [r if r is not None and math.isfinite(r) else None for r in returns]

    def __repr__(self) -> str:
        return f"TurnReturn({self.__name__!r})"


def _mean(xs) -> float | None:
    v = [x for x in xs if x is not None and math.isfinite(x)]
    return sum(v) / len(v) if v else None
