"""Timing repeatability: the same 20 kernels timed in two separate runs (fresh workers).

Reports per kernel and config the relative difference of the two medians, and how many of
the timings of >= 50 us are within 2%.

    python bench/eval_c2cuda_repeatability.py --out bench/results/eval_c2cuda_repeatability.json
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from eval_c2cuda_common import catalog, header, write

from cudaperf.execute import Candidate, EvalConfig, LocalBackend, evaluate_batch


def kernels():
    sax = catalog.saxpy_task(sizes=(1 << 25,), held_out=1 << 16)
    row = catalog.rowsum_task(((16384, 4096),))
    out = [(sax, Candidate(code=catalog.good_saxpy(i * 5), id=f"saxpy{i}")) for i in range(12)]
    out += [
        (row, Candidate(code=catalog.ROWSUM_WARP + f"// v{i}\n", id=f"warp{i}")) for i in range(4)
    ]
    out += [
        (row, Candidate(code=catalog.ROWSUM_NAIVE + f"// v{i}\n", id=f"naive{i}")) for i in range(4)
    ]
    return out


def one_run(js, cfg) -> dict:
    backend = LocalBackend(cfg)  # a fresh worker process per run
    try:
        res = list(evaluate_batch(js, cfg, backend=backend))
    finally:
        backend.close()
    return {
        (r.candidate_id, c.config): c.timing.median_us
        for r in res
        for c in r.configs
        if c.timing is not None
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="bench/results/eval_c2cuda_repeatability.json")
    a = ap.parse_args()
    cfg = EvalConfig(cache_dir=Path(tempfile.mkdtemp()) / "c", use_result_cache=False)
    js = kernels()
    r1, r2 = one_run(js, cfg), one_run(js, cfg)
    rows = []
    for key in sorted(set(r1) & set(r2)):
        m1, m2 = r1[key], r2[key]
        rows.append(
            {
                "kernel": key[0],
                "config": key[1],
                "median_us_run1": round(m1, 2),
                "median_us_run2": round(m2, 2),
                "rel_diff": round(abs(m1 - m2) / min(m1, m2), 4),
            }
        )
    big = [r for r in rows if min(r["median_us_run1"], r["median_us_run2"]) >= 50]
    summary = {
        "timings": len(rows),
        "timings_ge_50us": len(big),
        "within_2pct_ge_50us": sum(r["rel_diff"] <= 0.02 for r in big),
        "max_rel_diff_ge_50us": max((r["rel_diff"] for r in big), default=None),
        "median_rel_diff_ge_50us": sorted(r["rel_diff"] for r in big)[len(big) // 2]
        if big
        else None,
        "max_rel_diff_all": max((r["rel_diff"] for r in rows), default=None),
    }
    write(a.out, header(cfg) | {"bench": "eval_repeatability", "summary": summary, "rows": rows})


if __name__ == "__main__":
    main()
