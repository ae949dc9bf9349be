"""The ablation's evaluation subsets, fixed before any main run (PROTOCOL.md, session 20 note).

    python bench/ablation/subsets.py            # write bench/ablation/subsets.json (refuses
                                                # to replace a different one; --force does)
    python bench/ablation/subsets.py --check    # the code still draws exactly those tasks

Each subset is what `cudaperf bench run` draws with the arguments stored next to it
(`report.suites.select`: seeded-hash order, families round-robin). Writing the ids down fixes
them against later changes to the dataset or to `select`; `--check` (and its test) fails when
the same arguments no longer give the same tasks. Only training-family data and family names
are read: no measurement, and nothing about any model.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "bench" / "ablation" / "subsets.json"
MANIFEST = "bench/results/train_sft_h200/holdout.json"  # the shared SFT start's holdout
SUBSETS = {
    # primary (PROTOCOL.md, 2026-12-05): 60 unseen tasks of training families
    "train_unseen": {
        "suite": "train-unseen",
        "suite_path": MANIFEST,
        "kind": None,
        "limit": 60,
        "seed": 0,
    },
    # secondary: 60 C→CUDA tasks of the five C→CUDA test families
    "test_families": {
        "suite": "test-families",
        "suite_path": None,
        "kind": "c2cuda",
        "limit": 60,
        "seed": 0,
    },
}


def bench_args(s: dict) -> str:
    """The `cudaperf bench run` options that draw subset `s`."""
    parts = [f"--suite {s['suite']}"]
    if s["suite_path"]:
        parts.append(f"--suite-path {s['suite_path']}")
    if s["kind"]:
        parts.append(f"--kind {s['kind']}")
    return " ".join([*parts, f"--limit {s['limit']}", f"--seed {s['seed']}"])


def draw(root: Path = ROOT) -> dict:
    """{name: {"bench_args", "tasks": [ids in draw order], "families": {family: n}}}."""
    from cudaperf.report.suites import load_suite, select

    out = {}
    for name, s in SUBSETS.items():
        path = root / s["suite_path"] if s["suite_path"] else None
        suite = load_suite(s["suite"], path)
        pool = [t for t in suite.tasks if s["kind"] is None or t.kind.value == s["kind"]]
        chosen = select(pool, s["limit"], None, s["seed"])
        fams: dict[str, int] = {}
        for t in chosen:
            fams[t.family] = fams.get(t.family, 0) + 1
        out[name] = {
            "bench_args": bench_args(s),
            "tasks": [t.id for t in chosen],
            "families": dict(sorted(fams.items())),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with subsets.json, write nothing")
    ap.add_argument("--force", action="store_true", help="replace a subsets.json that differs")
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args(argv)
    drawn = draw()
    old = json.loads(a.out.read_text())["subsets"] if a.out.is_file() else None
    if a.check:
        if old != drawn:
            bad = [n for n in drawn if (old or {}).get(n) != drawn[n]]
            print(
                f"subsets: {', '.join(bad) or 'file missing'} no longer drawn as fixed in "
                f"{a.out}; the ablation's subsets must not move",
                file=sys.stderr,
            )
            return 1
        sizes = ", ".join(f"{n} {len(v['tasks'])} tasks" for n, v in drawn.items())
        print(f"subsets: {sizes} drawn as fixed")
        return 0
    if old is not None and old != drawn and not a.force:
        print(
            f"subsets: {a.out} holds other subsets; they were fixed before the runs "
            "(--force replaces them, and needs a dated note in PROTOCOL.md)",
            file=sys.stderr,
        )
        return 1
    doc = {
        "fixed": "2026-12-05, before any main run of the ablation (PROTOCOL.md)",
        "command": "python bench/ablation/subsets.py",
        "subsets": drawn,
    }
    a.out.write_text(json.dumps(doc, indent=1) + "\n")
    for n, v in drawn.items():
        print(f"{n}: {len(v['tasks'])} tasks, {len(v['families'])} families ({v['bench_args']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
