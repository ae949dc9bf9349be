"""Train the feature ranker; score candidates with any ranker (feature or neural).

    model = train_feature_ranker(tasks, splits)          # training families only
    rs = score(task, candidate_code, model)              # RankScore in [0, 1]
    scorer = RewardScorer(tasks, ranker=make_ranker(load_ranker("runs/neural")))

A ranker is anything with an `id` and `strengths(task, codes) -> array` (higher = predicted
faster; a difference d of strengths means P(faster) = sigmoid(d)): `EnsembleModel` (the
default feature ranker: the mean of the two below), `LambdaRankModel` (LightGBM LambdaRank,
calibrated; `TrainConfig(objective="lambdarank")`), `BTModel` (Bradley–Terry on feature
differences; `objective="bt"`) and `cudaperf.rank.neural.NeuralRanker` all are
(`PairwiseRanker`).

Guaranteed: training is deterministic (same tasks, splits and settings → identical weights);
`score` is the mean predicted probability that the candidate beats each of the task's known
implementations, in [0, 1]. Not guaranteed: calibration, or any accuracy on a task set the
model was not evaluated on — the numbers come from `cudaperf rank eval`.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from cudaperf.analyze import AnalyzeConfig
from cudaperf.rank.bt import BTModel, fit_bt, load_default, load_model, standardise
from cudaperf.rank.ensemble import EnsembleModel
from cudaperf.rank.features import FEATURE_NAMES, features_many
from cudaperf.rank.lambdarank import LambdaRankModel, fit_lambdarank
from cudaperf.rank.pairs import Pair, build_pairs, family_splits, measured_groups, tasks_in_split
from cudaperf.rank.types import RankScore
from cudaperf.tasks.model import Task

__all__ = [
    "NoPairsError",
    "PairwiseRanker",
    "TrainConfig",
    "FEATURE_MODELS",
    "analyzer_config",
    "impl_features",
    "load_ranker",
    "make_ranker",
    "provenance",
    "score",
    "score_many",
    "train_feature_ranker",
]

log = logging.getLogger(__name__)

MEASURE_HINT = (
    "measure the implementations on a GPU first: `cudaperf eval TASKS --implementations --out "
    "r.jsonl`, then `cudaperf tasks attach r.jsonl TASKS --out measured.jsonl`"
)


FEATURE_MODELS = (BTModel, LambdaRankModel, EnsembleModel)  # rankers over analyzer features
OBJECTIVES = ("ensemble", "lambdarank", "bt")


class NoPairsError(ValueError):
    """No measured pairs to train or evaluate on."""


@runtime_checkable
class PairwiseRanker(Protocol):
    """What `score`, `evaluate` and the reward need from a ranker."""

    id: str  # model id (content hash), reported with every score

    def strengths(self, task: Task, codes: list[str]) -> np.ndarray:
        """One strength per code; higher = predicted faster; differences are BT logits."""
        ...


def load_ranker(path: str | Path | None = None) -> PairwiseRanker:
    """A saved ranker: a feature JSON, a folder holding one, or a neural ranker folder.

    None = the packaged feature weights (`load_default`). Raises ModelNotTrainedError or
    ValueError with a message that says what to pass.
    """
    if path is None:
        return load_default()
    p = Path(path)
    if p.is_dir():
        from cudaperf.rank.neural import META_FILE, NeuralRanker

        if (p / META_FILE).is_file():
            return NeuralRanker.load(p)
        p = p / "feature_ranker.json"
    return load_model(p)


@dataclass(frozen=True)
class TrainConfig:
    """How the feature ranker is trained."""

    l2: float = 1e-2  # L2 strength on standardised coefficients (mean loss)
    min_ratio: float = 1.0  # training pairs: slower/faster at least this (1.0 = all but ties)
    resources: bool = False  # ptxas registers/smem/spills/occupancy (~1.5 s per implementation)
    arch: str = "sm_90"  # target architecture for ptxas and occupancy
    workers: int = 1  # processes computing features (the analyzer, ptxas)
    cache_dir: str | None = None  # on-disk feature cache (features.FeatureCache); None = off
    objective: str = "ensemble"  # ensemble (mean of both), lambdarank (trees), bt (linear)

    def __post_init__(self) -> None:
        if self.objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {OBJECTIVES}, got {self.objective!r}")
        if self.l2 <= 0:
            raise ValueError(f"l2 must be > 0, got {self.l2}; try 1e-2")
        if self.min_ratio < 1:
            raise ValueError(
                f"min_ratio is slower/faster time and must be >= 1, got {self.min_ratio}"
            )
        if self.workers < 1:
            raise ValueError(f"workers must be >= 1, got {self.workers}; try os.cpu_count()")


def analyzer_config(model_or_cfg) -> AnalyzeConfig:
    """The analyzer settings a model's features use (resources on/off, arch)."""
    if isinstance(model_or_cfg, TrainConfig):
        return AnalyzeConfig(resources=model_or_cfg.resources, arch=model_or_cfg.arch)
    return model_or_cfg.analyze_config()


