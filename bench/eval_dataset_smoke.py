"""Does every family of the dataset evaluate? A smoke test of the evaluator on real sizes (GPU).

For every family of `data/tasks.jsonl.gz` (both kinds): one task drawn by a fixed seed, and
the family's task whose largest config needs the most memory (C→CUDA: the call segment,
`c_proc.segment_bytes`; PyTorch→CUDA: the bytes of `get_inputs()`, shapes read on torch's
meta device). Each task's naive implementation and its fastest (lowest geomean of its stored
H200 medians) run through `EvalSession`, the evaluator training and `cudaperf bench` use, on
every config (the largest and the held-out ones included). Passed: every job ends `ok` with
a measured time on every config.

Imported suites: `--kernelbench DIR` (a KernelBench checkout) adds level 1's problems that
have a hand-written native candidate (`bench/kernelbench_candidates`).

Families go to the evaluator in batches of `--batch-families` (compiles, reference draws and
GPU jobs of a batch's families overlap; the evaluator runs every task's naive implementation
first, so a family's row can only end after its batch's naive jobs: small batches keep rows
coming while a call can still be cut), and the JSON is rewritten as soon as a family's last
job ends (`--out`); a rerun skips the families it already holds (`--fresh` starts over; a
file from another evaluator fingerprint is refused), so a cut call resumes. Each row keeps a
digest of what it evaluated (its tasks less their stored measurements, and its candidates'
code): a family whose tasks changed in the data since (a tolerance regenerated, say) is run
again, and `--redo FAMILIES` runs named families again. `--seed-from FILE`
starts a new `--out` from FILE's families (the committed result, say) when FILE was measured at
this evaluator with the same seed. Ctrl-C stops after the job in flight.

    python bench/eval_dataset_smoke.py --out bench/results/eval_dataset_smoke_h200.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import math
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # its sibling, when loaded as a module
from eval_c2cuda_common import ROOT, header  # noqa: E402

from cudaperf.execute import Candidate, EvalConfig  # noqa: E402
from cudaperf.execute.api import evaluate_batch, naive_implementation  # noqa: E402
from cudaperf.execute.c.proc import segment_bytes  # noqa: E402
from cudaperf.execute.session import EvalSession, training_config  # noqa: E402
from cudaperf.execute.types import sum_phases  # noqa: E402
from cudaperf.tasks.io import load_tasks  # noqa: E402
from cudaperf.tasks.model import Task, TaskKind  # noqa: E402

MIB = 1 << 20
GPU = "NVIDIA H200"


_BYTES: dict[tuple[str, str], int] = {}


def task_bytes(task: Task) -> int:
    """Bytes the task's largest config moves into one call (see the module doc)."""
    key = (task.id, task.source)
    if key not in _BYTES:
        if task.kind is TaskKind.C2CUDA:
            _BYTES[key] = max(segment_bytes(task, c) for c in task.configs)
        else:
            _BYTES[key] = max(_torch_input_bytes(task, c.sizes) for c in task.configs)
    return _BYTES[key]


def _torch_input_bytes(task: Task, sizes: dict) -> int:
    try:
        import torch

        from cudaperf.tasks.pymodule import exec_with_sizes

        mod = exec_with_sizes(task.source, sizes, "smoke_task")
        with torch.device("meta"):
            ins = mod.get_inputs()
        return sum(t.numel() * t.element_size() for t in ins if isinstance(t, torch.Tensor))
    except Exception:  # noqa: BLE001 - no torch, or a module meta tensors cannot run: a proxy
        return 4 * math.prod(int(v) for v in sizes.values() if isinstance(v, int) and v > 0)


def _ranked(task: Task, gpu: str) -> list:
    """Implementations measured on every config on `gpu`, fastest first (geomean of medians)."""
    names = {c.name for c in task.configs}
    out = []
    for impl in task.implementations:
        by = {m.config: m.median_us for m in impl.measurements if m.gpu == gpu}
        if set(by) >= names and all(by[n] > 0 for n in names):
            out.append((math.exp(sum(math.log(by[n]) for n in names) / len(names)), impl.id, impl))
    return [impl for _, _, impl in sorted(out, key=lambda x: x[:2])]


def fastest_implementation(task: Task, gpu: str = GPU) -> Candidate | None:
    """The implementation with the lowest geomean of its stored `gpu` medians over every
    config (only implementations measured on all of them)."""
    ranked = _ranked(task, gpu)
    return Candidate(code=ranked[0].code, id=ranked[0].id) if ranked else None


