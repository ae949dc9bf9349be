"""Throughput of the C→CUDA evaluator: candidates per minute with full checks.

Three passes over the same N distinct candidates (saxpy and row-sum variants, every config
checked, `--trials` timed trials per config):
  cold       fresh build cache: compile + check + time (the number the goal is about)
  warm_build builds cached, result cache off: the GPU path alone
  compile    compile-only into a fresh cache: the nvcc pool alone
Per-candidate compile seconds and worker seconds are recorded by wrapping the two steps.

    python bench/eval_c2cuda_throughput.py --n 120 --out bench/results/eval_c2cuda_throughput.json
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from eval_c2cuda_common import catalog, header, write

import cudaperf.execute.pool as pool
from cudaperf.execute import Candidate, EvalConfig, Status, evaluate_batch
from cudaperf.execute.evaluator import Evaluator

STEPS: dict[str, list[float]] = {"compile_s": [], "worker_s": []}


def _timed(fn, key):
    def wrap(*a, **k):
        t0 = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            STEPS[key].append(time.perf_counter() - t0)

    return wrap


pool.run_prepared = _timed(pool.run_prepared, "worker_s")
Evaluator.prepare = _timed(Evaluator.prepare, "compile_s")


def jobs(n: int):
    sax = catalog.saxpy_task(sizes=(1 << 20, 1 << 24), held_out=12345)
    row = catalog.rowsum_task(((1024, 1024), (4096, 4096)))
    out = []
    for i in range(n):
        if i % 2 == 0:
            out.append((sax, Candidate(code=catalog.good_saxpy(i), id=f"saxpy{i}")))
        else:
            code = catalog.ROWSUM_WARP + f"// v{i}\n"
            out.append((row, Candidate(code=code, id=f"rowsum{i}")))
    return out


def _mean(xs: list[float]) -> float | None:
    return round(statistics.mean(xs), 3) if xs else None


def run_pass(name: str, js, cfg: EvalConfig) -> dict:
    for v in STEPS.values():
        v.clear()
    t0 = time.perf_counter()
    results = list(evaluate_batch(js, cfg))
    wall = time.perf_counter() - t0
    counts: dict[str, int] = {}
    for r in results:
        counts[r.status.value] = counts.get(r.status.value, 0) + 1
    doc = {
        "pass": name,
        "candidates": len(results),
        "wall_s": round(wall, 2),
        "candidates_per_min": round(len(results) / wall * 60, 1),
        "statuses": counts,
        "compile_s_mean": _mean(STEPS["compile_s"]),
        "compile_s_sum": round(sum(STEPS["compile_s"]), 1),
        "worker_s_mean": _mean(STEPS["worker_s"]),
        "worker_s_sum": round(sum(STEPS["worker_s"]), 1),
    }
    ok = [r for r in results if r.status is Status.OK]
    if ok:
        doc["trials_min"] = min(c.timing.trials for r in ok for c in r.configs if c.timing)
        gpu_us = [
            sum(c.timing.median_us * c.timing.trials for c in r.configs if c.timing) for r in ok
        ]
        doc["timed_gpu_us_per_candidate_mean"] = round(statistics.mean(gpu_us), 1)
    print(doc, flush=True)
    return doc


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=120)
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--out", default="bench/results/eval_c2cuda_throughput.json")
    a = ap.parse_args()
    js = jobs(a.n)
    base = Path(tempfile.mkdtemp(prefix="cudaperf-bench-"))
    cfg = EvalConfig(cache_dir=base / "cache", trials=a.trials, use_result_cache=False)
    passes = [run_pass("cold", js, cfg), run_pass("warm_build", js, cfg)]
    cc = EvalConfig(cache_dir=base / "compile", compile_only=True, use_result_cache=False)
    passes.append(run_pass("compile", js, cc))
    doc = {"bench": "eval_c2cuda_throughput", "trials": a.trials, "passes": passes}
    write(a.out, header(cfg) | doc)


if __name__ == "__main__":
    main()
