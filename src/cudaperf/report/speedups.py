"""Speedup reports over saved evaluation results: a summary table and a distribution plot.

Reads the JSONL that `cudaperf eval --out` writes (one ExecResult per line) as plain JSON, so
reports work on any machine, with or without the evaluator's dependencies.
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

from cudaperf.execute.types import SPEEDUPS
from cudaperf.tasks.measurements import read_results

__all__ = ["BASELINES", "load_results", "plot_speedups", "summarise"]

# Baseline name -> how plots label it; the fields come from execute.types.SPEEDUPS.
_LABELS = {
    "cpu": "vs serial C (CPU)",
    "naive": "vs the task's naive kernel",
    "eager": "vs eager PyTorch",
    "compile": "vs torch.compile",
}
assert set(_LABELS) == set(SPEEDUPS), "a label per execute.types.SPEEDUPS baseline"
# Speedup fields of an ExecResult (in SPEEDUPS' order) and how plots label them.
BASELINES = {field: _LABELS[b] for b, (field, _) in SPEEDUPS.items()}


def load_results(path: str | Path) -> list[dict]:
    """The results of a JSONL file; a bad line raises ValueError naming it."""
    return read_results(path)


def _geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def summarise(rows: list[dict]) -> dict:
    """Status counts, geomean speedups of correct results, and fast_p per baseline.

    `fast_<p>_<baseline>` is KernelBench's fast_p: the share of *all* results that are correct
    and more than p× faster than that baseline (a result whose task has no such baseline, e.g.
    the CPU baseline of a PyTorch task, counts as not fast).
    """
    n = len(rows)
    ok = [r for r in rows if r.get("status") == "ok"]
    out: dict = {
        "results": n,
        "statuses": dict(Counter(r.get("status", "?") for r in rows)),
        "correct_fraction": round(len(ok) / n, 4) if n else 0.0,
    }
    for key in BASELINES:
        vals = [r[key] for r in ok if r.get(key)]
        out[f"geomean_{key}"] = _geomean(vals)
        out[f"fast_1_{key}"] = round(sum(v > 1 for v in vals) / n, 4) if n else 0.0
        out[f"fast_2_{key}"] = round(sum(v > 2 for v in vals) / n, 4) if n else 0.0
    return out


def plot_speedups(rows: list[dict], out: str | Path, title: str = "") -> list[str]:
    """Histogram of log2 speedups of correct results against each baseline present; a PNG.

    Returns the baselines that were plotted (none: no correct, timed result).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = [r for r in rows if r.get("status") == "ok"]
    present = [k for k in BASELINES if any(r.get(k) for r in ok)]
    if not present:
        return []
    fig, axes = plt.subplots(1, len(present), figsize=(4.2 * len(present), 3.4), squeeze=False)
    for ax, key in zip(axes[0], present, strict=True):
        vals = [math.log2(r[key]) for r in ok if r.get(key)]
        ax.hist(vals, bins=min(30, max(5, len(vals) // 2)), color="#4c72b0", edgecolor="white")
        ax.axvline(0, color="black", lw=1)
        g = _geomean([r[key] for r in ok if r.get(key)])
        ax.set_title(f"{BASELINES[key]}\n(n={len(vals)}, geomean {g:.2f}×)", fontsize=9)
        ax.set_xlabel("log2 speedup (right of 0 = faster)")
        ax.set_ylabel("candidates")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return present
