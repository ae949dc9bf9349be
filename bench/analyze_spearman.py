"""Spearman between the analyzer's structural score and measured speed, within each task.

    python bench/analyze_spearman.py [TASKS] [--gpu NAME] [--speed largest|geomean]
        [--workers N] [--no-ptxas] [--min-impls 2] [--cache-dir DIR] [--splits FILE]
        [--out FILE]

TASKS is any task file or folder with measured implementations (default: the bundled sample
set, measured on an H200). Per implementation: the analyzer's score (mean over its kernels),
its score components (`cudaperf.analyze.types.score_components`, mean over kernels) and
its numeric features (mean over kernels); speed = 1 / median time on the task's largest
visible config (the visible config with the largest mean log time over the task's measured
implementations), or with `--speed geomean` 1 / geomean over the visible configs. Only
implementations measured on every visible config on `--gpu` count.

Reports the per-task Spearman rho (tasks with >= --min-impls implementations whose speeds
differ), its mean and median, the fraction of tasks with rho > 0, per-family means, the share
of within-task pairs >= 1.2x apart that the score orders correctly, and for each score
component and each feature the mean within-task Spearman with speed: the most negative ones
are the features that mislead. With `--splits` (a data/splits.json: family → train /
validation / test) the headline statistics are also reported for the train families and for
the held-out (validation + test) families, so that score changes chosen on train can be
checked on families they never saw. The analysis runs in a process pool (thousands of
implementations); `--no-ptxas` skips nvcc (no registers, spills or occupancy), which is
about 10x faster. Writes --out (default bench/results/analyze_spearman.json) and prints a
short table. CPU only: the timings are the stored measurements.
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import math
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from cudaperf.analyze import FEATURES, AnalyzeConfig, NoKernelsError, analyze
from cudaperf.analyze.types import score_components
from cudaperf.tasks.io import load_sample, load_tasks

_CFG: AnalyzeConfig | None = None


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
    """Spearman's rho with average ranks for ties; None when either side is constant."""
    ra, rb = _ranks(a), _ranks(b)
    if len(set(ra)) < 2 or len(set(rb)) < 2:
        return None
    return statistics.correlation(ra, rb)


def _init(cfg: AnalyzeConfig) -> None:
    global _CFG
    _CFG = cfg


def _analyze_one(code: str) -> dict | None:
    """Score, components and features of one implementation (means over its kernels)."""
    try:
        reports = analyze(code, config=_CFG)
    except NoKernelsError:
        return None
    except Exception as e:  # noqa: BLE001 - one bad implementation must not stop the study
        return {"error": f"{type(e).__name__}: {str(e)[:200]}"}
    comps = [score_components(r.features, _CFG) for r in reports]
    out = {"score": statistics.mean(r.score for r in reports), "components": {}, "features": {}}
    for k in {k for c in comps for k in c}:
        out["components"][k] = statistics.mean(c[k] for c in comps if k in c)
    for k in FEATURES:
        vals = [r.features[k] for r in reports if r.features.get(k) is not None]
        if vals:
            out["features"][k] = statistics.mean(vals)
    return out


def _speeds(task, gpu: str, mode: str) -> dict[str, float]:
    """Implementation id → speed (1/µs) over the task's visible configs."""
    visible = [c.name for c in task.configs if not c.held_out]
    times: dict[str, dict[str, float]] = {}
    for impl in task.implementations:
        t = {m.config: m.median_us for m in impl.measurements if m.gpu == gpu}
        if all(c in t for c in visible):
            times[impl.id] = {c: t[c] for c in visible}
    if not times:
        return {}
    if mode == "geomean":
        return {
            i: 1 / math.exp(statistics.mean(math.log(v) for v in t.values()))
            for i, t in times.items()
        }
    largest = max(visible, key=lambda c: statistics.mean(math.log(t[c]) for t in times.values()))
    return {i: 1 / t[largest] for i, t in times.items()}


def _mean(xs: list[float]) -> float | None:
    return round(statistics.mean(xs), 3) if xs else None


