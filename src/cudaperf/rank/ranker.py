"""The feature ranker: train a Bradley–Terry model on measured pairs, score candidates.

    model = train_feature_ranker(tasks, splits)          # training families only
    rs = score(task, candidate_code, model)              # RankScore in [0, 1]
    scorer = RewardScorer(tasks, ranker=make_ranker(model))

Guaranteed: training is deterministic (same tasks, splits and settings → identical weights);
`score` is the mean predicted probability that the candidate beats each of the task's known
implementations, in [0, 1]. Not guaranteed: calibration, or any accuracy on a task set the
model was not evaluated on — the numbers come from `cudaperf rank eval`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from cudaperf.analyze import AnalyzeConfig
from cudaperf.rank.bt import BTModel, fit_bt, standardise
from cudaperf.rank.features import FEATURE_NAMES, code_features
from cudaperf.rank.pairs import Pair, build_pairs, family_splits, tasks_in_split
from cudaperf.rank.types import RankScore
from cudaperf.tasks.model import Task

__all__ = [
    "NoPairsError",
    "TrainConfig",
    "analyzer_config",
    "impl_features",
    "make_ranker",
    "score",
    "train_feature_ranker",
]

log = logging.getLogger(__name__)

MEASURE_HINT = (
    "measure the implementations on a GPU first: `cudaperf eval TASKS --implementations --out "
    "r.jsonl`, then `cudaperf tasks attach r.jsonl TASKS --out measured.jsonl`"
)


class NoPairsError(ValueError):
    """No measured pairs to train or evaluate on."""


@dataclass(frozen=True)
class TrainConfig:
    """How the feature ranker is trained."""

    l2: float = 1e-2  # L2 strength on standardised coefficients (mean loss)
    min_ratio: float = 1.0  # training pairs: slower/faster at least this (1.0 = all but ties)
    resources: bool = True  # run ptxas for registers/smem/spills/occupancy features
    arch: str = "sm_90"  # target architecture for ptxas and occupancy

    def __post_init__(self) -> None:
        if self.l2 <= 0:
            raise ValueError(f"l2 must be > 0, got {self.l2}; try 1e-2")
        if self.min_ratio < 1:
            raise ValueError(
                f"min_ratio is slower/faster time and must be >= 1, got {self.min_ratio}"
            )


def analyzer_config(model_or_cfg: BTModel | TrainConfig) -> AnalyzeConfig:
    """The analyzer settings a model's features use (resources on/off, arch)."""
    if isinstance(model_or_cfg, TrainConfig):
        return AnalyzeConfig(resources=model_or_cfg.resources, arch=model_or_cfg.arch)
    return AnalyzeConfig(**model_or_cfg.analyzer) if model_or_cfg.analyzer else AnalyzeConfig()


def impl_features(tasks: list[Task], cfg: AnalyzeConfig) -> dict[tuple[str, str], dict]:
    """(task id, implementation id) → feature dict, for every implementation of `tasks`."""
    return {(t.id, i.id): code_features(i.code, cfg) for t in tasks for i in t.implementations}


def pair_arrays(
    pairs: list[Pair], feats: dict[tuple[str, str], dict], model: BTModel
) -> tuple[np.ndarray, np.ndarray]:
    """(standardised differences z(a) - z(b), labels 1 = a faster) for `pairs`."""
    za = model.matrix([feats[(p.task_id, p.a)] for p in pairs])
    zb = model.matrix([feats[(p.task_id, p.b)] for p in pairs])
    return za - zb, np.array([1.0 if p.a_faster else 0.0 for p in pairs])


def train_feature_ranker(
    tasks: list[Task],
    splits: dict[str, str] | None = None,
    config: TrainConfig | None = None,
    source: str = "",
) -> BTModel:
    """Fit the BT model on measured pairs of the training families (`splits`, else the hash).

    Raises NoPairsError when the training families have no measured pair.
    """
    cfg = config or TrainConfig()
    train = tasks_in_split(tasks, "train", splits)
    pairs = build_pairs(train, cfg.min_ratio)
    if not pairs:
        raise NoPairsError(
            f"no measured pairs in the {len(train)} training-family tasks (of {len(tasks)}); "
            + MEASURE_HINT
        )
    acfg = analyzer_config(cfg)
    feats = impl_features([t for t in train if any(p.task_id == t.id for p in pairs)], acfg)
    names, means, stds = standardise(list(feats.values()), list(FEATURE_NAMES))
    if not names:
        raise NoPairsError("every feature is constant over the training implementations")
    base = BTModel(names=names, means=means, stds=stds, coef=[0.0] * len(names), l2=cfg.l2)
    diffs, y = pair_arrays(pairs, feats, base)
    coef = fit_bt(diffs, y, l2=cfg.l2)
    of = family_splits(tasks, splits)
    training = {
        "source": source,
        "tasks": len({p.task_id for p in pairs}),
        "implementations": len(feats),
        "pairs": len(pairs),
        "min_ratio": cfg.min_ratio,
        "gpus": sorted({p.gpu for p in pairs}),
        "families": sorted({p.family for p in pairs}),
        "heldout_families": sorted(f for f, s in of.items() if s != "train"),
    }
    log.info("trained the feature ranker on %d pairs of %d tasks", len(pairs), training["tasks"])
    return BTModel(
        names=names,
        means=means,
        stds=stds,
        coef=[float(c) for c in coef],
        l2=cfg.l2,
        analyzer={"resources": cfg.resources, "arch": cfg.arch},
        training=training,
    )


def score(task: Task, candidate_code: str, model: BTModel) -> RankScore:
    """Mean P(candidate faster than implementation) over the task's known implementations.

    A task without implementations gives 0.5 with `compared=0` (no opinion).
    """
    if not task.implementations:
        return RankScore(score=0.5, compared=0, model=model.id)
    cfg = analyzer_config(model)
    rows = [code_features(candidate_code, cfg)]
    rows += [code_features(i.code, cfg) for i in task.implementations]
    u = model.utility(rows)
    p = 0.5 * (1.0 + np.tanh(0.5 * (u[0] - u[1:])))
    s = float(np.clip(p.mean(), 0.0, 1.0))
    return RankScore(score=s, compared=len(task.implementations), model=model.id)


def make_ranker(model: BTModel) -> Callable[[Task, str], RankScore]:
    """A `cudaperf.reward.scorer.Ranker`: `(task, code) -> RankScore` using `model`."""

    def rank(task: Task, code: str) -> RankScore:
        return score(task, code, model)

    return rank
