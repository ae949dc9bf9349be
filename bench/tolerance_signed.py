"""Does an honest float kernel pass the check on inputs that separate functions? (CPU only)

The evaluator checks every candidate a second time on signed, wider-range inputs
(`tasks.inputs.separating_distribution`), with the task's tolerance. That tolerance was made for
the task's own inputs: a relative bound that grows with sqrt(terms) "for a sum of same-sign
values". On signed inputs a sum cancels: an output near zero is the difference of large
partial sums, its rounding error is that of the partial sums, and a bound relative to the
output itself is far too tight there. A correct kernel then ends `wrong_output`, and an RL run
learns to avoid exactly the reductions it should learn to write.

Stand-in for an honest float kernel: the task's own C reference compiled with
`#define double float` after its includes (it accumulates in float, one term after another:
the largest rounding error a straightforward kernel has; GPU kernels that sum in trees or
with FMA err less). Tasks
whose reference has no `double` are skipped (the stand-in would be the reference itself).
For every C->CUDA task with float outputs and every visible config up to `--max-elements`
input elements, the stand-in's outputs are compared with the reference's on the task's own
inputs and on the separating inputs, by the rule `execute.inputs.compare` applies to each, and
by `compare` without `signed` (the per-element bound without the output-scale floor: the rule
before it). Prints a table
per family, writes one JSON line per task (resumable) and a summary JSON.

    python bench/tolerance_signed.py --tasks data/tasks.jsonl.gz \
        --out bench/results/tolerance_signed.json
"""

from __future__ import annotations

import argparse
import ctypes
import json
import re
import sys
import tempfile
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from cudaperf.execute import EvalConfig
from cudaperf.execute.build import build_reference
from cudaperf.execute.c.reference import compare, output_scale, reference_finite, run_reference
from cudaperf.tasks.inputs import make_inputs
from cudaperf.tasks.io import load_tasks
from cudaperf.tasks.model import Role, TaskKind

SALT = 20261202  # any fixed salt: the rule, not a secret, is measured here


def in_float(source: str) -> str:
    """The C source with `double` as `float`, defined after its #include lines (the headers'
    own `long double` must stay)."""
    lines = source.splitlines()
    last = max((i for i, ln in enumerate(lines) if ln.lstrip().startswith("#include")), default=-1)
    return "\n".join([*lines[: last + 1], "#define double float", *lines[last + 1 :]]) + "\n"


def one_task(task_json: str, max_elements: int) -> dict:
    from cudaperf.tasks.model import Task

    task = Task.model_validate_json(task_json)
    rec = {"id": task.id, "family": task.family, "configs": []}
    floats = [p for p in task.signature if p.role in (Role.OUT, Role.INOUT)]
    if not floats or not all(p.dtype == "float32" for p in floats):
        return rec | {"skipped": "outputs are not all float32"}
    if not re.search(r"\bdouble\b", task.source):
        return rec | {"skipped": "the reference has no double (the stand-in would be itself)"}
    with tempfile.TemporaryDirectory() as d:
        cfg = EvalConfig(cache_dir=Path(d))
        stand_in = task.model_copy(update={"source": in_float(task.source)})
        builds = [build_reference(t, cfg) for t in (task, stand_in)]
        if not all(b.ok for b in builds):
            return rec | {"skipped": "build failed"}
        ref, flt = (ctypes.CDLL(b.lib) for b in builds)
        for config in task.configs:
            if config.held_out:
                continue
            row = {"config": config.name}
            for label, sep in (("own", False), ("signed", True)):
                ins = make_inputs(task, config, 2 if sep else 0, SALT, separating=sep)
                n = sum(
                    a.size
                    for p, a in zip(task.signature, ins, strict=True)
                    if p.role is not Role.SCALAR
                )
                if n > max_elements:
                    row = {"config": config.name, "skipped": f"{n} elements"}
                    break
                want = run_reference(task, ref, ins)
                got = run_reference(task, flt, ins)
                if not reference_finite(task, want):
                    row[label] = "reference not finite"
                    continue
                row[label] = {
                    "pass": compare(task, ins, got, want, signed=sep).correct,
                    "pass_without_floor": compare(task, ins, got, want).correct,
                    "scale": max(
                        output_scale(w)
                        for p, w in zip(task.signature, want, strict=True)
                        if p.role in (Role.OUT, Role.INOUT)
                    ),
                }
            rec["configs"].append(row)
    return rec


