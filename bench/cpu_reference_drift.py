"""How far the serial C reference moved between two `cudaperf bench run`s of the same tasks.

    python bench/cpu_reference_drift.py RUN_A RUN_B [--out FILE.json]

A correct sample that has both speedups gives `speedup_vs_cpu / speedup_vs_naive`, which is
the task's C-reference time over its naive-kernel time (the candidate's own time cancels). Per
task this is the mean over its samples; between the runs, the ratio B / A for each task both
have. The script prints how many tasks, the geometric mean of the ratios and their range.

On one GPU kind, the naive kernel's time is the GPU's. A geometric mean away from 1 then says
the C reference ran slower or faster: another host CPU, or another load on it. When it is far
from 1, the two runs' speedups against `cpu` compare hosts, not kernels. Session 34 measured
1.16 (0.56 to 2.0 per task) between two leases' runs on H100s. See the README of
bench/results/ablation/bench/abl_unified_s0/.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from cudaperf.refine.trajectory import TurnRecord  # noqa: E402
from cudaperf.report.run import read_run  # noqa: E402


def _turns(run_dir: Path) -> list[TurnRecord]:
    return [r for r in read_run(run_dir).records if isinstance(r, TurnRecord)]


def cpu_over_naive(turns: list[TurnRecord]) -> dict[str, float]:
    """Task id -> mean over its samples of (C-reference time / naive-kernel time), from the
    samples whose result has both speedups."""
    got: dict[str, list[float]] = {}
    for rec in turns:
        for s in rec.samples:
            r = s.result
            if r is not None and r.speedup_vs_cpu and r.speedup_vs_naive:
                got.setdefault(rec.task_id, []).append(r.speedup_vs_cpu / r.speedup_vs_naive)
    return {t: sum(v) / len(v) for t, v in got.items()}


def reward_baselines(turns: list[TurnRecord]) -> dict[str, int]:
    """How many samples' reward speed term was measured against each baseline (`reward.baseline`;
    samples without a speed term left out): how much the C reference reaches the scores."""
    got: dict[str, int] = {}
    for rec in turns:
        for s in rec.samples:
            if s.reward is not None and s.reward.baseline:
                got[s.reward.baseline] = got.get(s.reward.baseline, 0) + 1
    return dict(sorted(got.items()))


def drift(a: Path, b: Path) -> dict:
    """The per-task ratios B / A and their summary (`tasks` 0 when no task has both)."""
    ta, tb = _turns(a), _turns(b)  # each run read once
    ra, rb = cpu_over_naive(ta), cpu_over_naive(tb)
    ratios = {t: rb[t] / ra[t] for t in sorted(ra.keys() & rb.keys())}
    out: dict = {"runs": [str(a), str(b)], "tasks": len(ratios)}
    out["reward_baselines"] = [reward_baselines(ta), reward_baselines(tb)]
    if ratios:
        logs = [math.log(x) for x in ratios.values()]
        out |= {
            "geomean_ratio": round(math.exp(sum(logs) / len(logs)), 4),
            "min_ratio": round(min(ratios.values()), 4),
            "max_ratio": round(max(ratios.values()), 4),
            "per_task": {t: round(x, 4) for t, x in ratios.items()},
        }
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_a", type=Path, help="a `cudaperf bench run` folder")
    ap.add_argument("run_b", type=Path, help="another run of the same tasks")
    ap.add_argument("--out", type=Path, help="write the result as JSON here")
    args = ap.parse_args(argv)
    try:
        d = drift(args.run_a, args.run_b)
    except (OSError, ValueError) as e:
        print(f"cpu_reference_drift: {e}", file=sys.stderr)
        return 2
    if not d["tasks"]:
        print("no task has a correct sample with both speedups in both runs: nothing to compare")
        return 1
    print(
        f"{d['tasks']} tasks: C-reference time per naive-kernel time, run B / run A: "
        f"geomean {d['geomean_ratio']:.3f} (per task {d['min_ratio']:.2f} to {d['max_ratio']:.2f})"
    )
    for name, counts in zip(("A", "B"), d["reward_baselines"], strict=True):
        shown = ", ".join(f"{k} {n}" for k, n in counts.items()) or "none"
        print(f"run {name}: samples whose reward speed term used each baseline: {shown}")
    if args.out:
        args.out.write_text(json.dumps(d, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
