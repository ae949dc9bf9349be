"""Seconds the reward scorer spends on structural analysis of a bench run's candidates: one
after another (`StructureAnalyzer`, what `bench run` did before session 47) against one
`prefetch` of each chunk in a process pool (`PooledAnalyzer`, every command's scorer since).

Reads the candidates of a committed run's `trajectories.jsonl(.gz)` (their code, in chunks of
`--chunk` tasks as `bench run` scores them), analyses them both ways with the default
`AnalyzeConfig` (ptxas on), checks the reports are the same, prints a short table and writes
a JSON file. CPU only (ptxas from nvcc; no GPU).

    python bench/analysis_pool.py \\
        bench/results/ablation/bench/abl_unified_s1/ablation/heldout/grpo \\
        --out bench/results/analysis_pool_cpu.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from cudaperf.jsonl import complete_lines, read_text  # noqa: E402
from cudaperf.report.run import trajectory_file  # noqa: E402
from cudaperf.reward.analyzers import PooledAnalyzer, StructureAnalyzer  # noqa: E402
from cudaperf.toolchain import host_cpu  # noqa: E402


def chunks_of(run: Path, chunk: int, limit: int | None) -> list[list[str]]:
    """The run's turn-1 candidate codes, grouped by `chunk` tasks in the run's task order."""
    path = trajectory_file(run)
    if not path.is_file():
        raise SystemExit(f"{run}: no trajectories.jsonl(.gz); give a `bench run` folder")
    by_task: dict[str, list[str]] = {}
    for line in complete_lines(read_text(path)):
        rec = json.loads(line) if line else {}
        if rec.get("type") != "turn" or rec.get("turn") != 1:
            continue
        codes = [s["code"] for s in rec["samples"] if s.get("code")]
        by_task.setdefault(rec["task_id"], []).extend(codes)
    tasks = list(by_task)[:limit] if limit else list(by_task)
    return [
        [c for t in tasks[i : i + chunk] for c in by_task[t]] for i in range(0, len(tasks), chunk)
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path, help="a `bench run` folder")
    ap.add_argument("--chunk", type=int, default=16, help="tasks per scored batch (bench's 16)")
    ap.add_argument("--limit", type=int, default=None, help="only the first N tasks")
    ap.add_argument("--workers", type=int, default=None, help="pool size (default: CPUs / 2)")
    ap.add_argument("--out", type=Path, required=True, help="JSON file to write")
    a = ap.parse_args(argv)
    if a.out.suffix != ".json":
        raise SystemExit(f"--out {a.out}: give a .json file")
    chunks = chunks_of(a.run, a.chunk, a.limit)
    codes = [c for ch in chunks for c in ch]
    if not codes:
        raise SystemExit(f"{a.run}: no candidate code in its turn-1 samples")
    serial = StructureAnalyzer()
    t = time.perf_counter()
    one_by_one = [serial.analyse(c) for c in codes]
    serial_s = time.perf_counter() - t
    pooled = PooledAnalyzer(workers=a.workers)
    try:
        t = time.perf_counter()
        got = []
        for ch in chunks:  # as the scorer does: one prefetch per batch, then each code a hit
            pooled.prefetch(ch)
            got += [pooled.analyse(c) for c in ch]
        pooled_s = time.perf_counter() - t
    finally:
        pooled.close()
    same = got == one_by_one
    doc = {
        "what": "structural analysis of a bench run's turn-1 candidates: serial vs pooled",
        "command": "python bench/analysis_pool.py "
        + " ".join(sys.argv[1:] if argv is None else argv),
        "written": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "host": {"cpus": os.cpu_count(), "cpu": host_cpu()},
        "run": str(a.run),
        "candidates": len(codes),
        "chunks": len(chunks),
        "workers": pooled.workers,
        "serial_s": round(serial_s, 2),
        "pooled_s": round(pooled_s, 2),
        "serial_s_per_candidate": round(serial_s / len(codes), 4),
        "speedup": round(serial_s / pooled_s, 2),
        "same_reports": same,
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{'analysis':<10} {'seconds':>8} {'per candidate':>14}")
    print(f"{'serial':<10} {serial_s:>8.1f} {serial_s / len(codes):>14.3f}")
    print(f"{'pooled':<10} {pooled_s:>8.1f} {pooled_s / len(codes):>14.3f}")
    print(
        f"{len(codes)} candidates in {len(chunks)} chunk(s), {pooled.workers} worker(s): "
        f"{serial_s / pooled_s:.2f}x; reports {'the same' if same else 'DIFFER'}; wrote {a.out}"
    )
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
