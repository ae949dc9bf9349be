"""The offline ranker on held-out families: accuracy, baselines, calibration, CPU inference time.

    python bench/rank_eval.py [--tasks data/tasks.jsonl] [--ablate-resources] [--ablate-config]
                              [--objectives ensemble,lambdarank,bt]
                              [--neural DIR | --train-neural [--backbone smollm2 --max-steps N]]

Trains the feature rankers (the default: the mean of LightGBM LambdaRank and Bradley–Terry;
and each of the two alone, for comparison; with --ablate-config also the code-only ensemble
that ignores the config, as before the config features) on the training families' measured data (the
dataset's family splits: splits.json next to --tasks), evaluates on the validation + test
families (pairs >= --min-ratio apart, and every pair), and optionally the neural ranker (a
trained folder, or trained here: needs a GPU for a real run). Prints a table, writes
--out-json (with the dataset file and its hash, date, versions and this command) and a
calibration plot with every ranker.
Times the feature ranker's `score_many` on 64 fresh candidates of one task on this CPU.
The timings of the dataset are the stored measurements: nothing runs on a GPU unless the
neural ranker is trained or applied there.
"""

from __future__ import annotations

import argparse
import json
import platform
import shlex
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from cudaperf.rank.metrics import calibration_bins, evaluate, pair_probabilities, strength_table
from cudaperf.rank.pairs import build_pairs
from cudaperf.rank.ranker import TrainConfig, provenance, score_many, train_feature_ranker
from cudaperf.tasks.io import load_sample, load_tasks
from cudaperf.tasks.splits import read_splits, tasks_in_split

ROWS = [
    ("pairwise_accuracy", "acc >= min ratio"),
    ("all_acc", "acc, all pairs"),
    ("pairs", "pairs >= min ratio"),
    ("all_pairs_n", "pairs, all"),
    ("kendall_tau", "Kendall tau (task mean)"),
    ("top1_accuracy", "top-1"),
    ("baseline_structural_accuracy", "baseline: structural score"),
    ("baseline_length_accuracy", "baseline: longer code"),
    ("baseline_random_accuracy", "baseline: random"),
]


def inference_seconds(model, task, n: int = 64, repeats: int = 3) -> tuple[float, float]:
    """Median (wall, CPU) seconds of `score_many` on `n` never-seen candidates (cold caches).

    CPU time is reported too: wall time on a shared machine includes other processes' load.
    """
    from cudaperf.rank import features

    base = [i.code for i in task.implementations]
    score_many(task, [base[0] + "\n// warm-up\n"], model)  # imports, parser, the task's impls
    times, cpu = [], []
    for r in range(repeats):
        cands = [f"{base[k % len(base)]}\n// candidate {r}-{k}\n" for k in range(n)]
        features._CACHE.clear()
        score_many(task, [], model)  # the implementations again, outside the timed region
        t0, c0 = time.perf_counter(), time.process_time()
        score_many(task, cands, model)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return statistics.median(times), statistics.median(cpu)


CONFIGS = ("small", "medium", "large", "heldout")  # the dataset's config names
ROWS += [(f"acc_{c}", f"acc >= min ratio, {c}") for c in CONFIGS]


def _row(rep: dict) -> dict:
    by = {f"acc_{c}": v["pairwise_accuracy"] for c, v in rep.get("by_config", {}).items()}
    return {
        **rep,
        **by,
        "all_acc": rep["all_pairs"]["pairwise_accuracy"],
        "all_pairs_n": rep["all_pairs"]["pairs"],
    }


def print_table(results: dict[str, dict]) -> None:
    names = list(results)
    w = max(18, *(len(n) + 2 for n in names))
    print(f"{'':30s}" + "".join(f"{n:>{w}s}" for n in names))
    for key, label in ROWS:
        cells = []
        for n in names:
            v = _row(results[n]).get(key)
            cells.append(f"{v:{w}.3f}" if isinstance(v, float) else f"{v!s:>{w}s}")
        print(f"{label:30s}" + "".join(cells))


def calibration_figure(curves: dict[str, tuple], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 5))
    ax.plot([0, 1], [0, 1], "--", color="grey", lw=1, label="perfect calibration")
    for name, (probs, labels) in curves.items():
        rows = calibration_bins(probs, labels, 10)
        ax.plot(
            [r["predicted"] for r in rows],
            [r["observed"] for r in rows],
            "o-",
            label=f"{name} ({len(labels)} pairs)",
        )
    ax.set(
        xlim=(0, 1),
        ylim=(0, 1),
        xlabel="predicted P(faster)",
        ylabel="observed win rate",
        title="ranker calibration, held-out families (all pairs, both orders)",
    )
    ax.title.set_fontsize(9)
    ax.legend(loc="upper left", fontsize=8)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _curve(tasks, splits, model, args) -> tuple[np.ndarray, np.ndarray]:
    held = tasks_in_split(tasks, "heldout", splits)
    pairs = build_pairs(held, 1.0)
    used = {p.task_id for p in pairs}
    s = strength_table([t for t in held if t.id in used], model, args.workers, args.cache_dir)
    return pair_probabilities(pairs, s), np.array([p.a_faster for p in pairs], dtype=float)