def impl_features(
    tasks: list[Task],
    cfg: AnalyzeConfig,
    workers: int = 1,
    cache_dir: str | Path | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> dict[tuple[str, str], dict]:
    """(task id, implementation id) → feature dict, for every implementation of `tasks`."""
    keys = [(t.id, i.id) for t in tasks for i in t.implementations]
    codes = [i.code for t in tasks for i in t.implementations]
    rows = features_many(codes, cfg, workers, cache_dir, progress)
    return dict(zip(keys, rows, strict=True))


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
    progress: Callable[[int, int], None] | None = None,
) -> BTModel | LambdaRankModel | EnsembleModel:
    """Fit the feature ranker (`config.objective`) on measured data of the training families
    (`splits`, else the hash): LambdaRank on the (task, config) groups, calibrated on the
    pairs; Bradley–Terry on the pairs; or both, averaged (the default).

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
    used = {p.task_id for p in pairs}
    feats = impl_features([t for t in train if t.id in used], acfg, cfg.workers, cfg.cache_dir,
                          progress)  # fmt: skip
    names, means, stds = standardise(list(feats.values()), list(FEATURE_NAMES))
    if not names:
        raise NoPairsError("every feature is constant over the training implementations")
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
    analyzer = {"resources": cfg.resources, "arch": cfg.arch}
    members = []
    if cfg.objective in ("bt", "ensemble"):
        base = BTModel(names=names, means=means, stds=stds, coef=[0.0] * len(names), l2=cfg.l2)
        diffs, y = pair_arrays(pairs, feats, base)
        coef = [float(c) for c in fit_bt(diffs, y, l2=cfg.l2)]
        members.append(BTModel(names=names, means=means, stds=stds, coef=coef, l2=cfg.l2,
                               analyzer=analyzer, training=training))  # fmt: skip
    if cfg.objective in ("lambdarank", "ensemble"):
        groups = [[(feats[(g.task_id, i)], t) for i, t in g.times.items()]
                  for g in measured_groups(t for t in train if t.id in used)]  # fmt: skip
        cal = [(feats[(p.task_id, p.a)], feats[(p.task_id, p.b)], p.a_faster) for p in pairs]
        booster, k, params = fit_lambdarank(groups, cal, names, {"num_threads": cfg.workers})
        training["groups"] = len(groups)
        members.append(LambdaRankModel(names=names, booster=booster, scale=k, params=params,
                                       analyzer=analyzer, training=training))  # fmt: skip
    log.info("trained the %s ranker on %d pairs of %d tasks", cfg.objective, len(pairs),
             training["tasks"])  # fmt: skip
    if len(members) == 1:
        return members[0]
    return EnsembleModel(members=tuple(members), analyzer=analyzer, training=training)


def score_many(task: Task, candidates: list[str], model: PairwiseRanker) -> list[RankScore]:
    """`score` of each candidate; the task's implementations are read once."""
    n = len(task.implementations)
    if n == 0:
        return [RankScore(score=0.5, compared=0, model=model.id) for _ in candidates]
    u = model.strengths(task, [i.code for i in task.implementations] + list(candidates))
    known, cand = u[:n], u[n:]
    p = 0.5 * (1.0 + np.tanh(0.5 * (cand[:, None] - known[None, :])))
    return [RankScore(score=float(np.clip(row.mean(), 0.0, 1.0)), compared=n, model=model.id)
            for row in p]  # fmt: skip


def score(task: Task, candidate_code: str, model: PairwiseRanker) -> RankScore:
    """Mean P(candidate faster than implementation) over the task's known implementations.

    A task without implementations gives 0.5 with `compared=0` (no opinion).
    """
    return score_many(task, [candidate_code], model)[0]


def make_ranker(model: PairwiseRanker) -> Callable[[Task, str], RankScore]:
    """A `cudaperf.reward.scorer.Ranker`: `(task, code) -> RankScore` using `model`."""

    def rank(task: Task, code: str) -> RankScore:
        return score(task, code, model)

    return rank


def provenance(dataset: str | Path | None, splits: str | Path | None, command: str = "") -> dict:
    """Where a ranker's training data came from: file, its SHA-256, splits, date, versions."""
    import datetime
    import platform

    import cudaperf

    def sha(p):
        if p is None or not Path(p).is_file():
            return None
        return hashlib.sha256(Path(p).read_bytes()).hexdigest()

    return {
        "dataset": str(dataset) if dataset is not None else "bundled sample set",
        "dataset_sha256": sha(dataset),
        "splits": str(splits) if splits is not None else "salted hash of the family name",
        "splits_sha256": sha(splits),
        "train_split": "train",
        "eval_split": "heldout (validation + test families)",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "cudaperf": cudaperf.__version__,
        "python": platform.python_version(),
        "command": command,
    }