def naive_or_slowest(task: Task, gpu: str = GPU) -> Candidate | None:
    """The naive implementation (`api.naive_implementation`, the speedup baseline); where the
    task has none (its naive one did not verify), the slowest measured implementation."""
    naive = naive_implementation(task)
    if naive is not None:
        return naive
    ranked = _ranked(task, gpu)
    return Candidate(code=ranked[-1].code, id=ranked[-1].id) if ranked else None


def pick(tasks: list[Task], seed: int) -> dict[str, list[Task]]:
    """Family -> [the seed's task, the largest task] (one task when they coincide)."""
    fams: dict[str, list[Task]] = {}
    for t in sorted(tasks, key=lambda t: t.id):
        fams.setdefault(t.family, []).append(t)
    out = {}
    for fam, ts in sorted(fams.items()):
        drawn = random.Random(f"{seed}:{fam}").choice(ts)
        largest = max(ts, key=lambda t: (task_bytes(t), t.id))
        out[fam] = [drawn] if drawn.id == largest.id else [drawn, largest]
    return out


def _status(results: list) -> str:
    """One status for several results: ok when all are, else the first other one."""
    return next((r.status.value for r in results if not r.ok), "ok")


def _timed_ok(res) -> bool:
    return res.ok and bool(res.configs) and all(c.timing is not None for c in res.configs)


def family_jobs(tasks: list[Task]) -> tuple[list[tuple[Task, Candidate]], list[str]]:
    """The family's jobs (each task's naive, then its fastest implementation) and their roles."""
    jobs, roles = [], []
    for t in tasks:
        for role, cand in (("naive", naive_or_slowest(t)), ("fastest", fastest_implementation(t))):
            if cand is None:
                continue
            jobs.append((t, cand))
            roles.append(role)
    return jobs, roles


def family_digest(tasks: list[Task], jobs: list | None = None) -> str:
    """What a family's row evaluated: its tasks as the evaluator sees them (implementations
    and their stored measurements left out: a new measurement changes no verdict) and the code
    of the candidates it runs, `jobs` (default: `family_jobs(tasks)`; a measurement that makes
    another implementation the fastest does change them); a row whose digest differs from the
    data's is stale."""
    h = hashlib.sha256()
    for t in tasks:
        spec = t.model_dump(mode="json", exclude={"implementations"})
        h.update(json.dumps(spec, sort_keys=True).encode())
    for _, c in family_jobs(tasks)[0] if jobs is None else jobs:
        h.update(c.hash.encode())
    return h.hexdigest()[:16]


def stale_families(doc: dict, chosen: dict[str, list[Task]], redo: set[str]) -> list[str]:
    """Families `doc` holds that must run again: named in `redo`, or whose row's digest differs
    from the data's (rows from before digests were kept are trusted as they are)."""
    out = []
    for fam, row in doc["families"].items():
        if fam not in chosen:
            continue
        was = row.get("tasks_digest")
        if fam in redo or (was is not None and was != family_digest(chosen[fam])):
            out.append(fam)
    return out


def family_row(tasks: list[Task], jobs: list, roles: list[str], results: list, wall_s: float):
    """The family's row from its jobs' results (in job order)."""
    by_role: dict[str, list] = {"naive": [], "fastest": []}
    for role, res in zip(roles, results, strict=True):
        by_role[role].append(res)
    failures = [
        {
            "task": r.task_id,
            "candidate": r.candidate_id,
            "status": r.status.value,
            "feedback": r.feedback[:2],
        }
        for r in results
        if not _timed_ok(r)
    ]
    per_task = {len(by_role["naive"]), len(by_role["fastest"])}
    shares = [r.device_share for r in results if r.device_share is not None]
    return {
        "kind": tasks[0].kind.value,
        "tasks": [t.id for t in tasks],
        "tasks_digest": family_digest(tasks, jobs),  # the candidates that ran
        "implementations": [[t.id, c.id] for t, c in jobs],
        "naive": _status(by_role["naive"]) if by_role["naive"] else "missing",
        "fastest": _status(by_role["fastest"]) if by_role["fastest"] else "missing",
        "configs_ok": sum(1 for r in results for c in r.configs if c.correct and c.timing),
        "configs": sum(len(t.configs) for t, _ in jobs),
        "max_segment_mib": round(max(task_bytes(t) for t in tasks) / MIB, 1),
        "jobs": len(jobs),
        # C→CUDA: the least share of a traced call the GPU worked (None: no trace ran); the
        # host-fallback check rejects below EvalConfig.min_device_share
        "min_device_share": round(min(shares), 4) if shares else None,
        "passed": per_task == {len(tasks)} and not failures,
        "failures": failures,
        "wall_s": round(wall_s, 1),
        "phases_s": sum_phases(r.phases for r in results),  # where its evaluation time went
    }