def _per_task_rho(rows: list[dict], key) -> float | None:
    vals = [key(r) for r in rows]
    if any(v is None for v in vals):
        return None
    return spearman(vals, [r["speed"] for r in rows])


def summarise(rows: list[dict], families: dict[str, str], min_impls: int) -> dict:
    """The statistics of the module docstring from per-implementation rows."""
    by_task: dict[str, list[dict]] = collections.defaultdict(list)
    for r in rows:
        by_task[r["task"]].append(r)
    per_task, fam = {}, collections.defaultdict(list)
    pairs = pairs_ok = 0
    comp_rhos, feat_rhos = collections.defaultdict(list), collections.defaultdict(list)
    for tid, rs in by_task.items():
        if len(rs) < min_impls:
            continue
        rho = _per_task_rho(rs, lambda r: r["score"])
        if rho is None:
            continue
        per_task[tid] = round(rho, 3)
        fam[families[tid]].append(rho)
        for k in {k for r in rs for k in r["components"]}:
            v = _per_task_rho(rs, lambda r, k=k: r["components"].get(k))
            if v is not None:
                comp_rhos[k].append(v)
        for k in {k for r in rs for k in r["features"]}:
            v = _per_task_rho(rs, lambda r, k=k: r["features"].get(k))
            if v is not None:
                feat_rhos[k].append(v)
        for a, b in itertools.combinations(rs, 2):
            if max(a["speed"], b["speed"]) / min(a["speed"], b["speed"]) < 1.2:
                continue
            pairs += 1
            faster, slower = (a, b) if a["speed"] > b["speed"] else (b, a)
            pairs_ok += faster["score"] > slower["score"]
    rhos = list(per_task.values())

    def table(d):
        items = {k: {"mean_rho": _mean(v), "tasks": len(v)} for k, v in d.items()}
        return dict(sorted(items.items(), key=lambda kv: kv[1]["mean_rho"]))

    return {
        "tasks_with_rho": len(rhos),
        "spearman_mean": _mean(rhos),
        "spearman_median": round(statistics.median(rhos), 3) if rhos else None,
        "fraction_rho_positive": round(sum(r > 0 for r in rhos) / len(rhos), 3) if rhos else None,
        "spearman_mean_tasks_ge3": _mean([v for t, v in per_task.items() if len(by_task[t]) >= 3]),
        "pairs_ge_1.2x": pairs,
        "pairwise_accuracy": round(pairs_ok / pairs, 3) if pairs else None,
        "per_family": {f: _mean(v) for f, v in sorted(fam.items())},
        "components_vs_speed": table(comp_rhos),
        "features_vs_speed": table(feat_rhos),
        "spearman_per_task": per_task,
    }


_HEADLINE = (
    "tasks_with_rho",
    "spearman_mean",
    "spearman_median",
    "fraction_rho_positive",
    "pairs_ge_1.2x",
    "pairwise_accuracy",
)


