"""Do the dataset's own kernels pass their task's tolerance at the task's large sizes? (CPU only)

A task's tolerance (`datagen.base.tolerance_for`) grows with the length of the sums an output
combines. Where a family's generator under-estimated that length, an honest kernel that sums in
another order than the serial C reference fails on a few of millions of elements, and only
sometimes (it depends on the drawn inputs): on the H100 (2026-12-05) the fastest
implementation of `spmv_csr/00036` failed 2 of 4 salts by 3e-14 relative against a tolerance
of 2.6e-14 (`bench/results/gpu_h100_2026-12-05/`); `cudaperf data measure` had dropped 20 such
implementations from the dataset (data/README.md).

Each implementation of the chosen tasks runs in the CPU emulator of the CUDA execution model
(`tests/datagen/emulator.py`: blocks one after another, so atomics add in another order than
the reference; fast intrinsics compute the IEEE result, so rounding of the GPU's math library
is not covered), on the config `--config` (default large) of the task, for `--salts` input
draws of the task's own distribution and of the signed one, and is compared with the C
reference by `execute.c.reference.compare`, under the tolerance in the task file and under the
one the generator gives now (`datagen.build.regenerate`). One JSON line per implementation
(resumable), a summary JSON, a table per family.

    PYTHONPATH=. python bench/tolerance_emulated.py --families spmv_csr,softmax_rows \\
        --limit 8 --out bench/results/tolerance_emulated.json
"""

from __future__ import annotations

import argparse
import ctypes
import datetime as dt
import json
import sys
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.datagen: the emulator and its runner

SALT0 = 20261205  # fixed salts: a tolerance rule, not a secret, is measured


