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

Config-aware (the default, `TrainConfig.config_aware`): the feature rows of an implementation
also hold the config it was timed on (`rank.config_features`: log bytes of the inputs, the size
relative to the task's other configs, threads and blocks the launches start at those sizes).
The Bradley–Terry member reads the implementation features, their products with the relative
size (`<feature>*s.rel`) and the launch features (also times both sizes); LambdaRank reads the
features, the config and the launch columns and learns the interactions itself. So the
predicted order may differ between a small and a large config, as the measured one does.

`score` of a config-aware model averages the probability over the task's visible configs (a
candidate is rewarded for being fast across them, not on the largest one alone). Held-out
configs stay out, relative sizes included (`visible_task`): the score is quoted in a model's
feedback, and would otherwise move with sizes the model is never shown. A config-free model
(format v1 files) scores as before.

Guaranteed: training is deterministic (same tasks, splits and settings → identical weights);
`score` is the mean predicted probability that the candidate beats each of the task's known
implementations (over the task's configs), in [0, 1]. Not guaranteed: calibration, or any
accuracy on a task set the model was not evaluated on — the numbers come from
`cudaperf rank eval`.
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
from cudaperf.rank.bt import BTModel, fit_bt, standardise
from cudaperf.rank.config_features import CONFIG_NAMES, LAUNCH_NAMES, row
from cudaperf.rank.ensemble import EnsembleModel
from cudaperf.rank.features import FEATURE_NAMES, features_many
from cudaperf.rank.formats import load_default, load_model
from cudaperf.rank.lambdarank import LambdaRankModel, fit_lambdarank
from cudaperf.rank.pairs import Pair, build_pairs, measured_groups
from cudaperf.rank.types import RankScore
from cudaperf.tasks.model import Task
from cudaperf.tasks.splits import family_splits, tasks_in_split

__all__ = [
    "NoPairsError",
    "PairwiseRanker",
    "TrainConfig",
    "FEATURE_MODELS",
    "analyzer_config",
    "bt_columns",
    "config_rows",
    "impl_features",
    "lambdarank_columns",
    "lambdarank_data",
    "model_strengths",
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
    config_aware: bool = True  # config and launch columns (rank.config_features); False = code only

    def __post_init__(self) -> None:
        if self.objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {OBJECTIVES}, got {self.objective!r}")
        if not 0 < self.l2 < float("inf"):  # NaN passes `<= 0`
            raise ValueError(f"l2 must be a finite number > 0, got {self.l2}; try 1e-2")
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


RowKey = tuple[str, str, str]  # (task id, config name, implementation id)


def config_rows(
    tasks: list[Task], feats: dict[tuple[str, str], dict], config_aware: bool = True
) -> dict[RowKey, dict]:
    """(task id, config, implementation id) → feature row, for every config of every task
    (`config_features.row`: the implementation's features plus the config's; without `config_aware`,
    the implementation's features alone)."""
    out: dict[RowKey, dict] = {}
    for t in tasks:
        for c in t.configs:
            for i in t.implementations:
                f = feats[(t.id, i.id)]
                out[(t.id, c.name, i.id)] = row(f, t, c, i.code) if config_aware else f
    return out


def bt_columns(names: list[str]) -> list[str]:
    """The Bradley–Terry member's columns: each implementation feature and its product with
    the relative size `s.rel`, the launch features and their products with both sizes. (A
    config column alone cancels in a pair; only its products with features can matter.)
    Chosen by leave-family-out CV on the training families (`bench/rank_cv.py`)."""
    rel = [f"{n}*s.rel" for n in names]
    launch = [f"{n}*{s}" for n in LAUNCH_NAMES for s in CONFIG_NAMES]
    return [*names, *rel, *LAUNCH_NAMES, *launch]


def lambdarank_columns(names: list[str]) -> list[str]:
    """The LambdaRank member's columns: the features, the config and the launch features (the
    trees find the interactions)."""
    return [*names, *CONFIG_NAMES, *LAUNCH_NAMES]


def lambdarank_data(
    tasks: list[Task], rows: dict[RowKey, dict], pairs: list[Pair]
) -> tuple[list, list]:
    """`fit_lambdarank`'s inputs: the ranking groups of `tasks` (per task and config, each
    implementation's row and median time) and the calibration `pairs` as (row a, row b, a
    faster)."""
    groups = [
        [(rows[(g.task_id, g.config, i)], t) for i, t in g.times.items()]
        for g in measured_groups(tasks)
    ]
    cal = [
        (rows[(p.task_id, p.config, p.a)], rows[(p.task_id, p.config, p.b)], p.a_faster)
        for p in pairs
    ]
    return groups, cal


def pair_arrays(
    pairs: list[Pair], rows: dict[RowKey, dict], model: BTModel
) -> tuple[np.ndarray, np.ndarray]:
    """(standardised differences z(a) - z(b), labels 1 = a faster) for `pairs`."""
    za = model.matrix([rows[(p.task_id, p.config, p.a)] for p in pairs])
    zb = model.matrix([rows[(p.task_id, p.config, p.b)] for p in pairs])
    return za - zb, np.array([1.0 if p.a_faster else 0.0 for p in pairs])


def model_strengths(model, tasks: list[Task], feats: dict[tuple[str, str], dict]) -> dict:
    """A feature model's strength of every implementation of `tasks`, keyed (task id, config,
    implementation id) when the model is config-aware, else (task id, implementation id)."""
    if model.config_aware:
        rows = config_rows(tasks, feats)
    else:
        rows = {(t.id, i.id): feats[(t.id, i.id)] for t in tasks for i in t.implementations}
    u = model.utility(list(rows.values())) if rows else []
    return {k: float(v) for k, v in zip(rows, u, strict=True)}


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
    feats = impl_features(
        [t for t in train if t.id in used], acfg, cfg.workers, cfg.cache_dir, progress
    )
    names, _, _ = standardise(list(feats.values()), list(FEATURE_NAMES))
    if not names:
        raise NoPairsError("every feature is constant over the training implementations")
    rows = config_rows([t for t in train if t.id in used], feats, cfg.config_aware)
    of = family_splits(tasks, splits)
    training = {
        "source": source,
        "tasks": len({p.task_id for p in pairs}),
        "implementations": len(feats),
        "pairs": len(pairs),
        "min_ratio": cfg.min_ratio,
        "config_aware": cfg.config_aware,
        "gpus": sorted({p.gpu for p in pairs}),
        "families": sorted({p.family for p in pairs}),
        "heldout_families": sorted(f for f, s in of.items() if s != "train"),
    }
    analyzer = {"resources": cfg.resources, "arch": cfg.arch}
    members = []
    if cfg.objective in ("bt", "ensemble"):
        # Standardised over every (implementation, config) row: each implementation counts
        # once per config, so the implementation features keep their per-implementation scale.
        cols = bt_columns(names) if cfg.config_aware else names
        bnames, means, stds = standardise(list(rows.values()), cols)
        base = BTModel(names=bnames, means=means, stds=stds, coef=[0.0] * len(bnames), l2=cfg.l2)
        diffs, y = pair_arrays(pairs, rows, base)
        coef = [float(c) for c in fit_bt(diffs, y, l2=cfg.l2)]
        members.append(
            BTModel(
                names=bnames,
                means=means,
                stds=stds,
                coef=coef,
                l2=cfg.l2,
                analyzer=analyzer,
                training=training,
            )
        )
    if cfg.objective in ("lambdarank", "ensemble"):
        groups, cal = lambdarank_data([t for t in train if t.id in used], rows, pairs)
        lnames = lambdarank_columns(names) if cfg.config_aware else names
        booster, k, params = fit_lambdarank(groups, cal, lnames, {"num_threads": cfg.workers})
        training["groups"] = len(groups)
        members.append(
            LambdaRankModel(
                names=lnames,
                booster=booster,
                scale=k,
                params=params,
                analyzer=analyzer,
                training=training,
            )
        )
    log.info(
        "trained the %s ranker on %d pairs of %d tasks",
        cfg.objective,
        len(pairs),
        training["tasks"],
    )
    if len(members) == 1:
        return members[0]
    return EnsembleModel(members=tuple(members), analyzer=analyzer, training=training)


def score_many(task: Task, candidates: list[str], model: PairwiseRanker) -> list[RankScore]:
    """`score` of each candidate; the task's implementations are read once."""
    n = len(task.implementations)
    if n == 0:
        return [RankScore(score=0.5, compared=0, model=model.id) for _ in candidates]
    task = visible_task(task)
    codes = [i.code for i in task.implementations] + list(candidates)
    if hasattr(model, "config_strengths"):  # (configs, codes); one row when config-free
        u = np.asarray(model.config_strengths(task, codes), dtype=float)
    else:
        u = np.asarray(model.strengths(task, codes), dtype=float).reshape(1, -1)
    known, cand = u[:, :n], u[:, n:]
    # P(candidate c beats implementation i on config k), averaged over k and i.
    p = 0.5 * (1.0 + np.tanh(0.5 * (cand[:, :, None] - known[:, None, :])))
    return [
        RankScore(score=float(np.clip(v, 0.0, 1.0)), compared=n, model=model.id)
        for v in p.mean(axis=(0, 2))
    ]


def visible_task(task: Task) -> Task:
    """`task` with its visible configs only (itself when it has no other): a score must not
    move with sizes a model is never shown (it is quoted in feedback and paid as reward)."""
    visible = task.visible_configs
    if not visible or len(visible) == len(task.configs):
        return task
    return task.model_copy(update={"configs": visible})


def score(task: Task, candidate_code: str, model: PairwiseRanker) -> RankScore:
    """Mean P(candidate faster than implementation) over the task's known implementations
    (and, for a config-aware model, over the task's visible configs).

    A task without implementations gives 0.5 with `compared=0` (no opinion).
    """
    return score_many(task, [candidate_code], model)[0]


def make_ranker(model: PairwiseRanker) -> Callable[[Task, str], RankScore]:
    """A `cudaperf.reward.scorer.Ranker`: `(task, code) -> RankScore` using `model`. A feature
    model's ranker carries `analyze_config` (the `AnalyzeConfig` of its features), so a caller
    that analysed the code with that config can hand its reports on
    (`rank.features.features_of_reports`) instead of having them computed again."""

    def rank(task: Task, code: str) -> RankScore:
        return score(task, code, model)

    if hasattr(model, "analyze_config"):
        rank.analyze_config = model.analyze_config()  # type: ignore[attr-defined]
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