def _versions() -> dict:
    import importlib.metadata as md

    out = {}
    for pkg in ("numpy", "torch", "transformers", "peft"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            continue
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=Path, default=None, help="default: the bundled sample set")
    ap.add_argument("--splits", type=Path, default=None, help="default: splits.json by --tasks")
    ap.add_argument("--min-ratio", type=float, default=1.2)
    ap.add_argument("--l2", type=float, default=1e-2, help="bt objective's L2")
    ap.add_argument(
        "--objectives",
        default="ensemble,lambdarank,bt",
        help="feature models to train: ensemble (the default ranker), lambdarank, bt",
    )
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--cache-dir", default=str(Path.home() / ".cache/cudaperf/rank-features"))
    ap.add_argument(
        "--resources",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="ptxas features in the main feature ranker (slow: ~0.4 s/impl)",
    )
    ap.add_argument(
        "--ablate-resources",
        action="store_true",
        help="also train and report the feature ranker with the other setting",
    )
    ap.add_argument(
        "--ablate-config",
        action="store_true",
        help="also train and report the code-only ensemble (config_aware=False)",
    )
    ap.add_argument("--neural", type=Path, default=None, help="a trained neural ranker folder")
    ap.add_argument("--train-neural", action="store_true", help="train the neural ranker here")
    ap.add_argument("--backbone", default="smollm2")
    ap.add_argument("--max-steps", type=int, default=None)
    ap.add_argument("--neural-out", type=Path, default=Path("runs/neural_ranker"))
    ap.add_argument("--out-json", type=Path, default=Path("bench/results/rank_eval.json"))
    ap.add_argument("--plot", type=Path, default=Path("bench/results/rank_calibration.png"))
    args = ap.parse_args(argv)

    tasks = load_tasks(args.tasks) if args.tasks else load_sample()
    sp = args.splits or (args.tasks.parent / "splits.json" if args.tasks else None)
    sp = sp if sp is not None and sp.is_file() else None
    splits = read_splits(sp) if sp else None
    results, curves, models = {}, {}, {}
    settings = [(args.resources, o, True) for o in args.objectives.split(",")]
    settings += [(not args.resources, "ensemble", True)] if args.ablate_resources else []
    settings += [(args.resources, "ensemble", False)] if args.ablate_config else []
    for res, objective, aware in settings:
        name = ("feature+ptxas" if res else "feature") + (
            "" if objective == "ensemble" else f"-{objective}"
        )
        name += "" if aware else "-codeonly"
        cfg = TrainConfig(
            l2=args.l2,
            resources=res,
            workers=args.workers,
            cache_dir=args.cache_dir,
            objective=objective,
            config_aware=aware,
        )
        t0 = time.perf_counter()
        m = train_feature_ranker(tasks, splits, cfg, source=str(args.tasks or "sample set"))
        train_s = time.perf_counter() - t0
        results[name] = evaluate(
            tasks,
            m,
            splits,
            "heldout",
            args.min_ratio,
            workers=args.workers,
            cache_dir=args.cache_dir,
        )
        results[name]["train_seconds"] = round(train_s, 1)
        results[name]["training"] = m.training
        results[name]["weights"] = m.weights_table()
        curves[name] = _curve(tasks, splits, m, args)
        models[name] = m
    neural = None
    if args.train_neural:
        from cudaperf.rank.neural import NeuralConfig, train_neural_ranker

        ncfg = NeuralConfig(backbone=args.backbone, max_steps=args.max_steps)
        neural = train_neural_ranker(
            tasks, splits, ncfg, out=args.neural_out, source=str(args.tasks or "sample set")
        )
    elif args.neural:
        from cudaperf.rank.neural import NeuralRanker

        neural = NeuralRanker.load(args.neural)
    if neural is not None:
        results["neural"] = evaluate(
            tasks,
            neural,
            splits,
            "heldout",
            args.min_ratio,
            workers=args.workers,
            cache_dir=args.cache_dir,
        )
        results["neural"]["training"] = {k: v for k, v in neural.training.items() if k != "losses"}
        curves["neural"] = _curve(tasks, splits, neural, args)
    first = models[next(iter(models))]
    held = [t for t in tasks_in_split(tasks, "heldout", splits) if t.implementations]
    task = max(held or tasks, key=lambda t: len(t.implementations))
    infer, infer_cpu = inference_seconds(first, task)
    print_table(results)
    print(
        f"feature ranker, 64 candidates of {task.id} on this CPU: {infer:.3f} s wall, "
        f"{infer_cpu:.3f} s CPU"
    )
    calibration_figure(curves, args.plot)
    doc = {
        **provenance(args.tasks, sp, "python " + shlex.join(sys.argv)),
        "min_ratio": args.min_ratio,
        "results": results,
        "inference_64_candidates_s": round(infer, 4),
        "inference_64_candidates_cpu_s": round(infer_cpu, 4),
        "inference_task": task.id,
        "inference_machine": f"{platform.machine()} {platform.processor()} (CPU)",
        "calibration_png": str(args.plot),
        "versions": _versions(),
    }
    args.out_json.parent.mkdir(parents=True, exist_ok=True)
    args.out_json.write_text(json.dumps(doc, indent=1, default=str) + "\n")
    print(f"wrote {args.out_json} and {args.plot}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
