"""The ablation's primary metric and its effects, from `cudaperf bench run` folders
(`bench/ablation/PROTOCOL.md`: Evaluation, Statistics and the dated notes).

    python bench/ablation/primary.py \\
        --run unified:0=RUNS/train-unseen/abl_unified_s0 \\
        --run outcome_only:0=RUNS/train-unseen/abl_outcome_only_s0 \\
        ... (one --run ARM:SEED=FOLDER per arm and seed) \\
        --training unified:0=bench/results/ablation/abl_unified_s0 ... (each run's training) \\
        --ranker bench/ablation/ranker/feature_ranker.json \\
        --detectable bench/results/ablation/pilot_rerun_summary.json \\
        --out bench/results/ablation/ablation_h200.json

`--training`, `--ranker` and `--detectable` put beside the effects what the issue's
`ablation_h200.json` records: the steps every run trained (refused unless equal, and unless
each training folder's leases ran that arm's preset with that seed), arm A's ranker with its
sha256, and the detectable effect the protocol fixed before the runs.

Each folder is a `cudaperf bench run` of one finished run's checkpoint on one fixed subset,
made with `--preset outcome_only` (so each sample's recorded reward is its `outcome_only`
score; `bash bench/bench_suite.sh ablation` passes it). The primary metric of a run is the
mean over tasks of the per-task mean `outcome_only` score of its turn-1 samples (samples
whose evaluator failed, `infra_error`, or that were never evaluated are left out and
counted; a task with none left takes no part). Then, as the protocol fixes:

- per seed s, `d_s = primary(A, s) - primary(B, s)` on the tasks both runs hold, with the
  paired cluster-robust t interval over families (`report.metrics.paired_interval`);
- pooled, the mean of the `d_s` with three 95% intervals: the protocol's two-level bootstrap
  (resample seeds, then families within each seed's subset; 10,000 resamples, percentile),
  a t interval over the per-seed differences (seeds - 1 degrees of freedom), and the paired
  cluster-robust t interval over families of every seed's tasks stacked (`families_t`). With
  3 seeds the bootstrap's seed level has 10 distinct draws, and with the test families' 5
  clusters its family level covers less than it says too (issue #42 measured 73-87% for a
  "95%" family bootstrap at 3-6 clusters): with one seed it gave a narrower interval than the
  seed's own. The result is read from the widest (PROTOCOL.md, session-26 note, with the
  session-44 note's third), and an interval holding 0 is a null result;
- the noise floor: each arm's standard deviation of the primary metric across its seeds.

Arms are named as in the protocol: A is `unified`, B is `outcome_only` (`--a`/`--b` change
that). The runs of one comparison must hold the same tasks with the same settings (samples,
suite, preset); the script says which differ instead of comparing them.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import hashlib
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from cudaperf.report.intervals import t_quantile  # noqa: E402
from cudaperf.report.metrics import (  # noqa: E402
    Metric,
    TaskView,
    _mean,
    interval,
    paired_interval,
    scored,
    standard_metrics,
    value,
)
from cudaperf.report.run import read_run, sampling_diff, setup_diff  # noqa: E402
from cudaperf.report.summary import _ci, load_views  # noqa: E402
from cudaperf.train.curves import trained_steps  # noqa: E402

RESAMPLES = 10_000
POOLED_ROWS = (  # the pooled A - B's intervals, as the forest plot labels them
    ("bootstrap_ci", "bootstrap"),
    ("t_over_seeds_ci", "t over seeds"),
    ("families_t_ci", "t over families"),
)
SECONDARY = (
    "correct rate (turn 1)",
    "pass@4 (turn 1)",
    "fast_1.2 vs naive (turn 1)",
    "geomean speedup vs naive, correct turn-1 samples",
)


def _task_score(t: TaskView) -> list[float]:
    vals = [r.reward for r in scored(t.turns.get(1, [])) if r.reward is not None]
    return [sum(vals) / len(vals)] if vals else []


PRIMARY = Metric(
    "mean outcome_only score (turn 1)",
    _task_score,
    _mean,  # report.metrics's own mean: its intervals tell a mean from a geomean by it
    "mean over tasks of the mean outcome_only score of the task's turn-1 samples",
    kind="score",
)


def parse_run(spec: str, flag: str = "--run", what: str = "FOLDER") -> tuple[str, int, Path]:
    m = re.fullmatch(r"([A-Za-z_][\w-]*):(\d+)=(.+)", spec)
    if not m:
        raise ValueError(f"{flag} {spec!r}: give ARM:SEED={what}, e.g. unified:0=runs/u0")
    folder = Path(m.group(3))
    if not folder.is_dir():
        raise ValueError(f"{flag} {spec!r}: no folder {folder}")
    return m.group(1), int(m.group(2)), folder


def training(spec: str) -> tuple[str, int, dict]:
    """`--training ARM:SEED=RUN` (a run folder of bench/results/ablation/: its steps.jsonl and
    grpo_report_lease*.json): the steps it trained and its reward preset, seed and ranker as
    every lease's report gives them; ValueError when the reports disagree or do not name
    this arm and seed."""
    arm, seed, folder = parse_run(spec, "--training", "RUN")
    steps_file = folder / "steps.jsonl"
    reports = sorted(folder.glob("grpo_report_lease*.json"))
    if not steps_file.is_file() or not reports:
        raise ValueError(f"--training {spec!r}: {folder} holds no steps.jsonl and reports")
    steps = trained_steps(steps_file)
    seen = set()
    for rep in reports:
        try:
            o = json.loads(rep.read_text(encoding="utf-8"))["options"]
            seen.add((o["reward"]["name"], o["seed"], o.get("ranker"), o["num_generations"]))
        except (ValueError, KeyError, TypeError) as e:  # UnicodeDecodeError is a ValueError
            why = f"no key {e}" if isinstance(e, KeyError) else type(e).__name__
            raise ValueError(
                f"--training {spec!r}: {rep.name} is not a report of cudaperf train grpo ({why})"
            ) from None
    if len(seen) != 1:
        raise ValueError(f"--training {spec!r}: its leases ran with other options: {sorted(seen)}")
    preset, run_seed, ranker, gens = seen.pop()
    if (preset, run_seed) != (arm, seed):
        raise ValueError(
            f"--training {spec!r}: that run trained {preset} with seed {run_seed}, not {arm}:{seed}"
        )
    if steps != list(range(1, len(steps) + 1)):
        raise ValueError(f"--training {spec!r}: steps.jsonl does not hold steps 1..N")
    return (
        arm,
        seed,
        {
            "folder": str(folder),
            "steps": len(steps),
            "leases": len(reports),
            "preset": preset,
            "ranker": ranker,
            "num_generations": gens,
        },
    )


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def load(folder: Path) -> dict:
    """A bench run folder's settings, turn-1 task views and what was left out."""
    run = read_run(folder)
    s = run.settings
    if s.get("preset") != "outcome_only" or s.get("reward"):
        raise ValueError(
            f"{folder}: ran with --preset {s.get('preset')} {s.get('reward') or ''}".rstrip()
            + ": the primary metric is the outcome_only score; rerun it with --preset "
            "outcome_only and no --reward (bash bench/bench_suite.sh ablation does)"
        )
    rows, views, _, mode = load_views(run, turns=1)
    if mode != "full":
        raise ValueError(f"{folder}: evaluated {mode}, not on a GPU: no scores to compare")
    return {
        "folder": str(folder),
        "info": run.info,
        "settings": {k: s.get(k) for k in ("model", "adapter", "suite", "samples", "turns")},
        "views": views,
        "left_out_samples": sum(1 for r in rows if r.turn == 1 and r.reward is None),
        "tasks_without_score": sum(1 for v in views if not _task_score(v)),
    }


