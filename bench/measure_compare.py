"""Compare `cudaperf data measure` runs of one sample: statuses and times, pair by pair.

    python bench/measure_compare.py DIR [--out FILE.json]

DIR holds `measure_<run>.jsonl` from `bench/measure_before_after.sh` (runs `after`, `before`,
`after2`, `before2`; a `warm` run is left out). For each pair of runs: rows in both (task,
implementation), statuses that differ, and per config the ratio of median event times (second
run over first: geomean, median, 5th/95th percentile of the ratios, and the share within 10%),
for all rows and per task kind (the kind named in the task id, gen/<kind>/...: the C->CUDA and
PyTorch->CUDA paths time differently and are noisy differently). Pairs of one tree (`after` vs
`after2`) are the noise floor: `before` vs `after` is "the same within noise" when its spread
is no wider than that. Prints a table; writes everything to --out (default DIR/compare.json).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path


def load(path: Path) -> dict[tuple[str, str], dict]:
    """The last row of each (task, implementation) in a results file."""
    rows: dict[tuple[str, str], dict] = {}
    for line in path.read_text().splitlines():
        try:
            r = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut by a stopped run
        rows[(r.get("task_id"), r.get("candidate_id"))] = r
    return rows


def times(row: dict) -> dict[str, float]:
    out = {}
    for c in row.get("configs") or []:
        t = (c.get("timing") or {}).get("median_us")
        if t and t > 0:
            out[c["config"]] = float(t)
    return out


def _pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def kind_of(task_id: str) -> str:
    """The task kind named in a dataset id (gen/c2cuda/..., gen/torch2cuda/...), else "other"."""
    parts = str(task_id).split("/")
    return next((p for p in parts if p in ("c2cuda", "torch2cuda")), "other")


def compare(a: dict, b: dict, by_kind: bool = True) -> dict:
    both = sorted(set(a) & set(b))
    differ = [
        {"task": k[0], "impl": k[1], "a": a[k].get("status"), "b": b[k].get("status")}
        for k in both
        if a[k].get("status") != b[k].get("status")
    ]
    ratios = []
    for k in both:
        ta, tb = times(a[k]), times(b[k])
        ratios += [tb[c] / ta[c] for c in ta.keys() & tb.keys()]
    out = {
        "pairs": len(both),
        "only_a": len(set(a) - set(b)),
        "only_b": len(set(b) - set(a)),
        "status_differs": differ,
        "timed_configs": len(ratios),
    }
    if ratios:
        out |= {
            "time_ratio_geomean": math.exp(statistics.fmean(math.log(r) for r in ratios)),
            "time_ratio_median": statistics.median(ratios),
            "time_ratio_p05": _pct(ratios, 0.05),
            "time_ratio_p95": _pct(ratios, 0.95),
            "within_10pct": sum(0.9 <= r <= 1.1 for r in ratios) / len(ratios),
        }
    kinds = sorted({kind_of(k[0]) for k in both})
    if by_kind and len(kinds) > 1:
        out["by_kind"] = {
            kind: compare(
                {k: v for k, v in a.items() if kind_of(k[0]) == kind},
                {k: v for k, v in b.items() if kind_of(k[0]) == kind},
                by_kind=False,
            )
            for kind in kinds
        }
    return out


def _grouped(comps: dict) -> list[tuple[str, dict]]:
    """Table lines: each pair, then its per-kind comparisons indented under it."""
    out = []
    for name, c in comps.items():
        out.append((name, c))
        out += [(f"  {kind}", kc) for kind, kc in (c.get("by_kind") or {}).items()]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    runs = {
        p.stem.removeprefix("measure_"): load(p) for p in sorted(args.dir.glob("measure_*.jsonl"))
    }
    if len(runs) < 2:
        print(
            f"measure_compare: {args.dir} has {len(runs)} measure_*.jsonl files; need two or "
            "more (run bench/measure_before_after.sh)",
            file=sys.stderr,
        )
        return 2
    runs.pop("warm", None)  # fills the build caches; compared with nothing
    known = [r for r in ("after", "before", "after2", "before2") if r in runs]
    order = known + sorted(set(runs) - set(known))
    pairs = [(x, y) for i, x in enumerate(order) for y in order[i + 1 :]]
    comps = {f"{x} vs {y}": compare(runs[x], runs[y]) for x, y in pairs}
    result = {"runs": {k: len(v) for k, v in runs.items()}, "comparisons": comps}
    head = ("pair", "rows", "status≠", "configs", "geomean", "p05", "p95", "±10%")
    print("{:<20} {:>5} {:>8} {:>8} {:>8} {:>6} {:>6} {:>6}".format(*head))
    for name, c in _grouped(comps):
        g = c.get("time_ratio_geomean")
        cols = ("-", "-", "-", "-")
        if g:
            cols = (
                f"{g:.3f}",
                f"{c['time_ratio_p05']:.2f}",
                f"{c['time_ratio_p95']:.2f}",
                f"{c['within_10pct']:.0%}",
            )
        row = (name, c["pairs"], len(c["status_differs"]), c["timed_configs"], *cols)
        print("{:<20} {:>5} {:>8} {:>8} {:>8} {:>6} {:>6} {:>6}".format(*row))
    out = args.out or args.dir / "compare.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
