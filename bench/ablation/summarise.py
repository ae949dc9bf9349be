"""Issue #17's ablation runs side by side, from their training logs only (no held-out data).

    python bench/ablation/summarise.py \\
        --run unified=bench/results/ablation/pilot_2026-12-04 \\
        --run outcome_only=bench/results/ablation/pilot_outcome_only_2026-12-04 \\
        --out bench/results/ablation/pilot_summary.json \\
        --plot bench/results/ablation/pilot_summary.png

Each `--run ARM=FOLDER` is a `cudaperf train grpo` run folder (or a copy of its
`steps.jsonl` and `completions.jsonl[.gz]`). Per run, from `bench/ablation/PROTOCOL.md`'s
pilot section and reward-hacking watch: the share of groups with >= 2 correct samples (per
step, at the first and the last step, pooled), status shares, the arm-neutral score per step
(`outcome_mean + speed_mean`: the `outcome_only` total, which the primary metric uses, so
arm A is not read on its own bonus terms), turn 1 vs turn 2, step seconds, rejected share,
the canaries' event times against step 1's, replies that launch a kernel on one thread
(`<<<1, 1>>>`: all and correct), correct replies with no kernel launch in their text (the C
runs log no `ExecResult.launched`), and how often a group's turn-1 samples are word-for-word the
same reply. Tasks that recur are paired first visit vs last on the share
of correct samples (arm-neutral).

Runs of arms with the same seed draw the same tasks at the same step (checked and reported);
for them the per-(step, task) difference in correct share is listed per step.

`detectable_effect` (PROTOCOL.md, Statistics): the smallest A - B of the primary metric
(mean over 60 held-out tasks of the mean `outcome_only` score of 4 single-turn samples) that
the 3-seed design detects at 80% power, two-sided 5%, from the `outcome_only` run's turn-1
samples: their pooled within-(step, task) variance gives the sampling part; the seed-to-seed
spread of a run's primary metric cannot be measured from one seed per arm, so it is shown
for a range of assumed values. Normal quantiles (tasks as the unit) and t with 2 degrees of
freedom (3 per-seed differences as the unit).
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import json
import math
import re
import sys
from collections import defaultdict
from pathlib import Path
from statistics import NormalDist

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from cudaperf.train.curves import mean_band, paired_change, read_steps  # noqa: E402

DESIGN = {"seeds": 3, "tasks": 60, "samples": 4, "alpha": 0.05, "power": 0.8}
SEED_SD = (0.0, 0.025, 0.05, 0.1)  # assumed seed-to-seed SD of one run's primary metric
SERIAL = re.compile(r"<<<\s*1\s*,\s*1\s*(?:,|>>>)")  # a one-thread launch: <<<1, 1>>>
LAUNCH = re.compile(r"<<<|cudaLaunch|cuLaunch")  # some kernel launch in the reply's text


def completions(folder: Path) -> list[dict]:
    for name in ("completions.jsonl", "completions.jsonl.gz"):
        path = folder / name
        if path.is_file():
            opener = gzip.open if name.endswith(".gz") else open
            with opener(path, "rt", encoding="utf-8") as fh:
                return [json.loads(line) for line in fh if line.strip()]
    raise ValueError(f"{folder}: no completions.jsonl(.gz); give a `cudaperf train grpo` run")


def groups(samples: list[dict], turn: int | None = 1) -> dict[tuple[int, str], list[dict]]:
    """Samples by (step, task); `turn` keeps one turn (None: all)."""
    out: dict[tuple[int, str], list[dict]] = defaultdict(list)
    for s in samples:
        if turn is None or s.get("turn") == turn:
            out[(s["step"], s["task"])].append(s)
    return dict(out)


def ok_share(rows: list[dict]) -> float:
    return sum(r.get("status") == "ok" for r in rows) / len(rows)


def _mean(xs) -> float | None:
    v = [x for x in xs if isinstance(x, int | float)]
    return round(sum(v) / len(v), 4) if v else None


def first_last_ok(samples: list[dict]) -> dict:
    """Tasks seen at >= 2 steps: correct share (all turns) at the first visit and the last."""
    by_task: dict[str, dict[int, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for s in samples:
        by_task[s["task"]][s["step"]].append(s)
    pairs = []
    for visits in by_task.values():
        if len(visits) >= 2:
            steps = sorted(visits)
            pairs.append((ok_share(visits[steps[0]]), ok_share(visits[steps[-1]])))
    return paired_change(pairs)


def canary_drift(rows: list[dict]) -> dict:
    """Per canary (task, config): step 1's median event time and the largest relative move."""
    first: dict[str, float] = {}
    worst: dict[str, float] = {}
    for row in rows:
        for c in row.get("canary") or []:
            key = f"{c['task']}:{c['config']}"
            first.setdefault(key, c["median_us"])
            worst[key] = max(worst.get(key, 0.0), abs(c["median_us"] / first[key] - 1))
    return {k: {"step1_us": first[k], "max_rel_change": round(worst[k], 4)} for k in first}


