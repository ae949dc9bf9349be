"""Does the structural score track measured speed? Spearman within each task's implementations.

    python bench/analyze_score_vs_speed.py [TASKS] [--gpu "NVIDIA H200"] [--out FILE]

For every task with measured implementations (default: the bundled sample set, measured on
the H200), each implementation gets the analyzer's score (the mean over its kernels) and a
speed (1 / geomean over configs of its median time). Reports the Spearman correlation per
task (tasks with >= 3 implementations), the share of within-task pairs >= 1.2x apart that the
score orders correctly, and the full table. CPU only: the timings are the stored measurements.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
import sys
from pathlib import Path

from cudaperf.analyze import AnalyzeConfig, analyze
from cudaperf.tasks.io import load_sample, load_tasks


def _ranks(xs: list[float]) -> list[float]:
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    ranks = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2
        i = j + 1
    return ranks


def spearman(a: list[float], b: list[float]) -> float | None:
    ra, rb = _ranks(a), _ranks(b)
    if len(set(ra)) < 2 or len(set(rb)) < 2:
        return None
    return statistics.correlation(ra, rb)


def rows_for(task, gpu: str, config: AnalyzeConfig) -> list[dict]:
    rows = []
    for impl in task.implementations:
        ms = [m.median_us for m in impl.measurements if m.gpu == gpu]
        if len(ms) < len(task.configs):
            continue
        reports = analyze(impl.code, config=config)
        rows.append({
            "task": task.id, "implementation": impl.id, "strategies": impl.strategies,
            "score": round(statistics.mean(r.score for r in reports), 4),
            "geomean_us": round(math.exp(statistics.mean(math.log(x) for x in ms)), 3),
        })  # fmt: skip
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tasks", nargs="?", type=Path)
    ap.add_argument("--gpu", default="NVIDIA H200")
    ap.add_argument("--out", type=Path, default=Path("bench/results/analyze_score_vs_speed.json"))
    args = ap.parse_args()
    tasks = load_tasks(args.tasks) if args.tasks else load_sample()
    config = AnalyzeConfig()
    table, per_task, pairs_ok, pairs = [], {}, 0, 0
    for t in tasks:
        rows = rows_for(t, args.gpu, config)
        table += rows
        if len(rows) >= 3:
            rho = spearman([r["score"] for r in rows], [1 / r["geomean_us"] for r in rows])
            per_task[t.id] = None if rho is None else round(rho, 3)
        for a, b in itertools.combinations(rows, 2):
            if max(a["geomean_us"], b["geomean_us"]) / min(a["geomean_us"], b["geomean_us"]) < 1.2:
                continue
            pairs += 1
            faster, slower = (a, b) if a["geomean_us"] < b["geomean_us"] else (b, a)
            pairs_ok += faster["score"] > slower["score"]
    rhos = [v for v in per_task.values() if v is not None]
    out = {
        "gpu": args.gpu, "tasks": len({r["task"] for r in table}), "implementations": len(table),
        "spearman_per_task": per_task,
        "spearman_mean": round(statistics.mean(rhos), 3) if rhos else None,
        "pairs_ge_1.2x": pairs, "pairs_ordered_by_score": pairs_ok,
        "pairwise_accuracy": round(pairs_ok / pairs, 3) if pairs else None,
        "command": " ".join(["python", *sys.argv]), "rows": table,
    }  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1))
    print(f"{'task':<32}{'implementation':<24}{'score':>7}{'geomean us':>12}")
    for r in table:
        print(f"{r['task']:<32}{r['implementation']:<24}{r['score']:>7.3f}{r['geomean_us']:>12.1f}")
    print(f"\nSpearman per task (>= 3 implementations): {per_task}")
    print(f"pairs >= 1.2x apart ordered by the score: {pairs_ok}/{pairs}")


if __name__ == "__main__":
    main()
