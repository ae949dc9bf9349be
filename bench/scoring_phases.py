"""Where a `bench run`'s scoring time goes, from its own records (issue #42's 5-minute goal).

For each committed run folder: the chunks' scoring seconds (`timing.jsonl`), against the
evaluator's per-candidate phases (`ExecResult.phases` in `trajectories.jsonl(.gz)`): nvcc
(`compile`, which runs on every CPU at once) and the GPU worker's own (`draw`, `start`, `copy`,
`call`, `compare`, `time`, `trace`, `baseline`: one candidate after another on a worker), the
candidates that hit the run timeout (their seconds are the timeout's, no phase recorded), and
what is left: per-task work outside any candidate's phases (inputs and C references drawn for
a task, baselines timed, the analysis, the ranker, the feedback). Prints a table, writes JSON.

    python bench/scoring_phases.py bench/results/ablation/bench/*/ablation/*/* \\
        --out bench/results/bench/scoring_phases.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from cudaperf.jsonl import complete_lines, read_text  # noqa: E402
from cudaperf.report.run import read_timing, trajectory_file  # noqa: E402

WORKER = ("draw", "start", "copy", "call", "compare", "time", "trace", "baseline", "run", "wait")


def _records(run: Path) -> list[dict] | None:
    """The run's trajectory records as dicts (`report.run.trajectory_file`: plain or packed)."""
    path = trajectory_file(run)
    if not path.is_file():
        return None
    return [json.loads(line) for line in complete_lines(read_text(path)) if line]


def phases_of(run: Path) -> dict | None:
    """The scoring breakdown of one run folder; None when it is not a finished-enough run."""
    recs = _records(run)
    chunks = read_timing(run / "timing.jsonl")
    if recs is None or not chunks:
        return None
    score_s = sum(c.get("score_s", 0.0) for c in chunks)
    statuses: Counter = Counter()
    phases: Counter = Counter()
    timeouts, timeout_s, candidates = 0, 0.0, 0
    for rec in recs:
        if rec.get("type") != "turn":
            continue
        for s in rec.get("samples", []):
            r = s.get("result")
            statuses[r["status"] if r else "format_error"] += 1
            if not r:
                continue
            candidates += 1
            for k, v in (r.get("phases") or {}).items():
                phases[k] += v
            if r["status"] == "timeout":
                timeouts += 1
                timeout_s += r.get("wall_s") or 0.0
    tasks = len({rec["task_id"] for rec in recs if rec.get("type") == "turn"})
    timed = sum(c.get("tasks", 0) for c in chunks if c.get("complete"))
    compile_s = phases.pop("compile", 0.0)
    worker_s = sum(phases[k] for k in WORKER if k in phases)
    return {
        "run": str(run),
        "chunks": len(chunks),
        "score_s": round(score_s, 1),
        "generate_s": round(sum(c.get("generate_s", 0.0) for c in chunks), 1),
        "candidates": candidates,
        "statuses": dict(statuses.most_common()),
        "compile_s_sum": round(compile_s, 1),
        "compile_s_per_candidate": round(compile_s / candidates, 3) if candidates else None,
        "worker_s_sum": round(worker_s, 1),
        "worker_phases": {k: round(v, 1) for k, v in sorted(phases.items())},
        "timeouts": timeouts,
        "timeout_s": round(timeout_s, 1),
        # the scorer's own clocks (timing.jsonl since session 47): of score_s, the
        # evaluator's, the analysis' and the ranker's seconds; None where a chunk lacks them
        "scorer_clocks": {
            k: round(sum(c[k] for c in chunks), 1) for k in ("evaluate_s", "analyse_s", "rank_s")
        }
        if all("evaluate_s" in c for c in chunks)
        else None,
        "tasks": tasks,
        "timed_tasks": timed,  # tasks of the chunks timing.jsonl recorded as complete
        # per-task work outside the phases; None where timing.jsonl misses chunks (a run
        # begun before it was written) and the scoring seconds are not all there
        "outside_phases_s": round(score_s - worker_s - timeout_s, 1) if timed >= tasks else None,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path, help="`bench run` folders")
    ap.add_argument("--out", type=Path, required=True, help="JSON file to write")
    a = ap.parse_args(argv)
    if a.out.suffix != ".json":
        raise SystemExit(f"--out {a.out}: give a .json file")
    rows = [r for r in map(phases_of, a.runs) if r is not None]
    if not rows:
        raise SystemExit("no `bench run` folder among the arguments (timing.jsonl + trajectories)")
    doc = {
        "what": "where bench runs' scoring time goes (bench/scoring_phases.py; issue #42)",
        "written": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": "python bench/scoring_phases.py "  # the folders read (a glob's others
        + " ".join(r["run"] for r in rows)  # are left out: log files, folders of no run)
        + f" --out {a.out}",
        "note": "compile runs on every CPU at once, so its sum is not wall time; worker phases "
        "run one candidate after another on each GPU worker; outside_phases_s = score_s - "
        "worker_s_sum - timeout_s (per-task preparation, baselines, analysis, ranker, feedback)",
        "runs": rows,
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(doc, indent=1) + "\n")
    head = (
        f"{'run':<44} {'cands':>5} {'score':>6} {'nvcc/c':>6} {'worker':>6} {'t/o':>6} {'rest':>6}"
    )
    print(head)
    for r in rows:
        name = "/".join(Path(r["run"]).parts[-4:])[-44:]
        print(
            f"{name:<44} {r['candidates']:>5} {r['score_s']:>6.0f} "
            f"{r['compile_s_per_candidate'] or 0:>6.2f} {r['worker_s_sum']:>6.0f} "
            f"{r['timeout_s']:>6.0f} "
            + (
                f"{r['outside_phases_s']:>6.0f}"
                if r["outside_phases_s"] is not None
                else f"  n/a (timing.jsonl has {r['timed_tasks']} of {r['tasks']} tasks)"
            )
        )
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