def per_split(rows: list[dict], families: dict[str, str], min_impls: int, path: Path) -> dict:
    """Headline statistics on the train families and on the held-out (validation + test)."""
    split = json.loads(path.read_text())["families"]
    out = {}
    for name, keep in (("train", {"train"}), ("held_out", {"validation", "test"})):
        sub = [r for r in rows if split.get(families[r["task"]]) in keep]
        summ = summarise(sub, families, min_impls)
        out[name] = {k: summ[k] for k in _HEADLINE} | {
            "families": sorted({families[r["task"]] for r in sub})
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tasks", nargs="?", type=Path, help="task file/folder (default: sample)")
    ap.add_argument("--gpu", default="NVIDIA H200", help="GPU name of the measurements")
    ap.add_argument("--speed", choices=("largest", "geomean"), default="largest")
    ap.add_argument("--workers", type=int, default=0, help="processes (0 = one per CPU)")
    ap.add_argument("--no-ptxas", action="store_true", help="skip nvcc/ptxas resources")
    ap.add_argument("--min-impls", type=int, default=2, help="implementations per task")
    ap.add_argument("--cache-dir", default=None, help="ptxas result cache")
    ap.add_argument("--splits", type=Path, default=None, help="family splits (splits.json)")
    ap.add_argument("--out", type=Path, default=Path("bench/results/analyze_spearman.json"))
    args = ap.parse_args()
    tasks = load_tasks(args.tasks) if args.tasks else load_sample()
    cfg = AnalyzeConfig(resources=not args.no_ptxas, cache_dir=args.cache_dir)
    jobs = []  # (task, implementation, speed, code)
    for t in tasks:
        for impl_id, speed in _speeds(t, args.gpu, args.speed).items():
            impl = next(i for i in t.implementations if i.id == impl_id)
            jobs.append((t.id, impl, speed))
    t0 = time.perf_counter()
    workers = args.workers or None
    with ProcessPoolExecutor(workers, initializer=_init, initargs=(cfg,)) as pool:
        results = list(pool.map(_analyze_one, [j[1].code for j in jobs], chunksize=4))
    rows, errors = [], []
    for (tid, impl, speed), res in zip(jobs, results, strict=True):
        if res is None or "error" in res:
            errors.append(
                {"task": tid, "implementation": impl.id, **(res or {"error": "no kernel"})}
            )
            continue
        rows.append(
            {
                "task": tid,
                "implementation": impl.id,
                "strategies": impl.strategies,
                "speed": speed,
                **res,
            }
        )
    families = {t.id: t.family for t in tasks}
    summary = summarise(rows, families, args.min_impls)
    if args.splits:
        summary["per_split"] = per_split(rows, families, args.min_impls, args.splits)
    out = {
        "gpu": args.gpu,
        "speed": args.speed,
        "ptxas": not args.no_ptxas,
        "tasks": len({r["task"] for r in rows}),
        "implementations": len(rows),
        "analysis_errors": len(errors),
        "analysis_seconds": round(time.perf_counter() - t0, 1),
        "command": " ".join(["python", *sys.argv]),
        **summary,
        "errors": errors[:50],
        "rows": [
            {
                k: (round(v, 4) if isinstance(v, float) else v)
                for k, v in r.items()
                if k != "features"
            }
            for r in rows
        ],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1))
    _print(out)


def _print(out: dict) -> None:
    print(
        f"{out['implementations']} implementations of {out['tasks']} tasks on {out['gpu']} "
        f"(speed: {out['speed']}; {out['analysis_errors']} analysis errors; "
        f"{out['analysis_seconds']} s)"
    )
    print(
        f"Spearman(score, speed) over {out['tasks_with_rho']} tasks: mean "
        f"{out['spearman_mean']}, median {out['spearman_median']}, rho > 0 in "
        f"{out['fraction_rho_positive']}; tasks with >= 3 implementations: mean "
        f"{out['spearman_mean_tasks_ge3']}; pairs >= 1.2x ordered: "
        f"{out['pairwise_accuracy']}"
    )
    for name, v in out.get("per_split", {}).items():
        print(
            f"  {name} families ({len(v['families'])}): {v['tasks_with_rho']} tasks, mean "
            f"{v['spearman_mean']}, median {v['spearman_median']}, rho > 0 in "
            f"{v['fraction_rho_positive']}, pairs >= 1.2x ordered: "
            f"{v['pairwise_accuracy']}"
        )
    print("\nper family:  " + ", ".join(f"{k} {v}" for k, v in out["per_family"].items()))
    print(f"\n{'score component':<40}{'mean rho':>10}{'tasks':>7}")
    for k, v in out["components_vs_speed"].items():
        print(f"{k:<40}{v['mean_rho']:>10}{v['tasks']:>7}")
    print(f"\n{'feature (most misleading first)':<40}{'mean rho':>10}{'tasks':>7}")
    for k, v in list(out["features_vs_speed"].items())[:10]:
        print(f"{k:<40}{v['mean_rho']:>10}{v['tasks']:>7}")


if __name__ == "__main__":
    main()
