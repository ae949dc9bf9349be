"""GRPO step time, before and after: where a step's seconds go, from runs' own step logs.

    A=bench/results/ablation
    python bench/grpo_speed.py \
        --before $A/pilot_2026-12-04 $A/pilot_outcome_only_2026-12-04 \
        --after RUN_DIR [RUN_DIR ...] \
        --out bench/results/grpo_speed_h200.json --plot bench/results/grpo_speed_h200.png

Each side is one or more run folders (or their `steps.jsonl`) of `cudaperf train grpo`, pooled.
A process's first step (the first `step` record after a `layout` record: every process, a
resumed one too, writes one when it starts) pays one-off costs (compiling generation, drawing
the pool's input sets) and is reported apart (`first_step_s`), as is the pool preparation
before it (`prepare_s`, the process's `prepare` record: the naive implementations evaluated,
or read from the result cache) and the two together (`process_start_s`); the others are
warm. Per warm step (rows read by `cudaperf.train.curves.read_steps`, as `cudaperf train
report` reads them): `step_s` (the trainer's step), and from the step's `rollout` record
`generate_s`, `analyse_s`, `eval_s`, `canary_s` and `update_s` (the rest of `step_s`: the
policy update); `samples_per_s` (rows / step_s); `generation_tokens_per_s` (completion tokens
/ generate_s); and, where the run logged it, the evaluator's seconds per phase
(`eval_phases_s`, summed over the step's candidates; `cudaperf.execute.types.PHASES`).
Medians over warm steps, means too.

Both sides must have the step shape (rows and groups per step), or the comparison is refused:
a step of another shape is another measurement. The JSON has the keys `before` and `after`
(the latter only with `--after`), each with `warm_step_s_median`, `first_step_s`,
`samples_per_s`, `generation_tokens_per_s` and the per-phase medians, plus the command; the
plot shows the median warm step of each side split into its phases.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
from pathlib import Path

from cudaperf.train.curves import STACKED as PHASES  # generate, analyse, eval, canary, update
from cudaperf.train.curves import read_steps as rows_of


class Bad(Exception):
    """A problem with the input: one line for the user."""


def steps_file(path: Path) -> Path:
    f = path / "steps.jsonl" if path.is_dir() else path
    if not f.is_file():
        raise Bad(f"{path}: no steps.jsonl there; give a `cudaperf train grpo` run folder")
    return f


def first_steps(f: Path) -> dict[int, float]:
    """Steps that were their process's first (the first `step` record after each `layout`
    record: process 0's; a resumed process writes one when it starts), each with the seconds
    its process spent before it preparing the pool (its `prepare` record; 0 without one)."""
    firsts, pending, prep = {}, True, 0.0
    for n, line in enumerate(f.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            raise Bad(f"{f}:{n}: not a JSON line; is this a steps.jsonl of cudaperf?") from None
        if rec.get("kind") == "layout" and rec.get("process", 0) == 0:
            pending, prep = True, 0.0
        elif rec.get("kind") == "prepare" and pending:
            prep = float(rec.get("seconds") or 0.0)
        elif rec.get("kind") == "step" and pending:
            firsts[rec.get("step")] = prep
            pending = False
    return firsts


def read_steps(path: Path) -> list[dict]:
    """One row per trained step of the run at `path` (`cudaperf.train.curves.read_steps`: the
    rollout's phases with `update_s`, the rest of the step), marked `first` or warm."""
    f = steps_file(path)
    firsts = first_steps(f)
    rows = [r for r in rows_of(f) if "step_s" in r]
    if not rows:
        raise Bad(f"{f}: no GRPO step with its rollout record; did the run train a step?")
    out = []
    for r in rows:
        gen, step_s = r.get("generate_s") or 0.0, r["step_s"]
        out.append(
            {
                "step": r["step"],
                "first": r["step"] in firsts,
                "prepare_s": firsts.get(r["step"]),  # its process's pool preparation
                "step_s": step_s,
                "rows": r.get("rows"),
                "groups": r.get("groups"),
                "samples_per_s": r.get("rows", 0) / step_s if step_s > 0 else None,
                "generation_tokens_per_s": r.get("completion_tokens", 0) / gen if gen else None,
                "eval_phases_s": r.get("eval_phases_s") or {},
                "candidates": r.get("candidates"),  # evaluated (not cached, not format errors)
                **{k: float(r.get(k) or 0.0) for k in PHASES},
            }
        )
    return out


def evaluator_of(path: Path) -> str | None:
    """The evaluator fingerprint in the run folder's env.txt (`evaluator <hash>`, as
    gpu_suite.sh and train_h200.sh write it), None without one."""
    env = (path if path.is_dir() else path.parent) / "env.txt"
    if env.is_file():
        for line in env.read_text(errors="replace").splitlines():
            if line.startswith("evaluator "):
                return line.split()[1] if len(line.split()) > 1 else None
    return None


def _med(xs: list) -> float | None:
    v = [x for x in xs if x is not None]
    return round(statistics.median(v), 3) if v else None


def _mean(xs: list) -> float | None:
    v = [x for x in xs if x is not None]
    return round(statistics.fmean(v), 3) if v else None


def summarise(paths: list[Path]) -> dict:
    """One side of the comparison (the module doc)."""
    rows = [r for p in paths for r in read_steps(p)]
    shapes = {(r["rows"], r["groups"]) for r in rows}
    if len(shapes) != 1:
        raise Bad(f"steps of several shapes (rows, groups) {sorted(shapes)}: compare like runs")
    warm = [r for r in rows if not r["first"]]
    first = [r for r in rows if r["first"]]
    names = sorted({k for r in warm for k in r["eval_phases_s"]})
    (n_rows, n_groups) = shapes.pop()
    return {
        "runs": [str(p) for p in paths],
        "evaluators": sorted({evaluator_of(p) or "unknown" for p in paths}),
        "shape": {"rows": n_rows, "groups": n_groups},
        "warm_steps": len(warm),
        "first_steps": len(first),
        "warm_step_s_median": _med([r["step_s"] for r in warm]),
        "warm_step_s_mean": _mean([r["step_s"] for r in warm]),
        "first_step_s": _med([r["step_s"] for r in first]),
        "first_step_s_mean": _mean([r["step_s"] for r in first]),
        # what a new process pays before its first step ends, model loading aside: preparing
        # the pool (0.05 s where the result cache held it) and the first step
        "prepare_s": _med([r["prepare_s"] for r in first]),
        "prepare_s_max": max((r["prepare_s"] for r in first), default=None),
        "process_start_s": _med([r["prepare_s"] + r["step_s"] for r in first]),
        "samples_per_s": _med([r["samples_per_s"] for r in warm]),
        "generation_tokens_per_s": _med([r["generation_tokens_per_s"] for r in warm]),
        "phases_median_s": {k: _med([r[k] for r in warm]) for k in PHASES},
        "phases_mean_s": {k: _mean([r[k] for r in warm]) for k in PHASES},
        "eval_phases_median_s": {k: _med([r["eval_phases_s"].get(k) for r in warm]) for k in names},
        "bound": bound(warm),
    }


def bound(warm: list[dict]) -> dict:
    """What bounds a warm step, as medians over warm steps: the share of the step that is
    evaluation; the candidates evaluated, and evaluation seconds per candidate; and, where the
    run logged the evaluator's phases, the seconds per candidate of the GPU worker's serial
    part (every phase but `compile`, which the nvcc pool runs in parallel, and `wait`, the
    workers taking turns): with one worker per GPU a step's evaluation cannot end sooner."""
    per = [r["eval_s"] / r["candidates"] for r in warm if r["candidates"]]
    worker, per_worker = [], []
    for r in (r for r in warm if r["eval_phases_s"]):
        w = sum(v for k, v in r["eval_phases_s"].items() if k not in ("compile", "wait"))
        worker.append(w)
        if r["candidates"]:
            per_worker.append(w / r["candidates"])
    return {
        "eval_share": _med([r["eval_s"] / r["step_s"] for r in warm if r["step_s"] > 0]),
        "candidates_per_step": _med([r["candidates"] for r in warm]),
        "eval_s_per_candidate": _med(per),
        "worker_serial_s": _med(worker),
        "worker_serial_s_per_candidate": _med(per_worker),
    }


def table(doc: dict) -> list[str]:
    sides = [s for s in ("before", "after") if s in doc]
    lines = [f"{'':28s}" + "".join(f"{s:>12s}" for s in sides)]
    rows = [
        ("warm steps", "warm_steps"),
        ("warm step s (median)", "warm_step_s_median"),
        ("warm step s (mean)", "warm_step_s_mean"),
        ("first step s (median)", "first_step_s"),
        ("prepare s (median)", "prepare_s"),
        ("prepare + first step s", "process_start_s"),
        ("samples/s", "samples_per_s"),
        ("generation tokens/s", "generation_tokens_per_s"),
    ]
    for label, key in rows:
        lines.append(f"{label:28s}" + "".join(f"{_fmt(doc[s][key]):>12s}" for s in sides))
    for k in PHASES:
        vals = "".join(f"{_fmt(doc[s]['phases_median_s'][k]):>12s}" for s in sides)
        lines.append(f"{'  ' + k + ' (median)':28s}" + vals)
    for k in ("eval_share", "candidates_per_step", "eval_s_per_candidate"):
        vals = "".join(f"{_fmt(doc[s]['bound'][k]):>12s}" for s in sides)
        lines.append(f"{'  ' + k:28s}" + vals)
    k = "worker_serial_s_per_candidate"
    lines.append(
        f"{'  worker serial s/candidate':28s}"
        + "".join(f"{_fmt(doc[s]['bound'][k]):>12s}" for s in sides)
    )
    return lines


def _fmt(v) -> str:
    return "-" if v is None else (f"{v:.2f}" if isinstance(v, float) else str(v))


def plot(doc: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sides = [s for s in ("before", "after") if s in doc]
    fig = figure(doc, sides, plt)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def figure(doc: dict, sides: list[str], plt):
    """One bar per side, split into its phases' medians; a phase has one colour on every bar."""
    fig, ax = plt.subplots(figsize=(9, 1.8 + 0.8 * len(sides)))
    longest = 0.0
    for i, s in enumerate(sides):
        left = 0.0
        for j, k in enumerate(PHASES):
            v = doc[s]["phases_median_s"][k] or 0.0
            ax.barh(i, v, left=left, color=f"C{j}", label=k[:-2] if i == 0 else None)
            left += v
        ax.text(left, i, f"  {doc[s]['warm_step_s_median']:.1f} s (median step)", va="center")
        longest = max(longest, left)
    ax.set_xlim(0, 1.35 * longest or 1.0)
    ax.set_yticks(range(len(sides)), sides)
    ax.invert_yaxis()
    ax.set_xlabel("seconds per warm GRPO step (medians of each phase)")
    ax.legend(ncol=len(PHASES), fontsize=8, loc="lower center", bbox_to_anchor=(0.5, 1.0))
    fig.tight_layout()
    return fig


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", nargs="+", required=True, type=Path, help="run folders")
    ap.add_argument("--after", nargs="*", default=[], type=Path, help="run folders")
    ap.add_argument("--out", type=Path, default=None, help="the JSON (default: print only)")
    ap.add_argument("--plot", type=Path, default=None, help="a PNG of the step's phases")
    a = ap.parse_args(argv)
    try:
        doc = {"before": summarise(a.before)}
        if a.after:
            doc["after"] = summarise(a.after)
            if doc["after"]["shape"] != doc["before"]["shape"]:
                raise Bad(
                    f"before steps are {doc['before']['shape']}, after steps "
                    f"{doc['after']['shape']}: compare runs of one step shape"
                )
            ev = {s: doc[s]["evaluators"] for s in ("before", "after")}
            # the issue asks for one evaluator on both sides; say so when they differ or are
            # not known (a run folder without env.txt's evaluator line)
            doc["same_evaluator"] = ev["before"] == ev["after"] and "unknown" not in ev["after"]
            if not doc["same_evaluator"]:
                print(
                    f"note: evaluators differ or are unknown (before {ev['before']}, "
                    f"after {ev['after']}): phase times mix the runs' and the evaluators' changes",
                    file=sys.stderr,
                )
    except Bad as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    doc["command"] = "python bench/grpo_speed.py " + " ".join(argv or sys.argv[1:])
    doc["date"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    print("\n".join(table(doc)))
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(doc, indent=2) + "\n")
        print(f"-> {a.out}")
    if a.plot:
        plot(doc, a.plot)
        print(f"-> {a.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
