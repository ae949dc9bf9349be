"""PyTorch→CUDA fault recovery: 100 candidates, 10 of them faulty at random positions.

Faults (tests/execute/torch_catalog.py): 3 illegal addresses (a wild write, a null read, a
misaligned write), a device-side assert, a hanging kernel, a host segfault, a huge
allocation, a stdout flood, a fork and a file write. Passes when every result is recorded,
every faulty candidate ends with an allowed status, every honest one is `ok`, none is lost.

Resumable: results are appended to `<work>/results.jsonl` as they finish and a rerun with
the same --seed and --work evaluates only what is missing (Ctrl-C keeps what is done).

    python bench/eval_torch_faults.py --out bench/results/eval_torch_faults_h200.json
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

from eval_c2cuda_common import header

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "execute"))
import torch_catalog  # noqa: E402

from cudaperf.execute import Candidate, EvalConfig, evaluate_batch  # noqa: E402


def jobs(seed: int, n: int) -> list[tuple[str, Candidate, tuple[str, ...]]]:
    """(kind, candidate, allowed statuses) in batch order: faults at seeded random places."""
    faults = sorted(torch_catalog.FAULTS)
    honest = n - len(faults)
    out = [
        ("honest", Candidate(code=torch_catalog.honest(i), id=f"honest{i}"), ("ok",))
        for i in range(honest)
    ]
    where = sorted(random.Random(seed).sample(range(n), len(faults)))
    for pos, name in zip(where, random.Random(seed + 1).sample(faults, len(faults)), strict=True):
        code, allowed = torch_catalog.FAULTS[name]
        out.insert(pos, (name, Candidate(code=code, id=name), allowed))
    return out


def summary(plan, recorded: dict[str, dict]) -> dict:
    rows = []
    for pos, (kind, cand, allowed) in enumerate(plan):
        r = recorded.get(cand.id)
        status = r["status"] if r else None
        rows.append(
            {
                "position": pos,
                "id": cand.id,
                "kind": kind,
                "allowed": list(allowed),
                "status": status,
                "right": status in allowed,
                "feedback": (r["feedback"][:1] if r else []),
                "wall_s": r["wall_s"] if r else None,
            }
        )
    faulty = [r for r in rows if r["kind"] != "honest"]
    honest = [r for r in rows if r["kind"] == "honest"]
    return {
        "results": rows,
        "candidates": len(rows),
        "faulty_total": len(faulty),
        "faulty_right_status": sum(r["right"] for r in faulty),
        "correct_total": len(honest),
        "correct_ok": sum(r["status"] == "ok" for r in honest),
        "lost": sum(r["status"] is None for r in rows),
    }


def table(doc: dict) -> str:
    lines = [f"{'candidate':20s} {'pos':>4s} {'status':14s} allowed / first feedback"]
    for r in doc["results"]:
        if r["kind"] != "honest" or not r["right"]:
            fb = (r["feedback"] or [""])[0][:70]
            mark = "ok " if r["right"] else "BAD"
            lines.append(
                f"{mark} {r['id']:16s} {r['position']:4d} {r['status'] or 'LOST':14s} "
                f"{'/'.join(r['allowed'])}  {fb}"
            )
    lines.append(
        f"faulty right {doc['faulty_right_status']}/{doc['faulty_total']}, correct ok "
        f"{doc['correct_ok']}/{doc['correct_total']}, lost {doc['lost']}"
    )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100, help="candidates in all (10 of them faulty)")
    ap.add_argument("--seed", type=int, default=0, help="where the faults go")
    ap.add_argument("--timeout", type=float, default=30.0, help="run_timeout_s per candidate")
    ap.add_argument(
        "--work",
        default="~/.cache/cudaperf/bench_torch_faults",
        help="build cache and results.jsonl (reruns resume from it)",
    )
    ap.add_argument("--out", default="bench/results/eval_torch_faults.json")
    a = ap.parse_args()
    if a.n <= len(torch_catalog.FAULTS):
        sys.exit(f"--n {a.n} leaves no honest candidate; use more than {len(torch_catalog.FAULTS)}")
    work = Path(a.work).expanduser() / f"seed{a.seed}-n{a.n}"
    work.mkdir(parents=True, exist_ok=True)
    cfg = EvalConfig(
        cache_dir=work / "cache",
        run_timeout_s=a.timeout,
        trials=30,
        warmup=3,
        compile_baseline=False,
        baseline_timeout_s=120,
    )
    plan = jobs(a.seed, a.n)
    task = torch_catalog.affine_relu_task()
    jsonl = work / "results.jsonl"
    t0 = time.perf_counter()
    done = 0
    try:
        for r in evaluate_batch([(task, c) for _, c, _ in plan], cfg, out=jsonl):
            done += 1
            print(
                f"[{done}/{len(plan)}] {r.candidate_id:18s} {r.status.value:14s} "
                f"{(r.feedback or [''])[0][:60]}",
                flush=True,
            )
    except KeyboardInterrupt:
        print(f"interrupted after {done} results; rerun to resume ({jsonl})", file=sys.stderr)
    recorded = {}
    if jsonl.exists():
        for line in jsonl.read_text().splitlines():
            rec = json.loads(line)
            recorded[rec["candidate_id"]] = rec
    doc = summary(plan, recorded)
    doc["wall_s"] = round(time.perf_counter() - t0, 1)
    doc["run_timeout_s"] = a.timeout
    doc["passed"] = (
        doc["lost"] == 0
        and doc["faulty_right_status"] == doc["faulty_total"]
        and doc["correct_ok"] == doc["correct_total"]
    )
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(header(cfg) | doc, indent=2) + "\n")
    print(table(doc))
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
