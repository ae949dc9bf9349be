"""Fault tolerance: 100 candidates, 10 of them faulty (one of each fault in the catalog).

Passes when every result is recorded in the JSONL, each faulty candidate has its expected
status, and every correct candidate is OK.

    python bench/eval_c2cuda_faults.py --out bench/results/eval_c2cuda_faults.json
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from eval_c2cuda_common import catalog, header, write

from cudaperf.execute import Candidate, EvalConfig, evaluate_batch


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--timeout", type=float, default=15.0)
    ap.add_argument("--out", default="bench/results/eval_c2cuda_faults.json")
    a = ap.parse_args()
    task = catalog.saxpy_task()
    names = sorted(catalog.FAULTS)
    js = [(task, Candidate(code=catalog.good_saxpy(i), id=f"good{i}")) for i in range(90)]
    for k, name in enumerate(names):  # spread the faults through the batch
        js.insert(9 * k + 5, (task, Candidate(code=catalog.FAULTS[name][0], id=name)))
    tmp = Path(tempfile.mkdtemp())
    cfg = EvalConfig(cache_dir=tmp / "c", run_timeout_s=a.timeout, use_result_cache=False)
    jsonl = tmp / "results.jsonl"
    t0 = time.perf_counter()
    results = list(evaluate_batch(js, cfg, out=jsonl))
    wall = time.perf_counter() - t0
    recorded = [json.loads(line) for line in jsonl.read_text().splitlines()]
    by_id = {r["candidate_id"]: r for r in recorded}
    faults = {
        n: {
            "expected": catalog.FAULTS[n][1],
            "got": by_id[n]["status"],
            "feedback": by_id[n]["feedback"][:1],
        }
        for n in names
        if n in by_id
    }
    good = [r for r in recorded if r["candidate_id"].startswith("good")]
    doc = {
        "bench": "eval_faults",
        "candidates": len(js),
        "results_yielded": len(results),
        "results_recorded": len(recorded),
        "faults_right_status": sum(f["expected"] == f["got"] for f in faults.values()),
        "faults": faults,
        "good_ok": sum(r["status"] == "ok" for r in good),
        "good_total": len(good),
        "wall_s": round(wall, 1),
        "run_timeout_s": a.timeout,
    }
    doc["passed"] = (
        doc["results_recorded"] == len(js)
        and doc["faults_right_status"] == len(names)
        and doc["good_ok"] == doc["good_total"]
    )
    write(a.out, header(cfg) | doc)


if __name__ == "__main__":
    main()
