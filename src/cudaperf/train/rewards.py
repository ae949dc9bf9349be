"""GRPO reward functions: picklable classes in TRL's reward-function contract.

`TurnReturn` reads each row's discounted return, which the multi-turn rollout computed from
the unified reward (`cudaperf.reward`, preset `unified` or `outcome_only`) and put in the row
(`cudaperf_return`), and returns it as an advantage that compares like with like
(`turn_advantages`): standardised among the rows of the same group (one task) *and the same
turn*. TRL normalises over a block of `num_generations` rows, and a block holds every turn of
a task's chains; turn 1's return (s1 + γ s2) and turn 2's (s2) live on different scales, so
one normalisation over both biased every advantage by its turn (measured: a compile error
got -0.87 at turn 1 and +0.87 at turn 2). `train.grpo` therefore runs TRL with
`scale_rewards="none"`: TRL then only subtracts the block's mean, which is 0 here, and the
advantage is exactly this function's value. Rows of one group and turn that are all equal
(or alone) get 0.

It holds no evaluator, only its name and group size, so it pickles (TRL and accelerate may
copy reward functions between processes). It logs the breakdown through the `log_metric` /
`log_extra` hooks TRL passes: the mean of every component, of the turn's own score and of
the return, the share of each status, and per completion its status, turn, score and return.
A row without a return (evaluator failure) gets None: TRL excludes it and gives it no
advantage.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from cudaperf.train.rollout import COMPONENTS

__all__ = ["TurnReturn", "turn_advantages"]


_EPS = 1e-4  # TRL's: added to the standard deviation


def turn_advantages(
    returns: list[float | None], turns: list[int], group_size: int
) -> list[float | None]:
    """Each return standardised among the returns of its group (consecutive blocks of
    `group_size` rows, one task each) and its turn: (R - mean) / (std + 1e-4), std with
    Bessel's correction (as TRL's). None stays None and takes no part."""
    if group_size < 1 or len(returns) % group_size or len(turns) != len(returns):
        raise ValueError(
            f"{len(returns)} returns and {len(turns)} turns are not whole groups of {group_size}"
        )
    out: list[float | None] = [None] * len(returns)
    cells: dict[tuple[int, int], list[int]] = {}
    for i, (r, t) in enumerate(zip(returns, turns, strict=True)):
        if r is not None and math.isfinite(r):
            cells.setdefault((i // group_size, int(t)), []).append(i)
    for rows in cells.values():
        vals = [float(returns[i]) for i in rows]  # type: ignore[arg-type]
        mean = sum(vals) / len(vals)
        var = sum((v - mean) ** 2 for v in vals) / (len(vals) - 1) if len(vals) > 1 else 0.0
        for i, v in zip(rows, vals, strict=True):
            out[i] = (v - mean) / (math.sqrt(var) + _EPS)
    return out


class TurnReturn:
    """Reward = the row's discounted return as a per-(task, turn) advantage (module doc).
    `group_size`: TRL's `num_generations` (the rows of one task are that many consecutive
    rows); None returns the raw returns (for use outside `train.grpo`)."""

    def __init__(self, name: str = "cudaperf_return", group_size: int | None = None) -> None:
        self.__name__ = name
        self.group_size = group_size

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
            m = _mean(returns)
            if m is not None:
                log_metric("cudaperf/return", m)
        if log_extra is not None:
            for key in ("status", "turn", "score", "return"):
                if f"cudaperf_{key}" in kw:
                    log_extra(key, list(kw[f"cudaperf_{key}"]))
        clean = [r if r is not None and math.isfinite(r) else None for r in returns]
        if self.group_size is None:
            return clean
        if "cudaperf_turn" not in kw:
            raise ValueError("the rows carry no cudaperf_turn: per-turn advantages need it")
        return turn_advantages(clean, list(kw["cudaperf_turn"]), self.group_size)

    def __repr__(self) -> str:
        return f"TurnReturn({self.__name__!r}, group_size={self.group_size})"


def _mean(xs) -> float | None:
    v = [x for x in xs if x is not None and math.isfinite(x)]
    return sum(v) / len(v) if v else None
