"""Choose the feature ranker by leave-family-out cross-validation on the training families
only (the held-out families stay unseen until `bench/rank_eval.py`): the LambdaRank settings,
then the objective (ensemble = mean of Bradley–Terry and LambdaRank, lambdarank, bt).

    python bench/rank_cv.py [data/tasks.jsonl.gz] [--folds 5] [--out bench/results/rank_cv.json]

The training families are shuffled (seed 0) into --folds groups; each setting is trained on
the other groups and scored on one group's pairs >= 1.2x apart (pairwise accuracy). Prints a
table and writes every fold's accuracy to --out. Static features only (no ptxas), from the
same on-disk cache as the ranker.
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
from cudaperf.rank.pairs import build_pairs, measured_groups, read_splits, tasks_in_split
from cudaperf.rank.ranker import TrainConfig, analyzer_config, impl_features, train_feature_ranker
from cudaperf.tasks.io import load_tasks

GRID = [
    {"num_leaves": 4, "min_data_in_leaf": 300, "num_iterations": 500},
    {"num_leaves": 7, "min_data_in_leaf": 200, "num_iterations": 300},
    {"num_leaves": 7, "min_data_in_leaf": 500, "num_iterations": 200},
    {"num_leaves": 15, "min_data_in_leaf": 100, "num_iterations": 300},
    {"num_leaves": 31, "min_data_in_leaf": 50, "num_iterations": 300},
]


def fold_accuracy(train, test, feats, names, setting: dict, threads: int) -> float:
    groups = [[(feats[(g.task_id, i)], t) for i, t in g.times.items()]
              for g in measured_groups(train)]  # fmt: skip
    cal = [(feats[(p.task_id, p.a)], feats[(p.task_id, p.b)], p.a_faster)
           for p in build_pairs(train, 1.0)]  # fmt: skip
    text, k, _ = fit_lambdarank(groups, cal, names, {**setting, "num_threads": threads})
    return holdout_accuracy(LambdaRankModel(names=names, booster=text, scale=k), test, feats)


def objective_accuracy(train, fold, feats, objective: str, a) -> float:
    """Accuracy on `fold`'s pairs >= 1.2x of the ranker trained on the other families."""
    splits = {t.family: ("test" if t.family in fold else "train") for t in train}
    cfg = TrainConfig(objective=objective, workers=a.workers, cache_dir=a.cache_dir)
    model = train_feature_ranker(train, splits, cfg)
    return holdout_accuracy(model, [t for t in train if t.family in fold], feats)


def holdout_accuracy(model, test, feats) -> float:
    """`rank.metrics.pairwise_accuracy` of `model` on `test`'s pairs >= 1.2x apart."""
    pairs = build_pairs(test, 1.2)
    keys = sorted({(p.task_id, x) for p in pairs for x in (p.a, p.b)})
    strength = dict(zip(keys, model.utility([feats[key] for key in keys]), strict=True))
    return float(pairwise_accuracy(pairs, strength))


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
    fams = sorted({t.family for t in train})
    np.random.default_rng(0).shuffle(fams)
    folds = [fams[i :: a.folds] for i in range(a.folds)]
    rows = []
    for setting in GRID:
        accs = [fold_accuracy([t for t in train if t.family not in f],
                              [t for t in train if t.family in f], feats, names, setting,
                              a.workers) for f in folds]  # fmt: skip
        rows.append({**setting, "cv_accuracy": float(np.mean(accs)), "folds": accs})
        print(f"{setting}  CV accuracy {np.mean(accs):.3f}  folds "
              + " ".join(f"{x:.3f}" for x in accs), flush=True)  # fmt: skip
    objectives = []
    for objective in ("ensemble", "lambdarank", "bt"):
        accs = [objective_accuracy(train, f, feats, objective, a) for f in folds]
        objectives.append({"objective": objective, "cv_accuracy": float(np.mean(accs)),
                           "folds": accs})  # fmt: skip
        print(f"objective {objective:10s} CV accuracy {np.mean(accs):.3f}  folds "
              + " ".join(f"{x:.3f}" for x in accs), flush=True)  # fmt: skip
    best = max(rows, key=lambda r: r["cv_accuracy"])
    d = default_params()
    chosen = {k: d[k] for k in ("num_leaves", "min_data_in_leaf", "num_iterations")}
    print(f"best: { ({k: best[k] for k in chosen}) }; the shipped default: {chosen}")
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps({"command": "python " + shlex.join(sys.argv), "tasks": str(a.tasks),
                                 "fold_families": folds, "results": rows, "default": chosen,
                                 "objectives": objectives},
                                indent=1) + "\n")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
