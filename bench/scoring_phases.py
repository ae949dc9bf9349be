"""Where a `bench run`'s scoring time goes, from its own records (issue #42's 5-minute goal).

For each committed run folder, from `report.summary.run_time` (the run's `time` entry): the
chunks' scoring seconds (`timing.jsonl`) against the evaluator's per-phase seconds of the
finished tasks' evaluations (each evaluation once: samples of a task with the same candidate
share one, a result-cache hit took none): nvcc (`compile`, which runs on every CPU at once)
and the GPU worker's own phases (`draw`, `start`, `copy`, `call`, `compare`, `time`, `trace`,
`baseline`, ...: one candidate after another on a worker). Beside them the candidates that hit
the run timeout (their seconds are the timeout's, no phase recorded), and what is left:
per-task work outside any candidate's phases (inputs and C references drawn for a task,
baselines timed, the analysis, the ranker, the feedback); since session 47 the chunks also
split their scoring by the scorer's own clocks (`scoring_split_s`). Prints a table, writes
JSON.

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

from cudaperf.refine.trajectory import TurnRecord  # noqa: E402
from cudaperf.report.run import read_run  # noqa: E402
from cudaperf.report.summary import run_time  # noqa: E402


def phases_of(folder: Path) -> dict | None:
    """The scoring breakdown of one run folder; None when it is not a timed `bench run`."""
    try:
        run = read_run(folder)
    except ValueError:  # not a run folder (a log file a glob also matched)
        return None
    t = run_time(run)
    if "wall_s" not in t:  # a run older than timing.jsonl
        return None
    statuses: Counter = Counter()
    timeouts, timeout_s = 0, 0.0
    for rec in run.records:
        for s in rec.samples if isinstance(rec, TurnRecord) else ():
            statuses[s.result.status.value if s.result else "format_error"] += 1
            if s.result is not None and s.result.status.value == "timeout":
                timeouts += 1
                timeout_s += s.result.wall_s
    phases = dict(t.get("evaluator_phases_s", {}))
    compile_s = phases.pop("compile", 0.0)
    worker_s = sum(phases.values())  # every phase but nvcc's is the GPU worker's
    n = t.get("evaluations", 0)
    timed_all = t["tasks_timed"] >= t["tasks_finished"]
    return {
        "run": str(folder),
        "chunks": t["chunks"],
        "score_s": t["score_s"],
        "generate_s": t["generate_s"],
        "evaluations": n,
        "statuses": dict(statuses.most_common()),
        "compile_s_sum": round(compile_s, 1),
        "compile_s_per_evaluation": round(compile_s / n, 3) if n else None,
        "worker_s_sum": round(worker_s, 1),
        "worker_phases": {k: round(v, 1) for k, v in sorted(phases.items())},
        "timeouts": timeouts,
        "timeout_s": round(timeout_s, 1),
        # of score_s: the evaluator's, the analysis' and the ranker's seconds (timing.jsonl
        # since session 47); None where a chunk lacks them
        "scorer_clocks": t.get("scoring_split_s"),
        "tasks": t["tasks_finished"],
        "timed_tasks": t["tasks_timed"],  # tasks of the chunks timing.jsonl recorded complete
        # per-task work outside the phases; None where timing.jsonl misses chunks (a run
        # begun before it was written) and the scoring seconds are not all there
        "outside_phases_s": round(t["score_s"] - worker_s - timeout_s, 1) if timed_all else None,
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
        raise SystemExit("no timed `bench run` folder among the arguments (run.json, timing.jsonl)")
    doc = {
        "what": "where bench runs' scoring time goes (bench/scoring_phases.py; issue #42)",
        "written": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": "python bench/scoring_phases.py "  # the folders read (a glob's others
        + " ".join(r["run"] for r in rows)  # are left out: log files, folders of no run)
        + f" --out {a.out}",
        "note": "compile runs on every CPU at once, so its sum is not wall time; worker phases "
        "run one candidate after another on each GPU worker; each evaluation counted once; "
        "outside_phases_s = score_s - worker_s_sum - timeout_s (per-task preparation, "
        "baselines, analysis, ranker, feedback)",
        "runs": rows,
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(
        f"{'run':<44} {'evals':>5} {'score':>6} {'nvcc/e':>6} {'worker':>6} {'t/o':>6} {'rest':>6}"
    )
    for r in rows:
        name = "/".join(Path(r["run"]).parts[-4:])[-44:]
        rest = (
            f"{r['outside_phases_s']:>6.0f}"
            if r["outside_phases_s"] is not None
            else f"  n/a (timing.jsonl has {r['timed_tasks']} of {r['tasks']} tasks)"
        )
        print(
            f"{name:<44} {r['evaluations']:>5} {r['score_s']:>6.0f} "
            f"{r['compile_s_per_evaluation'] or 0:>6.2f} {r['worker_s_sum']:>6.0f} "
            f"{r['timeout_s']:>6.0f} {rest}"
        )
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