def _same(runs: list[dict]) -> None:
    first = runs[0]
    ids = sorted(v.meta.id for v in first["views"])
    for r in runs[1:]:
        for k in ("suite", "samples"):
            if r["settings"][k] != first["settings"][k]:
                raise ValueError(
                    f"{r['folder']}: {k} {r['settings'][k]!r}, but {first['folder']} has "
                    f"{first['settings'][k]!r}: compare runs of one subset and settings"
                )
        diff = setup_diff(first["info"], r["info"])
        if diff:
            shown = ", ".join(f"{k} {b!r} there, {a!r} in {first['folder']}" for k, a, b in diff)
            raise ValueError(
                f"{r['folder']}: measured on another setup ({shown}): the protocol compares "
                "bench runs of one kind of card, toolchain and evaluator (PROTOCOL.md (5))"
            )
        if sampled := sampling_diff(first["info"], r["info"]):
            shown = ", ".join(f"{k} {b!r} there, {a!r} in {first['folder']}" for k, a, b in sampled)
            raise ValueError(
                f"{r['folder']}: replies sampled otherwise ({shown}): the protocol samples "
                "every checkpoint alike (bench_suite.sh ablation)"
            )
        if sorted(v.meta.id for v in r["views"]) != ids:
            raise ValueError(
                f"{r['folder']} and {first['folder']} hold other finished tasks: finish "
                "both runs (a rerun of bench run resumes) on the same subset"
            )


