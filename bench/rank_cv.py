"""Choose the feature ranker by leave-family-out cross-validation on the training families
only (the held-out families stay unseen until `bench/rank_eval.py`): the LambdaRank settings
(on the config-aware columns), the Bradley–Terry L2, then the objective (ensemble = mean of
Bradley–Terry and LambdaRank, lambdarank, bt), each with and without the config features.

    python bench/rank_cv.py [data/tasks.jsonl.gz] [--folds 5] [--out bench/results/rank_cv.json]

The training families are shuffled (seed 0) into --folds groups; each setting is trained on
the other groups and scored on one group's pairs >= 1.2x apart (pairwise accuracy, and per
config name). Prints a table and writes every fold's accuracy to --out. Static features only
(no ptxas), from the same on-disk cache as the ranker.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

import numpy as np

from cudaperf.rank.bt import standardise
from cudaperf.rank.features import FEATURE_NAMES
from cudaperf.rank.lambdarank import LambdaRankModel, default_params, fit_lambdarank
from cudaperf.rank.metrics import pairwise_accuracy
from cudaperf.rank.pairs import build_pairs
from cudaperf.rank.ranker import (
    TrainConfig,
    analyzer_config,
    config_rows,
    impl_features,
    lambdarank_columns,
    lambdarank_data,
    model_strengths,
    train_feature_ranker,
)
from cudaperf.tasks.io import load_tasks
from cudaperf.tasks.splits import read_splits, tasks_in_split

GRID = [
    {"num_leaves": 4, "min_data_in_leaf": 300, "num_iterations": 500},
    {"num_leaves": 7, "min_data_in_leaf": 200, "num_iterations": 300},
    {"num_leaves": 7, "min_data_in_leaf": 500, "num_iterations": 200},
    {"num_leaves": 15, "min_data_in_leaf": 100, "num_iterations": 300},
    {"num_leaves": 31, "min_data_in_leaf": 50, "num_iterations": 300},
]

L2_GRID = [3e-3, 1e-2, 3e-2]  # the config-aware Bradley–Terry member's L2


def fold_accuracy(train, test, feats, rows, names, setting: dict, threads: int) -> dict:
    groups, cal = lambdarank_data(train, rows, build_pairs(train, 1.0))
    text, k, _ = fit_lambdarank(groups, cal, names, {**setting, "num_threads": threads})
    return holdout_accuracy(LambdaRankModel(names=names, booster=text, scale=k), test, feats)


def objective_accuracy(train, fold, feats, objective: str, a, **cfg) -> dict:
    """Accuracy on `fold`'s pairs >= 1.2x of the ranker trained on the other families."""
    splits = {t.family: ("test" if t.family in fold else "train") for t in train}
    tcfg = TrainConfig(objective=objective, workers=a.workers, cache_dir=a.cache_dir, **cfg)
    model = train_feature_ranker(train, splits, tcfg)
    return holdout_accuracy(model, [t for t in train if t.family in fold], feats)


def holdout_accuracy(model, test, feats) -> dict:
    """`rank.metrics.pairwise_accuracy` of `model` on `test`'s pairs >= 1.2x apart: overall
    (`all`) and per config name."""
    pairs = build_pairs(test, 1.2)
    used = {p.task_id for p in pairs}
    strength = model_strengths(model, [t for t in test if t.id in used], feats)
    out = {"all": float(pairwise_accuracy(pairs, strength))}
    for c in sorted({p.config for p in pairs}):
        out[c] = float(pairwise_accuracy([p for p in pairs if p.config == c], strength))
    return out


def _summary(label: str, accs: list[dict]) -> dict:
    """Mean over folds of the overall accuracy, and of each config's; prints one line."""
    mean = {k: float(np.mean([x[k] for x in accs if k in x])) for k in accs[0]}
    print(
        f"{label}  CV accuracy {mean['all']:.3f}  folds "
        + " ".join(f"{x['all']:.3f}" for x in accs)
        + "  by config "
        + " ".join(f"{k} {v:.3f}" for k, v in mean.items() if k != "all"),
        flush=True,
    )
    return {
        "cv_accuracy": mean["all"],
        "cv_by_config": {k: v for k, v in mean.items() if k != "all"},
        "folds": [x["all"] for x in accs],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tasks", nargs="?", type=Path, default=Path("data/tasks.jsonl.gz"))
    ap.add_argument("--splits", type=Path, default=None, help="default: next to the tasks")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--cache-dir", default=str(Path.home() / ".cache/cudaperf/rank-features"))
    ap.add_argument("--out", type=Path, default=Path("bench/results/rank_cv.json"))
    a = ap.parse_args(argv)
    tasks = load_tasks(a.tasks)
    splits = read_splits(a.splits or a.tasks.parent / "splits.json")
    train = tasks_in_split(tasks, "train", splits)
    feats = impl_features(train, analyzer_config(TrainConfig()), a.workers, a.cache_dir)
    names, _, _ = standardise(list(feats.values()), list(FEATURE_NAMES))
    names = lambdarank_columns(names)
    crow = config_rows(train, feats)
    fams = sorted({t.family for t in train})
    np.random.default_rng(0).shuffle(fams)
    folds = [fams[i :: a.folds] for i in range(a.folds)]
    rows = []
    for setting in GRID:
        accs = [
            fold_accuracy(
                [t for t in train if t.family not in f],
                [t for t in train if t.family in f],
                feats,
                crow,
                names,
                setting,
                a.workers,
            )
            for f in folds
        ]
        rows.append({**setting, **_summary(f"lambdarank {setting}", accs)})
    l2s = []
    for l2 in L2_GRID:
        accs = [objective_accuracy(train, f, feats, "bt", a, l2=l2) for f in folds]
        l2s.append({"l2": l2, **_summary(f"bt l2={l2:g}", accs)})
    objectives = []
    for aware in (False, True):
        for objective in ("ensemble", "lambdarank", "bt"):
            accs = [
                objective_accuracy(train, f, feats, objective, a, config_aware=aware) for f in folds
            ]
            label = f"objective {objective:10s} config_aware={aware!s:5s}"
            objectives.append(
                {"objective": objective, "config_aware": aware, **_summary(label, accs)}
            )
    best = max(rows, key=lambda r: r["cv_accuracy"])
    best_l2 = max(l2s, key=lambda r: r["cv_accuracy"])["l2"]
    print(f"best bt l2: {best_l2:g}; the shipped default: {TrainConfig().l2:g}")
    d = default_params()
    chosen = {k: d[k] for k in ("num_leaves", "min_data_in_leaf", "num_iterations")}
    print(f"best: { ({k: best[k] for k in chosen}) }; the shipped default: {chosen}")
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(
        json.dumps(
            {
                "command": "python " + shlex.join(sys.argv),
                "tasks": str(a.tasks),
                "fold_families": folds,
                "results": rows,
                "default": chosen,
                "bt_l2": l2s,
                "default_l2": TrainConfig().l2,
                "objectives": objectives,
            },
            indent=1,
        )
        + "\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