def first_steps(folder: Path, steps: int | None) -> tuple[list[dict], list[dict]]:
    """The run's step rows (1-based `step`) and samples (0-based `step`: the rollout of step
    s is logged while the trainer is at s - 1) of its first `steps` steps (None: all)."""
    rows, samples = read_steps(folder), completions(folder)
    if steps is not None:
        rows = [r for r in rows if r["step"] <= steps]
        samples = [x for x in samples if x["step"] < steps]
    if not rows:
        raise ValueError(f"{folder}: steps.jsonl holds no GRPO step")
    return rows, samples


def groups_2_correct(rows: list[dict]) -> tuple[float, int]:
    """(groups with at least 2 correct samples, groups) over step rows that record it."""
    done = [r for r in rows if r.get("groups_2_correct") is not None]
    n = sum(r.get("groups", 4) for r in done)
    return sum(r["groups_2_correct"] * r.get("groups", 4) for r in done), n


def turn2_below_turn1(rows: list[dict]) -> tuple[int, int]:
    """(steps whose turn 2 scored below turn 1, steps with two turns scored)."""
    turns = [r["score_by_turn"] for r in rows if len(r.get("score_by_turn") or []) >= 2]
    return sum(t[1] < t[0] for t in turns), len(turns)


def run_summary(
    arm: str,
    folder: Path,
    steps: int | None = None,
    loaded: tuple[list[dict], list[dict]] | None = None,
) -> dict:
    """The summary of one run's first `steps` steps; `loaded`: its `first_steps` already read."""
    rows, samples = loaded if loaded is not None else first_steps(folder, steps)
    g1 = groups(samples)
    dup = [1 - len({s["text"] for s in v}) / len(v) for v in g1.values()]
    per_step = []
    for r in rows:
        share = r.get("status_share", {})
        neutral = (
            r["outcome_mean"] + r["speed_mean"]
            if r.get("outcome_mean") is not None and r.get("speed_mean") is not None
            else None
        )
        per_step.append(
            {
                "step": r["step"],
                "groups_2_correct": r.get("groups_2_correct"),
                "ok": share.get("ok", 0.0),
                "rejected": share.get("rejected", 0.0),
                "status_share": share,
                "outcome_only_score": _mean([neutral]),
                "score_by_turn": r.get("score_by_turn"),
                "step_s": r.get("step_s"),
                "generate_s": r.get("generate_s"),
                "eval_s": r.get("eval_s"),
            }
        )
    with_2, n_groups = groups_2_correct(rows)
    below, two_turns = turn2_below_turn1(rows)
    return {
        "arm": arm,
        "folder": str(folder),
        "steps": len(rows),
        "groups_2_correct": {
            "first_step": rows[0].get("groups_2_correct"),
            "last_step": rows[-1].get("groups_2_correct"),
            "pooled": round(with_2 / n_groups, 4) if n_groups else None,
            "groups": n_groups,
            "with_2_correct": round(with_2),
        },
        "ok_mean": _mean([p["ok"] for p in per_step]),
        "outcome_only_score_mean": _mean([p["outcome_only_score"] for p in per_step]),
        "turn2_below_turn1_steps": below,
        "steps_with_2_turns": two_turns,
        "rejected_mean": _mean([p["rejected"] for p in per_step]),
        "turn1_duplicate_share": _mean(dup),
        "serial_launch": {
            "samples": sum(bool(SERIAL.search(x.get("text", ""))) for x in samples),
            "correct": sum(
                bool(SERIAL.search(x.get("text", ""))) and x.get("status") == "ok" for x in samples
            ),
        },
        "correct_without_launch": sum(
            x.get("status") == "ok" and not LAUNCH.search(x["text"]) for x in samples if "text" in x
        ),
        "first_last_ok_by_task": first_last_ok(samples),
        "canaries": canary_drift(rows),
        "step_s_mean": _mean([p["step_s"] for p in per_step]),
        "per_step": per_step,
    }