def stream_rows(chosen: dict[str, list[Task]], todo: list[str], evaluate, on_row) -> None:
    """Every job of the `todo` families in one batch, so that compiles, reference draws and
    GPU jobs of different families overlap; `evaluate(jobs)` yields each job's result as it
    ends (`evaluate_batch`), and `on_row(family, row)` gets a family's row as soon as its
    last result is in (`wall_s`: seconds from the start of the batch until then)."""
    plan = {fam: family_jobs(chosen[fam]) for fam in todo}
    owner: dict[tuple[str, str], list[tuple[str, int]]] = {}
    jobs = []
    for fam in todo:
        for k, (t, c) in enumerate(plan[fam][0]):
            owner.setdefault((t.id, c.hash), []).append((fam, k))
            jobs.append((t, c))
    got = {fam: [None] * len(plan[fam][0]) for fam in todo}
    left = {fam: len(plan[fam][0]) for fam in todo}
    t0 = time.perf_counter()
    for fam in todo:
        if not left[fam]:  # no implementation to run: its row says so at once
            on_row(fam, family_row(chosen[fam], [], [], [], 0.0))
    for res in evaluate(jobs):
        fam, k = owner[(res.task_id, res.candidate_hash)].pop(0)
        got[fam][k] = res
        left[fam] -= 1
        if not left[fam]:
            on_row(fam, family_row(chosen[fam], *plan[fam], got[fam], time.perf_counter() - t0))


def _config(preset: str, gpus: tuple[int, ...] | None) -> EvalConfig:
    if preset == "training":
        return training_config(gpus=gpus)
    return EvalConfig(gpus=gpus)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(ROOT / "data" / "tasks.jsonl.gz"))
    ap.add_argument("--out", default="bench/results/eval_dataset_smoke.json")
    ap.add_argument("--seed", type=int, default=0, help="draws one task per family")
    ap.add_argument("--families", default="", help="comma-separated subset (default: all)")
    ap.add_argument(
        "--preset",
        choices=("training", "report"),
        default="training",
        help="evaluator settings: training's (as GRPO) or EvalConfig defaults (bench)",
    )
    ap.add_argument("--kernelbench", default="", help="a KernelBench checkout (level 1)")
    ap.add_argument("--fresh", action="store_true", help="ignore families already in --out")
    ap.add_argument(
        "--redo", default="", help="comma-separated families to run again though --out has them"
    )
    ap.add_argument(
        "--seed-from",
        default="",
        help="a new --out starts with this file's families when it was measured at this "
        "evaluator (e.g. the committed result), else from none",
    )
    ap.add_argument(
        "--batch-families", type=int, default=6, help="families evaluated together (>= 1)"
    )
    a = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    try:
        tasks = load_tasks(a.data)
    except (OSError, ValueError) as e:
        print(f"error: {a.data}: {e}; pass --data PATH to a task file", file=sys.stderr)
        return 2
    chosen = pick(tasks, a.seed)
    if a.families:
        want = set(a.families.split(","))
        unknown = want - set(chosen)
        if unknown:
            print(
                f"error: unknown families {sorted(unknown)}; see the dataset card", file=sys.stderr
            )
            return 2
        chosen = {f: ts for f, ts in chosen.items() if f in want}
    redo = set(filter(None, a.redo.split(",")))
    if redo - set(chosen):
        print(
            f"error: --redo {sorted(redo - set(chosen))}: not among the families run",
            file=sys.stderr,
        )
        return 2
    out = Path(a.out)
    doc = {"families": {}}
    if out.exists() and not a.fresh:
        doc = json.loads(out.read_text())
    cfg = _config(a.preset, None)
    head = header(cfg)
    if a.seed_from and not doc["families"] and not a.fresh:
        doc = _seeded(Path(a.seed_from), head["versions"]["cudaperf"], a.seed, doc)
    was = doc.get("versions", {}).get("cudaperf")
    if doc["families"] and was != head["versions"]["cudaperf"]:
        print(
            f"error: {out} was measured with cudaperf {was}, this is "
            f"{head['versions']['cudaperf']} (another evaluator); pass --fresh to start over "
            "or --out another file",
            file=sys.stderr,
        )
        return 2
    doc.update(head, preset=a.preset, seed=a.seed, data=str(a.data))
    for fam in stale_families(doc, chosen, redo):
        why = "named in --redo" if fam in redo else "its tasks changed in the data"
        print(f"{fam}: run again ({why})", flush=True)
        del doc["families"][fam]
    todo = [f for f in chosen if f not in doc["families"]]
    session = EvalSession(cfg)
    try:
        if session.mode != "full":
            print(
                "error: no GPU here: the smoke test needs one (nothing is timed)", file=sys.stderr
            )
            return 2

        def on_row(fam: str, row: dict) -> None:
            doc["families"][fam] = row
            _finish(doc, out, len(chosen))
            print(
                f"[{len(doc['families'])}/{len(chosen)}] {fam:28s} naive={row['naive']:13s} "
                f"fastest={row['fastest']:13s} configs {row['configs_ok']}/{row['configs']} "
                f"max {row['max_segment_mib']} MiB, at {row['wall_s']} s; {_top(row)}",
                flush=True,
            )

        step = max(1, a.batch_families)
        for k in range(0, len(todo), step):
            stream_rows(
                chosen,
                todo[k : k + step],
                lambda jobs: evaluate_batch(jobs, cfg, backend=session.backend),
                on_row,
            )
        if a.kernelbench:
            doc["suites"] = {"kernelbench_level1": kernelbench_rows(a.kernelbench, session)}
        else:
            doc.setdefault("suites", {"kernelbench_level1": "not run: no checkout (--kernelbench)"})
        _finish(doc, out, len(chosen))
    except KeyboardInterrupt:
        print(f"interrupted: {len(doc['families'])} families kept in {out}; rerun to resume")
        return 130
    finally:
        session.close()
    print(f"passed: {doc['passed']} ({doc['families_passed']}/{len(chosen)} families) -> {out}")
    return 0 if doc["passed"] else 1


