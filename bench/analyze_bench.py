"""Timing of cudaperf.analyze on the CPU: the tree-sitter/sympy part per kernel, and ptxas.

    python bench/analyze_bench.py [--out bench/results/analyze_cpu.json]

Per known-answer file (tests/analyze/kernels) and per sample-set implementation: the static
analysis (parse + all per-kernel analyses, resources off) with sympy's cache cleared before
each run, so each timing is a first analysis; and one uncached nvcc --cubin -Xptxas -v run.
Budgets (issue 5): < 50 ms per kernel static, < 1 s per ptxas run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from sympy.core.cache import clear_cache  # noqa: E402

from cudaperf.analyze import AnalyzeConfig, analyze  # noqa: E402
from cudaperf.analyze.parse import extract_cuda, strip_torch_host  # noqa: E402
from cudaperf.analyze.resources import _compile  # noqa: E402

STATIC = AnalyzeConfig(resources=False)


def files() -> list[Path]:
    own = sorted((ROOT / "tests" / "analyze" / "kernels").glob("*.cu"))
    sample = ROOT / "src" / "cudaperf" / "tasks" / "sample"
    impls = [
        p
        for p in sorted(sample.glob("*/*"))
        if p.suffix in (".cu", ".py") and p.stem != "reference"
    ]
    return own + impls


def time_static(src: str, reps: int) -> tuple[float, int]:
    """Median seconds per kernel of a first (cold-cache) static analysis."""
    times, n = [], 1
    for _ in range(reps):
        clear_cache()
        t = time.perf_counter()
        n = len(analyze(src, config=STATIC))
        times.append((time.perf_counter() - t) / n)
    return statistics.median(times), n


def time_ptxas(src: str) -> float:
    text = extract_cuda(src)
    code = strip_torch_host(text.code)
    t = time.perf_counter()
    _compile(code, "sm_90", "nvcc", 120)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "analyze_cpu.json")
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    analyze((ROOT / "tests/analyze/kernels/coalesced.cu").read_text(), config=STATIC)  # imports
    rows = []
    for f in files():
        src = f.read_text()
        static_s, n = time_static(src, args.reps)
        ptxas_s = time_ptxas(src)
        rows.append(
            {
                "file": str(f.relative_to(ROOT)),
                "kernels": n,
                "static_ms_per_kernel": round(static_s * 1e3, 2),
                "ptxas_s": round(ptxas_s, 3),
            }
        )
        print(
            f"{rows[-1]['file']:70s} {n} kernels  static {static_s * 1e3:6.1f} ms/kernel  "
            f"ptxas {ptxas_s:5.2f} s"
        )
    static = [r["static_ms_per_kernel"] for r in rows]
    ptxas = [r["ptxas_s"] for r in rows]
    summary = {
        "static_ms_per_kernel": {"median": statistics.median(static), "max": max(static)},
        "ptxas_s": {"median": statistics.median(ptxas), "max": max(ptxas)},
        "budget": {"static_ms_per_kernel": 50, "ptxas_s": 1.0},
    }
    nvcc = subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout
    out = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs",
        "python": platform.python_version(),
        "nvcc": nvcc.strip().splitlines()[-1] if nvcc else "",
        "command": "python bench/analyze_bench.py",
        "summary": summary,
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
