"""How long the C→CUDA output comparison takes on large outputs: `_errors` (sliced) against
`_errors_whole` (the comparison before 2026-12-05; since session 22 the slices run in up to
8 threads), on correct float32 outputs of 1, 16 and 64 M elements (the dataset's C→CUDA
tasks' largest configs hold 16-67 M elements, and every config's output is compared up to
three times per candidate). Prints a table and writes JSON (`--out`; by default
`compare_speed.json` here, never a committed result).

    python bench/compare_speed.py --out bench/results/compare_speed_cpu_threads.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # its sibling, when loaded as a module
from eval_c2cuda_common import header  # noqa: E402

from cudaperf.execute.c.reference import _errors, _errors_whole  # noqa: E402
from cudaperf.execute.config import EvalConfig  # noqa: E402


def _best(fn, g, w, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn(g, w, 1e-5, 1e-5)
        times.append(time.perf_counter() - t)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--out", default="compare_speed.json", help="the JSON (never a committed one by default)"
    )
    ap.add_argument("--sizes", default="1,16,64", help="millions of elements")
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    rows = []
    print(f"{'elements':>10} {'whole s':>9} {'sliced s':>9} {'speedup':>8}")
    for m in (int(x) for x in a.sizes.split(",")):
        w = rng.standard_normal(m << 20).astype(np.float32)
        g = w + np.float32(1e-7) * w
        assert _errors(g, w, 1e-5, 1e-5)[:2] == _errors_whole(g, w, 1e-5, 1e-5)[:2]
        whole = _best(_errors_whole, g, w, a.repeats)
        sliced = _best(_errors, g, w, a.repeats)
        rows.append({"elements": m << 20, "whole_s": whole, "sliced_s": sliced})
        print(f"{m << 20:>10} {whole:>9.4f} {sliced:>9.4f} {whole / sliced:>7.2f}x", flush=True)
    doc = {
        "what": "C→CUDA output comparison, correct float32 output, best of --repeats",
        "rows": rows,
        **header(EvalConfig()),  # GPU (none here), versions (numpy too), date, CPU cores
        "command": "python bench/compare_speed.py "
        + " ".join(sys.argv[1:] if argv is None else argv),
    }
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(doc, indent=2) + "\n")
    print(f"-> {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
