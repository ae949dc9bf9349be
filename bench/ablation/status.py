"""Where the ablation stands, from committed files only: for each planned run (arm x seed, as
`PROTOCOL.md` fixes them) the steps trained, the newest checkpoint kept in git history, and
how far each `bench run` of its checkpoint got; the SFT start's bench runs beside them.

    python bench/ablation/status.py                       # the table
    python bench/ablation/status.py --out status.json --plot status.png

Read from `bench/results/ablation/<run>/steps.jsonl` (steps: the distinct `step` rows),
`git log` of `bench/results/ablation/weights/` (checkpoints, as `restore_weights.sh --list`
finds them) and `bench/results/ablation/bench/<run>/<mode>/<subset>/<name>/` (finished
tasks: the trajectory's summary records; selected: `run.json`'s tasks). Nothing is run.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from cudaperf.refine.trajectory import SummaryRecord, finished_tasks  # noqa: E402
from cudaperf.report.run import read_records, read_timing, trajectory_file  # noqa: E402
from cudaperf.train.curves import trained_steps  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
RESULTS = Path("bench/results/ablation")
ARMS = ("unified", "outcome_only")
SEEDS = (0, 1, 2)
STEPS = 60  # PROTOCOL.md, Training
TASKS = 60  # each fixed subset (bench/ablation/subsets.json)
START = "sft_pairs_s0"  # the shared SFT start (its bench runs are named `sft`)
# (bench_suite.sh mode folder, subset folder): turn-1 runs on both fixed subsets, then the
# 4-turn run on the primary subset
BENCHES = (("ablation", "train-unseen"), ("ablation", "heldout"), ("ablation-t4", "train-unseen"))
T4, TURNS4 = "ablation-t4", 4  # the 4-turn runs' mode folder and turns


def steps_trained(folder: Path) -> int:
    """Distinct steps in a training run's steps.jsonl (0 when it has none)."""
    return len(trained_steps(folder / "steps.jsonl"))


