"""Evaluating a ranker on held-out families: pairwise accuracy, Kendall tau, top-1, baselines.

`evaluate(tasks, model, splits)` returns one flat dict (the `cudaperf rank eval --json` keys):

- `pairwise_accuracy`, `pairs`: on held-out pairs at least `min_ratio` (1.2x) apart;
- `kendall_tau`: tau-a between predicted strength and speed, per (task, config, GPU), averaged
  within a task and then over tasks;
- `top1_accuracy`: share of (task, config, GPU) groups whose fastest implementation gets the
  highest predicted strength;
- `baseline_structural_accuracy` (higher analyzer score wins), `baseline_length_accuracy`
  (longer code wins), `baseline_random_accuracy` (0.5, analytically): on the same pairs;
- `all_pairs`: the pairwise numbers again on every non-tied pair;
- `by_config`: the pairwise numbers on the pairs >= `min_ratio` of each config name.

Strengths are keyed (task id, implementation id), or (task id, config, implementation id) for
a config-aware model (`strength_table`); every metric looks up the config's key first.
A prediction tie counts as half right. Guaranteed: every accuracy is in [0, 1] or None when
there is nothing to count. Not guaranteed: significance — report `pairs` with every number.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

import numpy as np

from cudaperf.analyze import AnalyzeConfig
from cudaperf.rank.pairs import Group, Pair, build_pairs, measured_groups
from cudaperf.rank.ranker import (
    FEATURE_MODELS,
    MEASURE_HINT,
    NoPairsError,
    PairwiseRanker,
    impl_features,
    model_strengths,
)
from cudaperf.tasks.model import Task
from cudaperf.tasks.splits import family_splits, tasks_in_split

__all__ = [
    "calibration_bins",
    "calibration_plot",
    "evaluate",
    "strength_table",
    "kendall_tau",
    "pairwise_accuracy",
    "top1_accuracy",
]


def _at(strength: dict, task_id: str, config: str, impl: str) -> float:
    """The strength of `impl` on `config`: the per-config key, else the config-free one."""
    v = strength.get((task_id, config, impl))
    return strength[(task_id, impl)] if v is None else v


def pairwise_accuracy(pairs: list[Pair], strength: dict[tuple, float]) -> float | None:
    """Share of pairs whose faster member has the higher strength (ties: half). None if empty."""
    if not pairs:
        return None
    right = 0.0
    for p in pairs:
        sa, sb = _at(strength, p.task_id, p.config, p.a), _at(strength, p.task_id, p.config, p.b)
        if sa == sb or math.isnan(sa) or math.isnan(sb):
            right += 0.5  # a tie, or a side without a known strength
        else:
            right += float((sa > sb) == p.a_faster)
    return right / len(pairs)


def kendall_tau(predicted: list[float], times: list[float]) -> float:
    """Tau-a between predicted strength (higher = faster) and speed (lower time = faster).

    (concordant - discordant) / (n choose 2); pairs tied in either are neither. 0 for n < 2.
    """
    n = len(predicted)
    if n != len(times):
        raise ValueError("predicted and times need the same length")
    if n < 2:
        return 0.0
    if not all(map(math.isfinite, [*predicted, *times])):
        raise ValueError(
            "a predicted strength or a time is not finite (NaN or infinity): a ranker whose "
            "weights hold NaN scores nothing; train it again"
        )
    s = 0
    for i in range(n):
        for j in range(i + 1, n):
            dp = np.sign(predicted[i] - predicted[j])
            dt = np.sign(times[j] - times[i])  # positive when i is faster
            s += int(dp * dt)
    return s / (n * (n - 1) / 2)


def top1_accuracy(groups: list[tuple[list[float], list[float]]]) -> float | None:
    """Share of groups (predicted strengths, times) whose fastest item has the top strength.

    A tie at the top shares the credit (1/k when k items tie, the fastest among them).
    """
    if not groups:
        return None
    total = 0.0
    for pred, times in groups:
        best = int(np.argmin(times))
        top = [i for i, v in enumerate(pred) if v == max(pred)]
        total += (1.0 / len(top)) if best in top else 0.0
    return total / len(groups)


def _group_stats(groups: list[Group], strength: dict) -> tuple[float | None, float | None]:
    per_task: dict[str, list[float]] = defaultdict(list)
    tops = []
    for g in groups:
        ids = list(g.times)
        pred = [_at(strength, g.task_id, g.config, i) for i in ids]
        times = [g.times[i] for i in ids]
        per_task[g.task_id].append(kendall_tau(pred, times))
        tops.append((pred, times))
    taus = [float(np.mean(v)) for v in per_task.values()]
    return (float(np.mean(taus)) if taus else None), top1_accuracy(tops)


def _pair_block(pairs: list[Pair], model_s: dict, struct_s: dict, length_s: dict) -> dict:
    return {
        "pairs": len(pairs),
        "pairwise_accuracy": pairwise_accuracy(pairs, model_s),
        "baseline_structural_accuracy": pairwise_accuracy(pairs, struct_s),
        "baseline_length_accuracy": pairwise_accuracy(pairs, length_s),
        "baseline_random_accuracy": 0.5 if pairs else None,
    }


def pair_probabilities(pairs: list[Pair], strength: dict) -> np.ndarray:
    """P(a faster) per pair: sigmoid of the strength difference."""
    d = np.array(
        [
            _at(strength, p.task_id, p.config, p.a) - _at(strength, p.task_id, p.config, p.b)
            for p in pairs
        ]
    )
    return 0.5 * (1.0 + np.tanh(0.5 * d))


def strength_table(
    tasks: list[Task],
    model: PairwiseRanker,
    workers: int = 1,
    cache_dir: str | Path | None = None,
) -> dict[tuple[str, str], float]:
    """(task id, implementation id) → the model's strength, for every implementation; a
    config-aware feature model's are keyed (task id, config, implementation id)."""
    if isinstance(model, FEATURE_MODELS):  # batch the features (process pool, disk cache)
        feats = impl_features(tasks, model.analyze_config(), workers, cache_dir)
        return model_strengths(model, tasks, feats)
    out = {}
    for t in tasks:
        u = model.strengths(t, [i.code for i in t.implementations])
        out.update({(t.id, i.id): float(v) for i, v in zip(t.implementations, u, strict=True)})
    return out


