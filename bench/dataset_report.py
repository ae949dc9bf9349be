"""What the GPU measurement of the dataset says: speed spread per task, time floors, winners.

    python bench/dataset_report.py [data/tasks.jsonl.gz] [--results .runs/measure.jsonl]
        [--out bench/results/dataset_h200.json] [--plot data/speedup_spread.png]

Reads the measured task set (`cudaperf tasks attach --verified-only` output) and, optionally,
the raw results JSONL of `cudaperf data measure` (for the status counts and the failures,
which the attached set no longer holds). Prints a short table; writes the full report (JSON)
and a plot of the distribution of best-vs-worst speedups per task.

"Spread" of a task = median time of its slowest implementation / of its fastest one, on the
task's largest non-held-out config (the one sized for timing). "Floor" = the time of the
fastest and of the slowest implementation on that config: the large config was sized by an
estimate so that a reference implementation runs >= 50 us on an H200.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path

from cudaperf.tasks.io import load_tasks
from cudaperf.tasks.model import Task, eval_length


def _timing_config(task: Task) -> str:
    """The largest non-held-out config by total array elements (sizes for torch tasks)."""

    def volume(cfg) -> float:
        if task.signature:
            return sum(eval_length(p.length, cfg.sizes) for p in task.signature if p.is_array)
        return math.prod(max(1, int(v)) for v in cfg.sizes.values())

    cands = [c for c in task.configs if not c.held_out] or list(task.configs)
    return max(cands, key=volume).name


def _quantiles(xs: list[float]) -> dict:
    xs = sorted(xs)
    if not xs:
        return {}

    def q(p: float) -> float:
        return xs[min(len(xs) - 1, int(p * (len(xs) - 1) + 0.5))]

    return {
        "n": len(xs),
        "p10": q(0.1),
        "p25": q(0.25),
        "median": q(0.5),
        "p75": q(0.75),
        "p90": q(0.9),
        "max": xs[-1],
        "min": xs[0],
    }


def task_rows(tasks: list[Task]) -> list[dict]:
    rows = []
    for t in tasks:
        cfg = _timing_config(t)
        times = {}
        for im in t.implementations:
            m = next((m for m in im.measurements if m.config == cfg), None)
            if m is not None:
                times[im.id] = (m.median_us, m.iqr_us, im.strategies)
        if len(times) < 2:
            continue
        fast = min(times, key=lambda k: times[k][0])
        slow = max(times, key=lambda k: times[k][0])
        rows.append(
            {
                "task": t.id,
                "kind": t.kind.value,
                "family": t.family,
                "config": cfg,
                "fastest": fast,
                "fastest_us": times[fast][0],
                "fastest_strategies": times[fast][2],
                "slowest": slow,
                "slowest_us": times[slow][0],
                "spread": times[slow][0] / times[fast][0],
                "rel_iqr_max": max(v[1] / v[0] for v in times.values()),
            }
        )
    return rows


def failures(results: Path) -> tuple[dict, list[dict]]:
    counts: Counter = Counter()
    bad = []
    for line in results.read_text().splitlines():
        if not line.strip():
            continue
        r = json.loads(line)
        kind = r["task_id"].split("/")[1] if r["task_id"].count("/") >= 2 else "?"
        counts[f"{kind}:{r['status']}"] += 1
        if r["status"] != "ok":
            fb = (r.get("feedback") or [""])[0]
            bad.append(
                {
                    "task": r["task_id"],
                    "implementation": r["candidate_id"],
                    "status": r["status"],
                    "message": fb[:300],
                }
            )
    return dict(sorted(counts.items())), bad


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    bins = [10 ** (i / 10) for i in range(0, 31)]  # 1x .. 1000x, log-spaced
    for kind, colour in (("c2cuda", "tab:blue"), ("torch2cuda", "tab:orange")):
        xs = [min(r["spread"], 999.0) for r in rows if r["kind"] == kind]
        ax.hist(xs, bins=bins, alpha=0.6, color=colour, label=f"{kind} ({len(xs)} tasks)")
    ax.set_xscale("log")
    ax.set_xlabel("slowest / fastest implementation (median time, largest timed config)")
    ax.set_ylabel("tasks")
    ax.set_title("Speed spread between implementations of a task (H200)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tasks", nargs="?", default="data/tasks.jsonl.gz")
    ap.add_argument("--results", type=Path, help="raw `cudaperf data measure` results JSONL")
    ap.add_argument("--out", type=Path, default=Path("bench/results/dataset_h200.json"))
    ap.add_argument("--plot", type=Path, default=Path("data/speedup_spread.png"))
    a = ap.parse_args(argv)
    tasks = load_tasks(a.tasks)
    rows = task_rows(tasks)
    if not rows:
        print(f"{a.tasks}: no task has two measured implementations; attach results first")
        return 1
    gpus = Counter(m.gpu for t in tasks for i in t.implementations for m in i.measurements)
    versions = next(
        (m.versions for t in tasks for i in t.implementations for m in i.measurements), {}
    )
    dates = sorted({m.date for t in tasks for i in t.implementations for m in i.measurements})
    by_kind = defaultdict(list)
    for r in rows:
        by_kind[r["kind"]].append(r)
    report: dict = {
        "tasks_file": str(a.tasks),
        "gpus": dict(gpus),
        "versions": versions,
        "dates": dates,
        "tasks_with_spread": len(rows),
    }
    for kind, rs in sorted(by_kind.items()):
        report[kind] = {
            "spread": _quantiles([r["spread"] for r in rs]),
            "share_spread_ge_1.2": round(sum(r["spread"] >= 1.2 for r in rs) / len(rs), 4),
            "share_spread_ge_2": round(sum(r["spread"] >= 2 for r in rs) / len(rs), 4),
            "fastest_us": _quantiles([r["fastest_us"] for r in rs]),
            "slowest_us": _quantiles([r["slowest_us"] for r in rs]),
            "share_slowest_ge_50us": round(sum(r["slowest_us"] >= 50 for r in rs) / len(rs), 4),
            "share_fastest_ge_50us": round(sum(r["fastest_us"] >= 50 for r in rs) / len(rs), 4),
            "winning_strategies": dict(
                Counter(s for r in rs for s in r["fastest_strategies"]).most_common(12)
            ),
            "rel_iqr_max_median": statistics.median(r["rel_iqr_max"] for r in rs),
        }
    fam = defaultdict(list)
    for r in rows:
        fam[r["family"]].append(r["spread"])
    report["median_spread_by_family"] = {
        f: round(statistics.median(v), 2) for f, v in sorted(fam.items())
    }
    if a.results:
        report["result_statuses"], report["failures"] = failures(a.results)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(report, indent=1) + "\n")
    plot(rows, a.plot)
    print(
        f"{'kind':12s} {'tasks':>6s} {'spread p10':>10s} {'median':>7s} {'p90':>7s} "
        f"{'>=1.2x':>7s} {'slowest>=50us':>14s} {'fastest>=50us':>14s}"
    )
    for kind in sorted(by_kind):
        k = report[kind]
        s = k["spread"]
        print(
            f"{kind:12s} {s['n']:6d} {s['p10']:10.2f} {s['median']:7.2f} {s['p90']:7.2f} "
            f"{k['share_spread_ge_1.2']:7.3f} {k['share_slowest_ge_50us']:14.3f} "
            f"{k['share_fastest_ge_50us']:14.3f}"
        )
    print(f"wrote {a.out} and {a.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