def checkpoints(root: Path) -> dict[str, int]:
    """Run name -> the newest checkpoint step committed under the weights folder (history)."""
    try:
        out = subprocess.run(
            [
                "git",
                "log",
                "--diff-filter=A",
                "--name-only",
                "--format=",
                "--",
                str(RESULTS / "weights"),
            ],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    best: dict[str, int] = {}
    for name in {p.split("/")[4] for p in out.split() if p.count("/") >= 5}:
        if m := re.fullmatch(r"(.+)_ckpt(\d+)", name):
            best[m.group(1)] = max(best.get(m.group(1), 0), int(m.group(2)))
    return best


def bench_progress(folder: Path) -> str:
    """ "finished/selected" tasks of a bench run folder, "-" when it was never started, "?"
    when its run.json or trajectory is not one `cudaperf bench run` wrote."""
    rj = folder / "run.json"
    if not rj.is_file():
        return "-"
    try:
        selected = len(json.loads(rj.read_text(encoding="utf-8"))["tasks"])
        finished = len(_finished(folder))
    except (ValueError, KeyError, TypeError):
        return "?"
    return f"{finished}/{selected}"


def finished_all(prog: str) -> bool:
    """Whether a `bench_progress` string says every selected task finished."""
    if prog in ("-", "?"):
        return False
    done, total = prog.split("/")
    return done == total


def _finished(folder: Path) -> set[str]:
    """The tasks with a summary record in the run's trajectory (plain, or packed)."""
    return finished_tasks(_records(folder))


def _records(folder: Path) -> list:
    """The trajectory's records (`trajectories.jsonl`, or its `.gz` once `cudaperf bench
    pack`ed), as `cudaperf bench report` reads them; ValueError for a file it did not write."""
    return read_records(trajectory_file(folder))


def board(root: Path) -> list[dict]:
    """One row per planned run and one for the shared start."""
    kept = checkpoints(root)
    rows = []
    for arm in ARMS:
        for seed in SEEDS:
            run = f"abl_{arm}_s{seed}"
            row = {"run": run, "arm": arm, "seed": seed}
            row["steps"] = steps_trained(root / RESULTS / run)
            row["checkpoint"] = kept.get(run)
            row["bench"] = _benches(root, run, "grpo")
            rows.append(row)
    start = {"run": START, "arm": "start", "seed": 0, "steps": None, "checkpoint": None}
    return [*rows, start | {"bench": _benches(root, START, "sft")}]


def _benches(root: Path, run: str, name: str) -> dict[str, str]:
    return {
        f"{mode}/{subset}": bench_progress(root / RESULTS / "bench" / run / mode / subset / name)
        for mode, subset in BENCHES
    }


def lease_reports(root: Path) -> list[tuple[dict, float]]:
    """Every committed training process's report (`grpo_report_lease*.json`) with its seconds;
    one that cannot be read is left out."""
    out = []
    for rep in sorted((root / RESULTS).glob("abl_*/grpo_report_lease*.json")):
        try:
            doc = json.loads(rep.read_text(encoding="utf-8"))
            out.append((doc, float(doc["seconds"])))
        except (ValueError, KeyError, TypeError):
            continue
    return out


def lease_seconds(root: Path) -> list[float]:
    """The seconds per step of every committed training process, each one chunk of a run's
    steps with its pool preparation and first step."""
    out = []
    for doc, seconds in lease_reports(root):
        try:
            out.append(seconds / max(1, int(doc["options"]["max_steps"]) - resumed_step(doc)))
        except (ValueError, KeyError, TypeError):
            continue
    return out


def resumed_step(doc: dict) -> int:
    """The step a lease's process resumed from (0 for a fresh start)."""
    m = re.search(r"checkpoint-(\d+)", str(doc.get("resumed_from") or ""))
    return int(m.group(1)) if m else 0


def turn_seconds(root: Path) -> float | None:
    """Device seconds per scored task-turn of the committed 4-turn bench runs: the wall time
    of their chunks that count their turns (`timing.jsonl`'s `turns`, recorded since session
    31; a cut chunk's lost work included, as the device time was spent), over those turns."""
    wall = turns = 0.0
    for t in (root / RESULTS / "bench").glob(f"*/{T4}/*/*/timing.jsonl"):
        for c in read_timing(t):
            if c.get("turns"):
                wall, turns = wall + float(c["wall_s"]), turns + int(c["turns"])
    return wall / turns if turns else None


def turns_left(folder: Path) -> int:
    """Task-turns a 4-turn run still has to score, each task new to it beginning from its
    checkpoint's 1-turn run (PROTOCOL.md, session-31 note (5)): 3 for a task with no record,
    4 less its recorded turns for an unfinished one, 0 for a finished one."""
    rj = folder / "run.json"
    selected = len(json.loads(rj.read_text(encoding="utf-8"))["tasks"]) if rj.is_file() else TASKS
    turns: dict[str, int] = {}
    records = _records(folder)
    for rec in records:
        if not isinstance(rec, SummaryRecord):
            turns[rec.task_id] = turns.get(rec.task_id, 0) + 1
    done = finished_tasks(records)
    left = sum(TURNS4 - n for tid, n in turns.items() if tid not in done)
    return left + (selected - len(set(turns) | done)) * (TURNS4 - 1)


def bench_seconds(root: Path) -> dict[str, float]:
    """Seconds per task of each `mode/subset` from the committed bench runs' complete chunks
    (`timing.jsonl`); a mode/subset without one is absent."""
    wall: dict[str, list[float]] = {}
    for t in (root / RESULTS / "bench").glob("*/*/*/*/timing.jsonl"):
        key = f"{t.parts[-4]}/{t.parts[-3]}"
        for c in read_timing(t):
            if c.get("complete") and c.get("tasks"):
                wall.setdefault(key, [0.0, 0.0])
                wall[key][0] += float(c["wall_s"])
                wall[key][1] += int(c["tasks"])
    return {k: w / n for k, (w, n) in wall.items() if n}


def estimate(rows: list[dict], root: Path) -> dict:
    """Device seconds still to spend, from the committed costs: training steps left at the
    mean seconds per step of the committed processes (their preparation included), and bench
    tasks left at each mode/subset's seconds per task, the 4-turn runs' task-turns left at
    their seconds per task-turn; what has no committed cost is listed."""
    per_step = lease_seconds(root)
    step_s = sum(per_step) / len(per_step) if per_step else None
    per_task = bench_seconds(root)
    turn_s = turn_seconds(root)
    left_steps = sum(STEPS - r["steps"] for r in rows if r["steps"] is not None)
    train = None if step_s is None else left_steps * step_s
    bench, unknown = 0.0, []
    for r in rows:
        for key, prog in r["bench"].items():
            done, total = (0, TASKS) if prog in ("-", "?") else map(int, prog.split("/"))
            if done >= total:
                continue
            if key.startswith(T4 + "/"):  # priced by the task-turn: its tasks run 3 or fewer
                if turn_s is None:
                    unknown.append(f"{r['run']} {key}")
                    continue
                name = "sft" if r["run"] == START else "grpo"
                folder = root / RESULTS / "bench" / r["run"] / key / name
                bench += turns_left(folder) * turn_s
            elif key in per_task:
                bench += (total - done) * per_task[key]
            else:
                unknown.append(f"{r['run']} {key}")
    return {
        "training_steps_left": left_steps,
        "seconds_per_step": step_s,
        "training_s": train,
        "bench_seconds_per_task": per_task,
        "bench_seconds_per_task_turn_4_turn_runs": turn_s,
        "bench_s": bench,
        "bench_without_a_cost": unknown,
        "note": "estimates from committed timings; machine starts and setup calls not counted",
    }


def table(rows: list[dict]) -> str:
    heads = ["run", "steps", "ckpt", *[k for k in rows[0]["bench"]]]
    lines = [heads]
    for r in rows:
        steps = "-" if r["steps"] is None else f"{r['steps']}/{STEPS}"
        ckpt = "-" if r["checkpoint"] is None else str(r["checkpoint"])
        lines.append([r["run"], steps, ckpt, *r["bench"].values()])
    widths = [max(len(x[i]) for x in lines) for i in range(len(heads))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(x, widths, strict=True)) for x in lines)


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = [r for r in rows if r["steps"] is not None]
    fig, ax = plt.subplots(figsize=(8, 0.5 + 0.45 * len(runs)))
    y = range(len(runs))
    ax.barh(y, [STEPS] * len(runs), color="#eeeeee", edgecolor="#999999")
    ax.barh(
        y,
        [r["steps"] for r in runs],
        color=["#1f77b4" if r["arm"] == ARMS[0] else "#ff7f0e" for r in runs],
    )
    for i, r in enumerate(runs):
        done = sum(finished_all(v) for v in r["bench"].values())
        ax.text(STEPS + 1, i, f"benches done {done}/{len(r['bench'])}", va="center", fontsize=8)
    ax.set_yticks(list(y), [r["run"] for r in runs])
    ax.set_xlim(0, STEPS * 1.35)
    ax.set_xlabel(f"GRPO steps trained (of {STEPS})")
    ax.invert_yaxis()
    ax.set_title("Ablation progress (committed files)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, default=ROOT, help="the repository (default: this one)")
    ap.add_argument("--out", type=Path, help="JSON to write")
    ap.add_argument("--plot", type=Path, help="PNG of steps trained per run")
    args = ap.parse_args(argv)
    if not (args.root / RESULTS).is_dir():
        print(
            f"status: {args.root / RESULTS}: no such folder; give --root the repository",
            file=sys.stderr,
        )
        return 2
    try:
        rows = board(args.root)
        est = estimate(rows, args.root)
    except ValueError as e:  # a committed timing or trajectory file that bench did not write
        print(f"status: {e}", file=sys.stderr)
        return 2
    print(table(rows))
    if est["training_s"] is not None:
        print(
            f"left: {est['training_steps_left']} training steps, ~{est['training_s']:,.0f} s at "
            f"{est['seconds_per_step']:.1f} s a step; bench ~{est['bench_s']:,.0f} s"
            + (
                f" + {len(est['bench_without_a_cost'])} run(s) with no committed cost"
                if est["bench_without_a_cost"]
                else ""
            )
            + " (device time; machine starts and setup calls not counted)"
        )
    if args.out:
        doc = {"steps_planned": STEPS, "runs": rows, "estimate": est}
        args.out.write_text(json.dumps(doc, indent=1) + "\n")
    if args.plot:
        plot(rows, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