def evaluate(
    tasks: list[Task],
    model: PairwiseRanker,
    splits: dict[str, str] | None = None,
    split: str = "heldout",
    min_ratio: float = 1.2,
    calibration_png: str | Path | None = None,
    workers: int = 1,
    cache_dir: str | Path | None = None,
    baseline_analyzer: AnalyzeConfig | None = None,
) -> dict:
    """Metrics of `model` on the tasks of `split` (default: validation + test families).

    The structural and length baselines read features computed with `baseline_analyzer`
    (default: the feature model's own analyzer settings, else the analyzer without ptxas).
    """
    chosen = tasks_in_split(tasks, split, splits)
    all_pairs = build_pairs(chosen, 1.0)
    if not all_pairs:
        raise NoPairsError(
            f"no measured pairs in the {len(chosen)} tasks of the {split!r} families "
            f"(of {len(tasks)} tasks); " + MEASURE_HINT
        )
    pairs = [p for p in all_pairs if p.ratio >= min_ratio]
    measured = {p.task_id for p in all_pairs}
    used = [t for t in chosen if t.id in measured]
    acfg = baseline_analyzer or (
        model.analyze_config()
        if isinstance(model, FEATURE_MODELS)
        else AnalyzeConfig(resources=False)
    )
    feats = impl_features(used, acfg, workers, cache_dir)
    model_s = strength_table(used, model, workers, cache_dir)
    struct_s = {k: f["k.score.mean"] for k, f in feats.items()}
    length_s = {k: f["c.log_chars"] for k, f in feats.items()}
    tau, top1 = _group_stats(measured_groups(used), model_s)
    of = family_splits(tasks, splits)
    out = {
        **_pair_block(pairs, model_s, struct_s, length_s),
        "kendall_tau": tau,
        "top1_accuracy": top1,
        "min_ratio": min_ratio,
        "split": split,
        "families": sorted({p.family for p in all_pairs}),
        "train_families": sorted(f for f, s in of.items() if s == "train"),
        "tasks": len(measured),
        "model": model.id,
        "all_pairs": _pair_block(all_pairs, model_s, struct_s, length_s),
        "by_config": {
            c: _pair_block([p for p in pairs if p.config == c], model_s, struct_s, length_s)
            for c in sorted({p.config for p in pairs})
        },
    }
    if calibration_png is not None:
        probs = pair_probabilities(all_pairs, model_s)
        labels = np.array([p.a_faster for p in all_pairs], dtype=float)
        label = "feature ranker" if isinstance(model, FEATURE_MODELS) else "neural ranker"
        out["calibration_png"] = str(calibration_plot(probs, labels, calibration_png, label=label))
        out["calibration_pairs"] = len(all_pairs)  # the count in the plot's title
    return out


def calibration_bins(probs, labels, bins: int = 10) -> list[dict]:
    """Reliability table over both orientations of each pair (so it is symmetric about 0.5).

    One row per non-empty bin: lower/upper edge, mean predicted probability, observed win
    rate, count.
    """
    p = np.concatenate([np.asarray(probs, float), 1 - np.asarray(probs, float)])
    y = np.concatenate([np.asarray(labels, float), 1 - np.asarray(labels, float)])
    edges = np.linspace(0.0, 1.0, bins + 1)
    idx = np.clip(np.digitize(p, edges[1:-1]), 0, bins - 1)
    rows = []
    for b in range(bins):
        m = idx == b
        if m.any():
            rows.append(
                {
                    "lo": float(edges[b]),
                    "hi": float(edges[b + 1]),
                    "predicted": float(p[m].mean()),
                    "observed": float(y[m].mean()),
                    "count": int(m.sum()),
                }
            )
    return rows


def calibration_plot(
    probs, labels, path: str | Path, bins: int = 10, label: str = "ranker"
) -> Path:
    """Write a PNG: predicted P(a faster) vs observed win rate per bin, with the diagonal."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = calibration_bins(probs, labels, bins)
    fig, ax = plt.subplots(figsize=(4.5, 4.5))
    ax.plot([0, 1], [0, 1], "--", color="grey", lw=1, label="perfect calibration")
    if rows:
        x = [r["predicted"] for r in rows]
        ax.plot(x, [r["observed"] for r in rows], "o-", label=label)
        for r in rows:
            ax.annotate(
                str(r["count"]),
                (r["predicted"], r["observed"]),
                fontsize=7,
                xytext=(3, -9),
                textcoords="offset points",
            )
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("predicted P(faster)")
    ax.set_ylabel("observed win rate")
    n = len(np.atleast_1d(probs))
    ax.set_title(f"ranker calibration ({n} pairs of any speed ratio, both orders)", fontsize=9)
    ax.legend(loc="upper left", fontsize=8)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
