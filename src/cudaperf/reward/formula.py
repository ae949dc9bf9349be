"""`compute_reward`: one `RewardBreakdown` from an `ExecResult`, structural reports and a
`RankScore`. The formula and its reasons are in the package docstring (`cudaperf.reward`)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from cudaperf.analyze.types import StructuralReport
from cudaperf.execute.types import ExecResult, Status
from cudaperf.rank.types import RankScore
from cudaperf.reward.config import BASELINES, RewardConfig

__all__ = ["FORMAT_ERROR", "RewardBreakdown", "compute_reward", "format_error_reward"]

FORMAT_ERROR = "format_error"  # RewardBreakdown.status when no code could be extracted


class RewardBreakdown(BaseModel):
    """Every component of the reward and the total (total = the sum of the four components)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    status: str  # a Status value, or "format_error" when the reply held no code block
    valid: bool = True  # False: the evaluator failed (infra_error); drop the sample, no reward
    outcome: float = 0.0  # the level of the status (RewardConfig.rejected ... .correct)
    speed: float = 0.0  # bounded log-speedup term; 0 unless the candidate is correct and timed
    structure: float = 0.0  # structure_weight * mean kernel score; 0 unless correct
    ranker: float = 0.0  # ranker_weight * RankScore.score; 0 unless correct
    total: float = 0.0  # outcome + speed + structure + ranker
    speedup: float | None = None  # the speedup the speed term used (None: not measured)
    baseline: str = ""  # which baseline that speedup is against: eager/compile/naive/cpu
    structure_score: float | None = None  # mean StructuralReport.score (None: no report)
    rank_score: float | None = None  # RankScore.score (None: no ranker opinion)
    mode: str = ""  # the ExecResult's mode: "full" or "compile-only" ("" for a format error)
    config: str = ""  # RewardConfig.name
    notes: list[str] = []  # one sentence per component saying why it has its value

    @property
    def components(self) -> dict[str, float]:
        """The additive components by name (what per-component reward functions return)."""
        return {
            "outcome": self.outcome,
            "speed": self.speed,
            "structure": self.structure,
            "ranker": self.ranker,
        }


_LEVEL = {
    Status.REJECTED: "rejected",
    Status.COMPILE_ERROR: "compile_error",
    Status.COMPILED: "compiled",
    Status.RUNTIME_ERROR: "runtime_error",
    Status.TIMEOUT: "runtime_error",
    Status.WRONG_OUTPUT: "wrong_output",
    Status.OK: "correct",
}


def format_error_reward(config: RewardConfig | None = None, message: str = "") -> RewardBreakdown:
    """The reward of a reply from which no candidate could be extracted."""
    cfg = config or RewardConfig()
    note = "outcome: no complete code block in the reply" + (f" ({message})" if message else "")
    return RewardBreakdown(
        status=FORMAT_ERROR,
        outcome=cfg.format_error,
        total=cfg.format_error,
        config=cfg.name,
        notes=[note],
    )


def speed_term(speedup: float | None, cfg: RewardConfig) -> float:
    """speed_weight * clip(ln(speedup) / ln(speed_cap), speed_floor, 1); 0 when unmeasured."""
    if speedup is None or not speedup > 0 or not math.isfinite(speedup):
        return 0.0
    t = math.log(speedup) / math.log(cfg.speed_cap)
    return cfg.speed_weight * max(cfg.speed_floor, min(1.0, t))


def pick_speedup(result: ExecResult, cfg: RewardConfig) -> tuple[float | None, str]:
    """(speedup, baseline name) per `RewardConfig.baseline`; (None, "") when none was measured."""
    for attr in BASELINES[cfg.baseline]:
        v = getattr(result, attr)
        if v is not None and v > 0:
            return v, attr.removeprefix("speedup_vs_")
    return None, ""


def compute_reward(
    result: ExecResult,
    reports: Sequence[StructuralReport] = (),
    rank: RankScore | None = None,
    config: RewardConfig | None = None,
) -> RewardBreakdown:
    """The unified reward of one evaluated candidate (see the package docstring)."""
    cfg = config or RewardConfig()
    reports = _ran(result, reports)
    struct = sum(r.score for r in reports) / len(reports) if reports else None
    base = dict(
        status=result.status.value,
        mode=result.mode,
        config=cfg.name,
        structure_score=struct,
        rank_score=rank.score if rank is not None else None,
    )
    if result.status is Status.INFRA_ERROR:
        return RewardBreakdown(
            **base, valid=False, notes=["no reward: the evaluator failed (not the candidate)"]
        )
    level = getattr(cfg, _LEVEL[result.status])
    notes = [f"outcome: {result.status.value} scores {level:+.3f}"]
    if result.status is not Status.OK:
        notes.append(_why_no_bonus(result.status))
        return RewardBreakdown(**base, outcome=level, total=level, notes=notes)
    speedup, baseline = pick_speedup(result, cfg)
    speed = speed_term(speedup, cfg)
    if speedup is None:
        notes.append("speed: 0 (no speedup against any baseline was measured)")
    else:
        notes.append(
            f"speed: {speedup:.2f}x vs {baseline} -> {speed:+.3f} (clipped log-speedup, "
            f"saturates at {cfg.speed_cap:g}x)"
        )
    structure = cfg.structure_weight * struct if struct is not None else 0.0
    notes.append(
        f"structure: {structure:+.3f} (mean kernel score {struct:.2f} x {cfg.structure_weight:g})"
        if struct is not None
        else "structure: 0 (no structural report)"
    )
    ranker = cfg.ranker_weight * rank.score if rank is not None else 0.0
    notes.append(
        f"ranker: {ranker:+.3f} (score {rank.score:.2f} over {rank.compared} known "
        f"implementations x {cfg.ranker_weight:g})"
        if rank is not None
        else "ranker: 0 (no ranker opinion)"
    )
    total = level + speed + structure + ranker
    return RewardBreakdown(
        **base,
        outcome=level,
        speed=speed,
        structure=structure,
        ranker=ranker,
        total=total,
        speedup=speedup,
        baseline=baseline,
        notes=notes,
    )


def _ran(result: ExecResult, reports: Sequence[StructuralReport]) -> list[StructuralReport]:
    """The reports of kernels seen launching (all of them when launches were not observed)."""
    if result.launched is None:
        return list(reports)
    from cudaperf.analyze.launches import base_name

    ran = {base_name(n) for n in result.launched}
    return [r for r in reports if r.name in ran]


def _why_no_bonus(status: Status) -> str:
    if status is Status.COMPILED:
        return (
            "speed, structure, ranker: 0 (compile-only mode: nothing ran, so correctness and "
            "speed are unknown)"
        )
    return "speed, structure, ranker: 0 (bonuses are for correct candidates only)"