def paired(a: dict, b: dict, sa: list[dict], sb: list[dict]) -> dict:
    """Two runs of one seed: same tasks per step? Correct-share difference a - b per step."""
    ga, gb = groups(sa, None), groups(sb, None)
    steps = sorted({s for s, _ in ga} & {s for s, _ in gb})
    same = [s for s in steps if {t for st, t in ga if st == s} == {t for st, t in gb if st == s}]
    diff = {}
    for s in same:
        keys = [k for k in ga if k[0] == s]
        diff[s + 1] = round(sum(ok_share(ga[k]) - ok_share(gb[k]) for k in keys) / len(keys), 4)
    return {
        "runs": [a["arm"], b["arm"]],
        "common_steps": len(steps),
        "steps_with_the_same_tasks": len(same),
        "ok_diff_by_step": diff,
    }


def detectable_effect(runs: list[list[dict]]) -> dict:
    """Minimum detectable A - B of the primary metric (module doc), from the turn-1 samples of
    `runs` (each run's samples; groups are (run, step, task))."""
    g = [[s["score"] for s in v] for run in runs for v in groups(run).values() if len(v) >= 2]
    if not g:
        return {"groups": 0}
    ss = sum(sum((x - sum(v) / len(v)) ** 2 for x in v) for v in g)
    dof = sum(len(v) - 1 for v in g)
    var_w = ss / dof
    means = [sum(v) / len(v) for v in g]
    mu = sum(means) / len(means)
    var_b = sum((m - mu) ** 2 for m in means) / (len(means) - 1) if len(means) > 1 else None
    k, n, m = DESIGN["seeds"], DESIGN["tasks"], DESIGN["samples"]
    z = NormalDist().inv_cdf(1 - DESIGN["alpha"] / 2) + NormalDist().inv_cdf(DESIGN["power"])

    def t2(p: float) -> float:  # Student t quantile, 2 degrees of freedom (closed form)
        return (2 * p - 1) / math.sqrt(2 * p * (1 - p))

    t = t2(1 - DESIGN["alpha"] / 2) + t2(DESIGN["power"])
    rows = []
    for sd in SEED_SD:
        se = math.sqrt((2 * var_w / (m * n) + 2 * sd**2) / k)
        rows.append(
            {
                "seed_sd": sd,
                "se_of_mean_diff": round(se, 4),
                "mde_normal": round(z * se, 4),
                "mde_t2": round(t * se, 4),
            }
        )
    return {
        "source": "turn-1 samples of the outcome_only runs (their score is the outcome_only total)",
        "runs": len(runs),
        "groups": len(g),
        "samples": sum(len(v) for v in g),
        "within_task_sd": round(math.sqrt(var_w), 4),
        "between_task_sd_of_means": round(math.sqrt(var_b), 4) if var_b is not None else None,
        "design": DESIGN,
        "by_assumed_seed_sd": rows,
        "reading": "seed_sd 0 is the floor set by sampling alone; the three seeds of each arm "
        "measure the real spread (PROTOCOL.md: noise floor)",
    }