def summarise(recs: list[dict]) -> dict:
    fams: dict[str, dict] = defaultdict(lambda: defaultdict(int))
    for r in recs:
        f = fams[r["family"]]
        cs = [c for c in r.get("configs", []) if isinstance(c.get("signed"), dict)]
        if r.get("skipped") or not cs:
            f["skipped"] += 1
            continue
        f["tasks"] += 1
        own_ok = all(c["own"]["pass"] for c in cs if isinstance(c.get("own"), dict))
        f["own_pass"] += own_ok
        f["signed_fail_before"] += own_ok and not all(c["signed"]["pass_without_floor"] for c in cs)
        f["signed_fail_now"] += own_ok and not all(c["signed"]["pass"] for c in cs)
    total = defaultdict(int)
    for f in fams.values():
        for k, v in f.items():
            total[k] += v
    return {"families": {k: dict(v) for k, v in sorted(fams.items())}, "total": dict(total)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", default="data/tasks.jsonl.gz")
    ap.add_argument("--out", required=True, help="summary JSON (per-task lines beside it, .jsonl)")
    ap.add_argument("--max-elements", type=int, default=3_000_000)
    ap.add_argument("--limit", type=int, default=0, help="first N tasks only (0: all)")
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    tasks = [t for t in load_tasks(a.tasks) if t.kind is TaskKind.C2CUDA]
    tasks = tasks[: a.limit] if a.limit else tasks
    out = Path(a.out)
    lines = out.with_suffix(".jsonl")
    done = {}
    if lines.exists():
        for line in lines.read_text().splitlines():
            r = json.loads(line)
            done[r["id"]] = r
    todo = [t for t in tasks if t.id not in done]
    print(f"{len(tasks)} C->CUDA tasks, {len(done)} done before, {len(todo)} to go", flush=True)
    t0 = time.perf_counter()
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        with lines.open("a") as f, ProcessPoolExecutor(a.workers) as pool:
            futs = [pool.submit(one_task, t.model_dump_json(), a.max_elements) for t in todo]
            for k, fut in enumerate(futs, 1):
                r = fut.result()
                done[r["id"]] = r
                f.write(json.dumps(r) + "\n")
                f.flush()
                if k % 50 == 0 or k == len(futs):
                    print(f"[{time.perf_counter() - t0:7.1f}s] {k}/{len(futs)}", flush=True)
    except KeyboardInterrupt:
        print(f"interrupted; rerun to resume ({lines})", file=sys.stderr)
        sys.exit(130)
    s = summarise([done[t.id] for t in tasks if t.id in done])
    s |= {
        "command": " ".join(["python", *sys.argv]),
        "salt": SALT,
        "max_elements": a.max_elements,
        "stand_in": "the C reference compiled with #define double float",
    }
    out.write_text(json.dumps(s, indent=1) + "\n")
    print(f"{'family':24s} tasks own_ok signed_fail_before signed_fail_now")
    for name, f in s["families"].items():
        if f.get("tasks"):
            print(
                f"{name:24s} {f['tasks']:5d} {f['own_pass']:6d} {f['signed_fail_before']:18d} "
                f"{f['signed_fail_now']:15d}"
            )
    t = s["total"]
    print(
        f"{'total':24s} {t.get('tasks', 0):5d} {t.get('own_pass', 0):6d} "
        f"{t.get('signed_fail_before', 0):18d} {t.get('signed_fail_now', 0):15d}"
    )
    print(f"wrote {out} and {lines}")


if __name__ == "__main__":
    main()