def _check(args: tuple) -> dict:
    """One implementation of one task: its outcome per draw under both tolerances."""
    task_json, impl_id, cfg_name, salts, now_tol, timeout = args
    from cudaperf.execute.build import build_reference
    from cudaperf.execute.c.reference import compare, run_reference
    from cudaperf.execute.config import EvalConfig
    from cudaperf.tasks.inputs import make_inputs
    from cudaperf.tasks.model import Task, Tolerance
    from tests.datagen import emulator
    from tests.datagen.families.c2cuda.test_c_emulated import emulate

    task = Task.model_validate_json(task_json)
    now = task.model_copy(update={"tolerance": Tolerance.model_validate(now_tol)})
    cfg = next(c for c in task.configs if c.name == cfg_name)
    row = {"task": task.id, "family": task.family, "impl": impl_id, "config": cfg_name}
    built = build_reference(task, EvalConfig(cache_dir=Path("/tmp/cudaperf-tolemu")))
    if not built.ok:
        return row | {"error": "reference does not build"}
    im = next(i for i in task.implementations if i.id == impl_id)
    try:
        so = emulator.build(im.code, "-O2")
    except emulator.EmulatorBuildError as e:
        return row | {"error": f"cannot emulate: {str(e)[-200:]}"}
    ref, draws = ctypes.CDLL(built.lib), []
    for salt in salts:
        for signed in (False, True):
            inputs = make_inputs(task, cfg, 0, salt, separating=signed)
            want = run_reference(task, ref, inputs)
            got, why = emulate(task, so, inputs, timeout)
            if got is None:
                draws.append({"salt": salt, "signed": signed, "error": why[:300]})
                if why.startswith("timeout"):  # the other draws would take as long
                    return row | {"draws": draws}
                continue
            was, is_ = (compare(t, inputs, got, want, signed=signed) for t in (task, now))
            draws.append(
                {
                    "salt": salt,
                    "signed": signed,
                    "file_ok": was.correct,
                    "now_ok": is_.correct,
                    "max_abs_err": was.max_abs_err,
                    "max_rel_err": was.max_rel_err,
                    "message": "" if was.correct else was.message[:300],
                }
            )
    return row | {
        "file_tolerance": task.tolerance.model_dump(),
        "now_tolerance": now.tolerance.model_dump(),
        "draws": draws,
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=Path, default=ROOT / "data/tasks.jsonl.gz")
    ap.add_argument("--families", default="spmv_csr,softmax_rows", help="comma-separated")
    ap.add_argument("--limit", type=int, default=8, help="tasks per family (first by id)")
    ap.add_argument("--config", default="large")
    ap.add_argument("--salts", type=int, default=1, help="input draws per implementation")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per emulated call")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", type=Path, required=True, help="summary JSON (rows: .jsonl beside)")
    a = ap.parse_args(argv)
    if not a.tasks.is_file():
        sys.exit(f"--tasks {a.tasks}: no such file")
    if a.limit < 1 or a.salts < 1 or a.jobs < 1:
        sys.exit("--limit, --salts and --jobs: use >= 1")
    from cudaperf.datagen.build import regenerate
    from cudaperf.tasks.io import load_tasks

    fams = [f.strip() for f in a.families.split(",") if f.strip()]
    tasks = [t for t in load_tasks(a.tasks) if t.family in fams]
    picked = []
    for f in fams:
        mine = sorted((t for t in tasks if t.family == f), key=lambda t: t.id)[: a.limit]
        if not mine:
            sys.exit(f"--families: no task of {f} in {a.tasks}")
        picked += mine
    rows_path = a.out.with_suffix(".jsonl")
    done = set()
    if rows_path.is_file():
        for line in rows_path.read_text().splitlines():
            r = json.loads(line)
            done.add((r["task"], r["impl"]))
    salts = [SALT0 + k for k in range(a.salts)]
    jobs = []
    for t in picked:
        new = regenerate(t)
        if new is None:
            sys.exit(f"{t.id}: not a task the generator draws")
        for im in t.implementations:
            if (t.id, im.id) not in done:
                jobs.append(
                    (
                        t.model_dump_json(),
                        im.id,
                        a.config,
                        salts,
                        new.tolerance.model_dump(),
                        a.timeout,
                    )
                )
    print(f"{len(jobs)} implementations to emulate ({len(done)} done before)", flush=True)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    try:
        with ProcessPoolExecutor(a.jobs) as ex, rows_path.open("a") as f:
            for k, row in enumerate(ex.map(_check, jobs), 1):
                f.write(json.dumps(row) + "\n")
                f.flush()
                draws = row.get("draws", [])
                why = row.get("error") or next((d["error"] for d in draws if "error" in d), "")
                bad = [d for d in draws if not d.get("file_ok", True)]
                said = f"not emulated: {why[:80]}" if why else "ok"
                said = "FAILS its file tolerance" if bad else said
                print(f"[{k}/{len(jobs)}] {row['task']} {row['impl']}: {said}", flush=True)
    except KeyboardInterrupt:
        print("interrupted: the rows done are kept; run again to resume", flush=True)
    rows = [json.loads(x) for x in rows_path.read_text().splitlines()]
    summary: dict = defaultdict(lambda: defaultdict(int))
    for r in rows:
        s = summary[r["family"]]
        s["implementations"] += 1
        draws = r.get("draws", [])
        if r.get("error") or any("error" in d for d in draws):
            s["not_emulated"] += 1
            continue
        s["fail_file_tolerance"] += any(not d["file_ok"] for d in draws)
        s["fail_now_tolerance"] += any(not d["now_ok"] for d in draws)
    doc = {
        "date": dt.date.today().isoformat(),
        "command": "python " + " ".join(sys.argv),
        "tasks_file": str(a.tasks),
        "config": a.config,
        "salts": salts,
        "families": {k: dict(v) for k, v in summary.items()},
        "seconds": round(time.time() - t0, 1),
    }
    a.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{'family':<16} {'impls':>6} {'fail (file)':>12} {'fail (now)':>11} {'not run':>8}")
    for fam, s in doc["families"].items():
        print(
            f"{fam:<16} {s['implementations']:>6} {s.get('fail_file_tolerance', 0):>12} "
            f"{s.get('fail_now_tolerance', 0):>11} {s.get('not_emulated', 0):>8}"
        )
    print(f"-> {a.out}")


if __name__ == "__main__":
    main()