def _by_family(views: list[TaskView]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for v in views:
        if s := _task_score(v):
            out.setdefault(v.meta.family, {})[v.meta.id] = s[0]
    return out


def bootstrap(pairs: list[tuple[dict, dict]], resamples: int = RESAMPLES, seed: int = 0):
    """The protocol's two-level bootstrap of the pooled A - B: resample seeds, then families
    within each drawn seed's subset; each draw's d is the mean over drawn seeds of
    (mean over drawn tasks of A's task scores) - (the same of B's). `pairs`: per seed, the
    (A, B) task scores by family and task. Returns the 2.5% and 97.5% percentiles."""
    rng = np.random.default_rng(seed)
    prepared = []
    for a, b in pairs:
        fams = sorted(set(a) & set(b))
        diffs = [np.array([a[f][t] - b[f][t] for t in sorted(set(a[f]) & set(b[f]))]) for f in fams]
        if kept := [d for d in diffs if len(d)]:  # a seed with no task scored in both: out
            prepared.append(kept)
    if not prepared:
        raise ValueError("no seed has a task scored in both runs")
    draws = np.empty(resamples)
    for i in range(resamples):
        per_seed = []
        for k in rng.integers(0, len(prepared), len(prepared)):
            fams = prepared[k]
            pick = rng.integers(0, len(fams), len(fams))
            per_seed.append(np.concatenate([fams[j] for j in pick]).mean())
        draws[i] = float(np.mean(per_seed))
    lo, hi = np.percentile(draws, [2.5, 97.5])
    return [float(lo), float(hi)]


def t_over_seeds(ds: list[float]) -> list[float] | None:
    if len(ds) < 2:
        return None
    m, sd = float(np.mean(ds)), float(np.std(ds, ddof=1))
    w = t_quantile(0.975, len(ds) - 1) * sd / math.sqrt(len(ds))
    return [m - w, m + w]


def families_t(pairs: list[tuple[list[TaskView], list[TaskView]]], d: float) -> list[float] | None:
    """The paired cluster-robust t interval over families (`metrics.paired_interval`, as each
    seed's) of A - B with every seed's tasks stacked, centred on the pooled `d`. It keeps
    what the bootstrap loses with few families (issue #42: its "95%" covered 73-87% at 3-6
    clusters) and equals the seed's own interval with one seed; what seeds share across
    families is `t_over_seeds`' part. `pairs`: per seed, (A's views, B's views). None where
    no two-sided interval exists (one family, or the same difference in every family)."""

    def stacked(k: int) -> list[TaskView]:  # arm k's views of every seed, ids kept apart
        return [
            dataclasses.replace(t, meta=t.meta.model_copy(update={"id": f"{i}/{t.meta.id}"}))
            for i, pair in enumerate(pairs)
            for t in pair[k]
        ]

    _, iv = paired_interval(PRIMARY, stacked(1), stacked(0))
    if not iv.two_sided:
        return None
    w = (iv.hi - iv.lo) / 2
    return [d - w, d + w]


def secondary(views: list[TaskView], samples: int) -> dict:
    ms = {m.name: m for m in standard_metrics(samples, 1, ["naive"])}
    out = {}
    for name in SECONDARY:
        if (m := ms.get(name)) is not None:
            out[name] = {"value": value(m, views), **_ci(interval(m, views))}
    return out


def analyse(runs: list[tuple[str, int, dict]], arm_a: str, arm_b: str) -> dict:
    arms = {arm for arm, _, _ in runs}
    if not {arm_a, arm_b} <= arms:
        raise ValueError(f"arms given: {sorted(arms)}; need runs of both {arm_a} and {arm_b}")
    seen = set()
    for arm, seed, _ in runs:
        if (arm, seed) in seen:
            raise ValueError(f"two runs of {arm}, seed {seed}: give each arm and seed once")
        seen.add((arm, seed))
    _same([r for _, _, r in runs])
    table = []
    for arm, seed, r in runs:
        v, iv = value(PRIMARY, r["views"]), interval(PRIMARY, r["views"])
        samples = r["settings"]["samples"]
        table.append(
            {
                "arm": arm,
                "seed": seed,
                **r["settings"],
                "tasks": sum(bool(_task_score(t)) for t in r["views"]),
                "primary": v,
                **_ci(iv),
                "left_out_samples": r["left_out_samples"],
                "tasks_without_score": r["tasks_without_score"],
                "secondary": secondary(r["views"], samples),
            }
        )
    by = {(arm, seed): r for arm, seed, r in runs}
    seeds = sorted({s for a, s in by if a == arm_a} & {s for a, s in by if a == arm_b})
    per_seed, pairs, stacked = [], [], []
    for s in seeds:
        a, b = by[(arm_a, s)]["views"], by[(arm_b, s)]["views"]
        d, iv = paired_interval(PRIMARY, b, a)
        per_seed.append({"seed": s, "d": d, **_ci(iv)})
        if d is not None:  # a seed with no task scored in both runs takes no part in any
            pairs.append((_by_family(a), _by_family(b)))
            stacked.append((a, b))
    ds = [p["d"] for p in per_seed if p["d"] is not None]
    pooled = None
    if ds:
        d = float(np.mean(ds))
        boot, tint, fam = bootstrap(pairs), t_over_seeds(ds), families_t(stacked, d)
        cands = [x for x in (boot, tint, fam) if x is not None]
        widest = max(cands, key=lambda iv: iv[1] - iv[0])
        pooled = {
            "d": d,
            "seeds": len(ds),
            "bootstrap_ci": boot,
            "t_over_seeds_ci": tint,
            "families_t_ci": fam,
            "ci": widest,
            "ci_rule": "the widest of the three (PROTOCOL.md, session-26 note; families_t "
            "added by the session-44 note)",
            "null": bool(widest[0] <= 0 <= widest[1]),
        }
    floor = {}
    for arm in sorted(arms):
        vals = [t["primary"] for t in table if t["arm"] == arm and t["primary"] is not None]
        floor[arm] = float(np.std(vals, ddof=1)) if len(vals) >= 2 else None
    info = runs[0][2]["info"]
    return {
        "a": arm_a,
        "b": arm_b,
        "setup": {k: info.get(k) for k in ("gpu", "mode", "versions", "sampling")},  # _same
        "runs": table,
        "per_seed": per_seed,
        "pooled": pooled,
        "noise_floor_sd": floor,
    }


def context(specs: list[str], ranker: Path | None, detectable: Path | None, runs: set) -> dict:
    """What the result is read with: each arm and seed's training (`training`; every run
    benched must have one when any is given, and all trained the same steps), arm A's ranker
    hash and the detectable effect fixed before the runs."""
    out: dict = {}
    if specs:
        trained = {}
        for spec in specs:
            arm, seed, t = training(spec)
            if (arm, seed) in trained:
                raise ValueError(f"--training {spec!r}: {arm}:{seed} is given twice")
            trained[(arm, seed)] = t
        if missing := sorted(runs - set(trained)):
            shown = ", ".join(f"{a}:{s}" for a, s in missing)
            raise ValueError(f"--training: no training run given for {shown}")
        if len({t["steps"] for t in trained.values()}) != 1:
            shown = ", ".join(f"{a}:{s} {t['steps']}" for (a, s), t in sorted(trained.items()))
            raise ValueError(f"--training: the runs trained unequal steps ({shown}): equal steps")
        out["training"] = [{"arm": a, "seed": s, **t} for (a, s), t in sorted(trained.items())]
        out["steps"] = next(iter(trained.values()))["steps"]
    if ranker is not None:
        if not ranker.is_file():
            raise ValueError(f"--ranker {ranker}: no such file")
        out["ranker"] = {"path": str(ranker), "sha256": sha256(ranker)}
    if detectable is not None:
        try:
            de = json.loads(detectable.read_text())["detectable_effect"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ValueError(f"--detectable {detectable}: not a summarise.py JSON ({e})") from None
        out["detectable_effect"] = {"file": str(detectable), **de}
    return out


def _protocol_commit() -> str | None:
    root = Path(__file__).resolve().parents[2]
    try:
        out = subprocess.run(
            ["git", "log", "-1", "--format=%h", "--", "bench/ablation/PROTOCOL.md"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", action="append", required=True, help="ARM:SEED=FOLDER (repeat)")
    ap.add_argument("--out", type=Path, required=True, help="JSON to write")
    ap.add_argument("--a", default="unified", help="arm A (default unified)")
    ap.add_argument("--b", default="outcome_only", help="arm B (default outcome_only)")
    ap.add_argument(
        "--training",
        action="append",
        default=[],
        help="ARM:SEED=RUN (repeat): the training run folder of each arm and seed; its steps, "
        "preset, seed and ranker are recorded and must give every run the same steps",
    )
    ap.add_argument("--plot", type=Path, help="PNG of the result (a forest plot)")
    ap.add_argument("--ranker", type=Path, help="arm A's ranker file, recorded with its sha256")
    ap.add_argument(
        "--detectable",
        type=Path,
        help="bench/ablation/summarise.py's JSON whose detectable_effect the protocol fixed "
        "before the runs; recorded beside the pooled effect",
    )
    args = ap.parse_args(argv)
    try:
        runs = [(arm, seed, load(folder)) for arm, seed, folder in map(parse_run, args.run)]
        res = analyse(runs, args.a, args.b)
        res |= context(args.training, args.ranker, args.detectable, {(a, s) for a, s, _ in runs})
    except ValueError as e:
        print(f"primary: {e}", file=sys.stderr)
        return 2
    res = {
        "what": "the ablation's primary metric per run, per seed and pooled "
        "(bench/ablation/primary.py; PROTOCOL.md, Statistics)",
        "metric": PRIMARY.doc,
        "written": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "protocol_commit": _protocol_commit(),
        "command": " ".join(["python bench/ablation/primary.py", *(argv or sys.argv[1:])]),
        **res,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=1) + "\n", encoding="utf-8")
    print(f"{'arm':<14}{'seed':>5}{'tasks':>6}{'primary':>9}  95% CI (families)")
    for r in res["runs"]:
        ci = "n/a: " + r["ci_note"] if r["ci"] is None else f"[{r['ci'][0]:.3f}, {r['ci'][1]:.3f}]"
        p = "n/a" if r["primary"] is None else f"{r['primary']:.3f}"
        print(f"{r['arm']:<14}{r['seed']:>5}{r['tasks']:>6}{p:>9}  {ci}")
    for p in res["per_seed"]:
        ci = "n/a: " + p["ci_note"] if p["ci"] is None else f"[{p['ci'][0]:.3f}, {p['ci'][1]:.3f}]"
        print(f"seed {p['seed']}: {res['a']} - {res['b']} = {p['d']:.3f}  {ci}")
    if pooled := res["pooled"]:
        lo, hi = pooled["ci"]
        verdict = "null result (the interval holds 0)" if pooled["null"] else "not null"
        print(
            f"pooled over {pooled['seeds']} seed(s): {pooled['d']:.3f} [{lo:.3f}, {hi:.3f}], "
            f"{verdict}"
        )
    if de := res.get("detectable_effect"):
        floor = de["by_assumed_seed_sd"][0]
        print(
            f"detectable effect fixed before the runs: {floor['mde_normal']:.3f} "
            f"(t(2): {floor['mde_t2']:.3f}) from sampling alone"
        )
    if args.plot:
        args.plot.parent.mkdir(parents=True, exist_ok=True)
        print(f"plot: {plot(res, args.plot)}")
    print(f"wrote {args.out}")
    return 0


def plot(res: dict, path: Path) -> Path:
    """`figure(res)` written to `path` as a PNG."""
    fig = figure(res)  # chooses the Agg backend before pyplot is imported here
    import matplotlib.pyplot as plt

    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return Path(path)


def figure(res: dict):
    """The result as a forest plot: left, each run's primary metric with its interval over
    families; right, each seed's A - B and the pooled one with both its intervals (the wider,
    the one read, drawn bold), against 0 and the detectable effect fixed before the runs.
    Every row keeps its place on its axis, drawn or not (an interval that cannot be given is
    a labelled empty row, not a label below the axis)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs, seeds, pooled = res["runs"], res["per_seed"], res["pooled"]
    rows = 2 + len(seeds) + len(POOLED_ROWS) * bool(pooled)
    fig, (left, right) = plt.subplots(
        1, 2, figsize=(11, 1.2 + 0.42 * max(len(runs), rows)), gridspec_kw={"wspace": 0.7}
    )
    colors = {res["a"]: "#1f77b4", res["b"]: "#ff7f0e"}
    for i, r in enumerate(runs):
        if r["primary"] is None:
            continue
        c = colors.get(r["arm"], "#555555")
        if r["ci"] is not None:
            left.plot(r["ci"], [i, i], color=c, lw=2)
        left.plot(r["primary"], i, "o", color=c)
    left.set_yticks(range(len(runs)), [f"{r['arm']} seed {r['seed']}" for r in runs])
    left.set_ylim(len(runs) - 0.5, -0.5)  # top to bottom, every row inside the axis
    left.set_xlabel("primary metric: mean turn-1 outcome_only score per task")
    left.set_title("each run (95% interval over families)", fontsize=10)
    labels, y = [], 0
    for p in seeds:
        if p["d"] is not None:
            if p["ci"] is not None:
                right.plot(p["ci"], [y, y], color="#333333", lw=2)
            right.plot(p["d"], y, "o", color="#333333")
        labels.append(f"seed {p['seed']}" + (" (no interval)" if p["ci"] is None else ""))
        y += 1
    if pooled:
        for key, name in POOLED_ROWS:
            iv = pooled.get(key)
            if iv is not None:
                read = iv == pooled["ci"]
                right.plot(iv, [y, y], color="#d62728", lw=3.5 if read else 1.5)
                right.plot(pooled["d"], y, "D", color="#d62728")
            why = "needs 2 seeds" if key == "t_over_seeds_ci" else "no interval over families"
            note = " (read)" if iv == pooled["ci"] else (f" (n/a: {why})" if iv is None else "")
            labels.append(f"pooled, {name}{note}")
            y += 1
    right.axvline(0, color="black", lw=0.8)
    xlabel = f"{res['a']} - {res['b']}"
    if de := res.get("detectable_effect"):
        floor = de["by_assumed_seed_sd"][0]
        for x, style in ((floor["mde_normal"], ":"), (floor["mde_t2"], "--")):
            right.axvline(x, color="#2ca02c", ls=style, lw=1)
            right.axvline(-x, color="#2ca02c", ls=style, lw=1)
        xlabel += (
            f"\ngreen: the detectable effect fixed before the runs, "
            f"{floor['mde_normal']:.3f} (normal, dotted), {floor['mde_t2']:.3f} (t(2), dashed)"
        )
    right.set_yticks(range(len(labels)), labels)
    right.set_ylim(len(labels) - 0.5, -0.5)
    right.set_xlabel(xlabel, fontsize=9)
    verdict = ""
    if pooled:
        verdict = ": null (the read interval holds 0)" if pooled["null"] else ": not null"
    right.set_title(f"the effect, per seed and pooled{verdict}", fontsize=10)
    suites = sorted({str(r.get("suite")) for r in runs})  # test-families: the secondary one
    fig.suptitle(f"Ablation, {', '.join(suites)}: {res['a']} vs {res['b']}", fontsize=11)
    return fig


if __name__ == "__main__":
    sys.exit(main())