def _top(row: dict, n: int = 3) -> str:
    """The row's `n` largest evaluation phases, e.g. "call 3.2 s, copy 1.1 s, draw 0.9 s"."""
    top = sorted(row.get("phases_s", {}).items(), key=lambda kv: -kv[1])[:n]
    return ", ".join(f"{k} {v:.1f} s" for k, v in top) or "no phases"


def _seeded(path: Path, version: str, seed: int, empty: dict) -> dict:
    """`path`'s document when it holds families measured by `version` with the same seed (a
    cut run resumed from its committed copy); else `empty`, with a line saying why."""
    try:
        doc = json.loads(path.read_text())
        was = doc.get("versions", {}).get("cudaperf")
    except (OSError, ValueError, AttributeError) as e:
        print(f"--seed-from {path}: not read ({e}); starting from no family", flush=True)
        return empty
    if was != version or doc.get("seed") != seed or not doc.get("families"):
        why = f"cudaperf {was}, seed {doc.get('seed')}" if doc.get("families") else "no family"
        print(f"--seed-from {path}: {why}, this is {version}, seed {seed}; starting from no family")
        return empty
    print(f"--seed-from {path}: {len(doc['families'])} families measured at {version} kept")
    return doc


def _finish(doc: dict, out: Path, n_families: int) -> None:
    rows = doc["families"].values()
    doc["families_passed"] = sum(1 for r in rows if r["passed"])
    kinds = sorted({r.get("kind", "?") for r in rows})  # every family's phases, per kind of task
    doc["phases_s"] = {
        kind: sum_phases(r.get("phases_s", {}) for r in rows if r.get("kind", "?") == kind)
        for kind in kinds
    }
    suites = doc.get("suites", {}).get("kernelbench_level1")
    suite_ok = not isinstance(suites, dict) or suites.get("passed", False)
    doc["passed"] = len(doc["families"]) == n_families and all(r["passed"] for r in rows)
    doc["passed"] = doc["passed"] and suite_ok
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n")
    tmp.replace(out)


def kernelbench_rows(path: str, session: EvalSession) -> dict:
    """KernelBench level 1 problems with a native candidate in bench/kernelbench_candidates."""
    from cudaperf.tasks.importers.kernelbench import import_kernelbench

    index = json.loads((ROOT / "bench/kernelbench_candidates/index.json").read_text())
    native = {e["problem"]: e["native"] for e in index if e["level"] == 1}
    tasks = import_kernelbench(path, levels=(1,)).tasks
    jobs = []
    for t in tasks:
        name = t.id.rsplit("/", 1)[-1]
        rel = native.get(name) or native.get(name + ".py")
        if rel:
            code = (ROOT / "bench/kernelbench_candidates" / rel).read_text()
            jobs.append((t, Candidate(code=code, id=name)))
    results = session(jobs) if jobs else []
    bad = [
        {"task": r.task_id, "status": r.status.value, "feedback": r.feedback[:2]}
        for r in results
        if not _timed_ok(r)
    ]
    return {
        "tasks": len(jobs),
        "ok": len(jobs) - len(bad),
        "failures": bad,
        "passed": bool(jobs) and not bad,
    }


if __name__ == "__main__":
    sys.exit(main())
