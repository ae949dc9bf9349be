"""What a GRPO run learned, on tasks it never saw: issue #44's `grpo_learning_h200.json`.

    python bench/grpo_learning.py \\
        --subset train_unseen=SFT_RUN,GRPO_RUN \\
        --subset test_families=SFT_RUN,GRPO_RUN \\
        [--subset train_unseen_t4=SFT_RUN_T4,GRPO_RUN_T4 ...] \\
        --steps bench/results/ablation/abl_unified_s0/steps.jsonl \\
        --out bench/results/grpo_learning_h200.json --plot bench/results/grpo_learning_h200.png

Each `--subset NAME=BEFORE,AFTER` names two `cudaperf bench run` folders of one subset: the
start (the SFT adapter) and the trained checkpoint. They must hold the same finished tasks,
with the same suite, samples and turns, measured on one setup (GPU, evaluator, toolchain;
`bench/ablation/primary.py`'s checks); otherwise the script says which differs and writes
nothing. Per subset it reports, before and after, each with its 95% cluster-robust interval
over families (`report.metrics.interval`), and the paired difference after - before with its
paired interval (`report.metrics.paired_interval`; for a speedup the ratio after / before):

- `correct_rate`: share of turn-1 samples correct, mean over tasks;
- `pass_at_k`: pass@k of the turn-1 samples, k = the samples per task;
- `correct_best`: share of tasks with a correct sample in any sample and turn;
- `fast_1.2_naive`: share of tasks whose best correct sample (any turn) is > 1.2x faster than
  the task's naive CUDA kernel;
- `geomean_naive`: geomean speedup over the naive kernel of the correct turn-1 samples;
- `geomean_naive_all`: the same over all tasks, best sample, a failure counted as the 0.1x
  floor (so no failure outranks a correct kernel);
- `primary` (runs made with `--preset outcome_only`, as `bash bench/bench_suite.sh ablation`
  makes them): the ablation's primary metric, the mean outcome_only score of turn-1 samples.

`verdict` reads `correct_rate`: "improved" or "worse" when its paired interval excludes 0,
else "null" (no change detected): a null result is reported as one.

`--steps` adds the run's training curves (per step: mean return, mean score, status shares,
share of groups with >= 2 correct; `cudaperf.train.curves.read_steps`) and its pool tasks'
first-vs-last change, which are training-set numbers, not evidence of learning. `--plot` draws
the subsets before/after with their intervals beside the reward and status curves.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench" / "ablation"))

from primary import PRIMARY, _same  # noqa: E402

from cudaperf.report.metrics import (  # noqa: E402
    Metric,
    interval,
    paired_interval,
    standard_metrics,
    value,
)
from cudaperf.report.run import read_run  # noqa: E402
from cudaperf.report.summary import _ci, load_views  # noqa: E402
from cudaperf.train.curves import first_last_by_task, read_steps  # noqa: E402

CURVE_KEYS = ("return_mean", "score_mean", "outcome_mean", "groups_2_correct", "status_share")


def metrics(samples: int, turns: int, outcome_only: bool) -> dict[str, Metric]:
    """The reported metrics by key (see the module's docstring), for runs of `samples`
    samples and `turns` turns."""
    best = f"best of {samples}x{turns}"
    names = {
        "correct_rate": "correct rate (turn 1)",
        "pass_at_k": f"pass@{samples} (turn 1)",
        "correct_best": f"correct, {best}",
        "fast_1.2_naive": f"fast_1.2 vs naive ({best})",
        "geomean_naive": "geomean speedup vs naive, correct turn-1 samples",
        "geomean_naive_all": f"geomean speedup vs naive, all tasks ({best}; failure = 0.1x floor)",
    }
    by_name = {m.name: m for m in standard_metrics(samples, turns, ["naive"])}
    missing = [n for n in names.values() if n not in by_name]
    if missing:  # report.metrics renamed one: say so rather than drop it silently
        raise ValueError(f"report.metrics has no metric named {missing[0]!r}")
    out = {k: by_name[n] for k, n in names.items()}
    if outcome_only:
        out["primary"] = PRIMARY
    return out


def load(folder: Path) -> dict:
    """A bench run folder as `primary._same` reads it, with every turn's views."""
    if not folder.is_dir():
        raise ValueError(f"{folder}: no such folder; give a `cudaperf bench run` folder")
    run = read_run(folder)
    s = run.settings
    _, views, _, mode = load_views(run)
    if mode != "full":
        raise ValueError(f"{folder}: evaluated {mode}, not on a GPU: no correctness to compare")
    keys = ("model", "adapter", "suite", "samples", "turns", "preset", "reward")
    return {
        "folder": str(folder),
        "info": run.info,
        "settings": {k: s.get(k) for k in keys},
        "views": views,
    }


def compare_subset(before: dict, after: dict) -> dict:
    """One subset's before/after entry (the shape of `grpo_learning_h200.json`'s subsets)."""
    _same([before, after])  # suite, samples, setup, finished tasks
    if before["settings"]["turns"] != after["settings"]["turns"]:
        raise ValueError(
            f"{after['folder']}: {after['settings']['turns']} turns, but {before['folder']} "
            f"has {before['settings']['turns']}: compare runs of the same settings"
        )
    samples, turns = int(before["settings"]["samples"]), int(before["settings"]["turns"])
    outcome_only = all(
        r["settings"]["preset"] == "outcome_only" and not r["settings"]["reward"]
        for r in (before, after)
    )
    ms = metrics(samples, turns, outcome_only)
    vb, va = before["views"], after["views"]
    out: dict = {
        "tasks": len(vb),
        "families": len({v.meta.family for v in vb}),
        "samples": samples,
        "turns": turns,
        "suite": before["settings"]["suite"],
        "metrics": {k: m.name for k, m in ms.items()},
    }
    for side, views, r in (("sft", vb, before), ("grpo", va, after)):
        out[side] = {"folder": r["folder"], "model": r["settings"]["model"]}
        out[side]["adapter"] = r["settings"]["adapter"]
        out[side]["sampling"] = r["info"].get("sampling")  # None: run.json predates the record
        for k, m in ms.items():
            out[side][k] = {"value": value(m, views), **_ci(interval(m, views))}
    out["diff"] = {}
    for k, m in ms.items():
        d, iv = paired_interval(m, vb, va)
        kind = "ratio" if m.kind == "speedup" else "difference"
        out["diff"][k] = {"value": d, "kind": kind, **_ci(iv)}
    cr = out["diff"]["correct_rate"]
    if cr["ci"] is None or None in cr["ci"]:
        out["verdict"] = "no interval: " + (cr["ci_note"] or "one-sided")
    elif cr["ci"][0] > 0:
        out["verdict"] = "improved"
    elif cr["ci"][1] < 0:
        out["verdict"] = "worse"
    else:
        out["verdict"] = "null"
    return out


def curves(steps: Path) -> dict:
    rows = read_steps(steps)
    return {
        "source": str(steps),
        "steps": len(rows),
        "per_step": [{"step": r["step"], **{k: r.get(k) for k in CURVE_KEYS}} for r in rows],
        "pool_first_vs_last": first_last_by_task(rows),
        "note": "training-set numbers (the pool tasks the run trained on): "
        "not evidence of learning",
    }


def plot(res: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    subsets = res["subsets"]
    cur = res.get("curves")
    ncols = len(subsets) + (2 if cur else 0)
    fig, axes = plt.subplots(1, ncols, figsize=(4.2 * ncols, 3.8), squeeze=False)
    keys = ("correct_rate", "pass_at_k", "correct_best", "fast_1.2_naive")
    for ax, (name, s) in zip(axes[0], subsets.items(), strict=False):
        for j, side in enumerate(("sft", "grpo")):
            xs = [i + (j - 0.5) * 0.38 for i in range(len(keys))]
            ys = [s[side][k]["value"] or 0.0 for k in keys]
            errs = [_err(y, s[side][k]["ci"]) for k, y in zip(keys, ys, strict=True)]
            lo, hi = [e[0] for e in errs], [e[1] for e in errs]
            ax.bar(xs, ys, 0.38, yerr=[lo, hi], capsize=3, label="SFT start" if j == 0 else "GRPO")
        ax.set_xticks(range(len(keys)))
        ax.set_xticklabels(
            [
                "correct\n(turn 1)",
                f"pass@{s['samples']}",
                f"correct\nbest {s['samples']}x{s['turns']}",
                "fast_1.2\nvs naive",
            ],
            fontsize=8,
        )
        ax.set_ylim(0, 1)
        d = s["diff"]["correct_rate"]
        ci = _fmt(d).partition(" ")[2]
        ax.set_title(
            f"{name}: {s['tasks']} tasks, {s['families']} families\n"
            f"correct rate {d['value']:+.3f} {ci}\n{s['verdict']}",
            fontsize=8,
        )
        ax.legend(fontsize=8)
    if cur:
        ax = axes[0][len(subsets)]
        st = [r["step"] for r in cur["per_step"]]
        for k in ("return_mean", "score_mean"):
            ax.plot(st, [r[k] for r in cur["per_step"]], label=k)
        ax.set_xlabel("step")
        ax.set_title("reward per step (pool tasks drawn that step)", fontsize=9)
        ax.legend(fontsize=8)
        ax = axes[0][len(subsets) + 1]
        names = sorted({s for r in cur["per_step"] for s in (r["status_share"] or {})})
        bottom = [0.0] * len(st)
        for n in names:
            ys = [(r["status_share"] or {}).get(n, 0.0) for r in cur["per_step"]]
            ax.bar(st, ys, bottom=bottom, label=n, width=1.0)
            bottom = [b + y for b, y in zip(bottom, ys, strict=True)]
        ax.set_ylim(0, 1)
        ax.set_xlabel("step")
        ax.set_title("status shares per step", fontsize=9)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _err(y: float, ci: list | None) -> tuple[float, float]:
    """Error-bar lengths below and above `y` (0 for a missing end or no interval)."""
    lo, hi = ci if ci else (None, None)
    return (
        max(y - lo, 0.0) if lo is not None else 0.0,
        max(hi - y, 0.0) if hi is not None else 0.0,
    )


def parse_subset(spec: str) -> tuple[str, Path, Path]:
    name, eq, rest = spec.partition("=")
    parts = rest.split(",")
    if not eq or not name or len(parts) != 2 or not all(parts):
        raise ValueError(f"--subset {spec!r}: give NAME=BEFORE_RUN,AFTER_RUN")
    return name, Path(parts[0]), Path(parts[1])


def _fmt(e: dict, ratio: bool = False) -> str:
    v = e["value"]
    if v is None:
        return "n/a"
    s = f"{v:.2f}x" if ratio else f"{v:.3f}"
    if e["ci"] is None:
        return s + " (no interval)"
    lo, hi = (("-" if x is None else f"{x:.2f}x" if ratio else f"{x:.3f}") for x in e["ci"])
    return f"{s} [{lo}, {hi}]"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--subset", action="append", required=True, help="NAME=BEFORE,AFTER (repeat)")
    ap.add_argument("--steps", type=Path, help="the GRPO run's steps.jsonl (training curves)")
    ap.add_argument("--out", type=Path, required=True, help="JSON to write")
    ap.add_argument("--plot", type=Path, help="PNG to draw")
    args = ap.parse_args(argv)
    try:
        subsets = {}
        for name, before, after in map(parse_subset, args.subset):
            if name in subsets:
                raise ValueError(f"--subset {name} given twice")
            subsets[name] = compare_subset(load(before), load(after))
        cur = curves(args.steps) if args.steps else None
    except ValueError as e:
        print(f"grpo_learning: {e}", file=sys.stderr)
        return 2
    res = {
        "what": "a GRPO run's checkpoint against its start on held-out subsets (issue #44)",
        "written": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": " ".join(
            ["python bench/grpo_learning.py", *(argv if argv is not None else sys.argv[1:])]
        ),
        "intervals": "95% cluster-robust t over families (report.intervals); diffs paired by task",
        "subsets": subsets,
    }
    if cur:
        res["curves"] = cur
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=1) + "\n", encoding="utf-8")
    for name, s in subsets.items():
        print(
            f"{name}: {s['tasks']} tasks, {s['families']} families, "
            f"{s['samples']} samples x {s['turns']} turn(s)"
        )
        for k in s["metrics"]:
            ratio = s["diff"][k]["kind"] == "ratio"
            sft, grpo = _fmt(s["sft"][k], ratio), _fmt(s["grpo"][k], ratio)
            print(f"  {k:<18} SFT {sft:<30} GRPO {grpo:<30} diff {_fmt(s['diff'][k], ratio)}")
        print(f"  verdict (correct rate): {s['verdict']}")
    if args.plot:
        plot(res, args.plot)
        print(f"plot: {args.plot}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