def plot(summaries: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [
        ("groups_2_correct", "groups with >= 2 correct"),
        ("ok", "share correct (ok)"),
        ("outcome_only_score", "outcome_only score (mean)"),
        ("step_s", "seconds per step"),
    ]
    arms: dict[str, list[dict]] = {}
    for s in summaries:
        arms.setdefault(s["arm"], []).append(s)
    fig, axes = plt.subplots(len(keys), 1, figsize=(8, 11), sharex=True)
    for ax, (key, label) in zip(axes, keys, strict=True):
        for n, (arm, runs) in enumerate(arms.items()):
            color = f"C{n}"
            if len(runs) == 1:  # one run (a pilot): its line
                xs = [p["step"] for p in runs[0]["per_step"]]
                ax.plot(
                    xs,
                    [p[key] for p in runs[0]["per_step"]],
                    marker="o",
                    ms=3,
                    color=color,
                    label=f"{arm} ({Path(runs[0]['folder']).name})",
                )
                continue
            for r in runs:  # several seeds: each thin, their mean with a 95% band
                ax.plot(
                    [p["step"] for p in r["per_step"]],
                    [p[key] for p in r["per_step"]],
                    lw=0.6,
                    alpha=0.4,
                    color=color,
                )
            xs, mean, half = _band([r["per_step"] for r in runs], key)
            ax.plot(xs, mean, color=color, lw=2, label=f"{arm}: mean of {len(runs)} runs")
            ax.fill_between(
                xs,
                [m - h for m, h in zip(mean, half, strict=True)],
                [m + h for m, h in zip(mean, half, strict=True)],
                color=color,
                alpha=0.2,
            )
        ax.set_ylabel(label)
    axes[0].legend(fontsize=7)
    axes[-1].set_xlabel("GRPO step")
    fig.suptitle("Ablation runs, training-pool data (same tasks per step for one seed)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _band(tables: list[list[dict]], key: str) -> tuple[list[int], list[float], list[float]]:
    """Per step the runs have in common: the mean of `key` and 1.96 standard errors."""
    common = sorted(set.intersection(*({p["step"] for p in t} for t in tables)))
    return mean_band(tables, key, common)


def parse_runs(specs: list[str]) -> list[tuple[str, Path]]:
    out = []
    for spec in specs:
        arm, sep, folder = spec.partition("=")
        if not sep or not arm or not folder:
            raise ValueError(f"--run {spec!r}: write ARM=FOLDER, e.g. unified=runs/abl_unified_s0")
        if not Path(folder).is_dir():
            raise ValueError(f"--run {spec!r}: {folder} is not a folder")
        out.append((arm, Path(folder)))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", action="append", required=True, help="ARM=FOLDER (repeat)")
    ap.add_argument("--out", type=Path, required=True, help="summary JSON to write")
    ap.add_argument("--plot", type=Path, help="PNG of the per-step curves")
    ap.add_argument("--command", default=None, help="the command line to record in the JSON")
    ap.add_argument(
        "--steps",
        type=int,
        default=None,
        help="only each run's first N steps (a pilot read from the start of a main run)",
    )
    args = ap.parse_args(argv)
    if args.steps is not None and args.steps < 1:
        print(f"summarise: --steps {args.steps}: give a number of steps >= 1", file=sys.stderr)
        return 2
    try:
        runs = parse_runs(args.run)
        loaded = [first_steps(folder, args.steps) for _, folder in runs]  # each read once
        summaries = [
            run_summary(arm, folder, loaded=rs)
            for (arm, folder), rs in zip(runs, loaded, strict=True)
        ]
        samples = [s for _, s in loaded]
    except (ValueError, KeyError, json.JSONDecodeError) as e:
        print(f"summarise: {e}", file=sys.stderr)
        return 2
    pairs = [
        paired(summaries[i], summaries[j], samples[i], samples[j])
        for i in range(len(runs))
        for j in range(i + 1, len(runs))
    ]
    outcome = [s for (arm, _), s in zip(runs, samples, strict=True) if arm == "outcome_only"]
    result = {
        "what": "issue #17 ablation runs, training-pool data only (bench/ablation/summarise.py)",
        "written": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": args.command or " ".join(["python bench/ablation/summarise.py", *sys.argv[1:]]),
        "steps": args.steps,
        "runs": summaries,
        "pairs": pairs,
        "detectable_effect": detectable_effect(outcome) if outcome else None,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    if args.plot:
        plot(summaries, args.plot)
    print(
        f"{'arm':<14}{'steps':>6}{'g>=2 first':>11}{'last':>6}{'pooled':>8}{'ok':>7}"
        f"{'oo score':>9}{'t2<t1':>7}{'dup':>6}{'step s':>8}"
    )
    for s in summaries:
        g = s["groups_2_correct"]
        print(
            f"{s['arm']:<14}{s['steps']:>6}{g['first_step']:>11.2f}{g['last_step']:>6.2f}"
            f"{g['pooled']:>8.3f}{s['ok_mean']:>7.3f}{s['outcome_only_score_mean']:>9.3f}"
            f"{s['turn2_below_turn1_steps']:>4}/{s['steps_with_2_turns']:<2}"
            f"{s['turn1_duplicate_share']:>6.2f}{s['step_s_mean']:>8.1f}"
        )
    de = result["detectable_effect"]
    if de and de.get("groups"):
        print(
            f"detectable A-B (80% power, {DESIGN['seeds']} seeds x {DESIGN['tasks']} tasks x "
            f"{DESIGN['samples']} samples; within-task sd {de['within_task_sd']}):"
        )
        for r in de["by_assumed_seed_sd"]:
            print(
                f"  seed sd {r['seed_sd']:<6} normal {r['mde_normal']:.3f}   t(2) {r['mde_t2']:.3f}"
            )
    print(f"wrote {args.out}" + (f" and {args.plot}" if args.plot else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
