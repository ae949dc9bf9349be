"""Training curves from run folders' `steps.jsonl`: per-step tables and plots.

`read_steps(run)` gives one row per GRPO step (rollout statistics: reward components, the
turn scores, status shares, share of groups with >= 2 correct, tokens; the trainer's loss; and
the step-time breakdown, `BREAKDOWN`: seconds generating, analysing, evaluating (of which in
the evaluator and waiting for another process's timing), timing the canaries, and updating
(forward, backward and optimizer: the step's seconds minus the rollout's, of which the
optimizer step alone), plus the candidates evaluated and cache hits, and each task's mean
score, `score_by_task`, which `first_last_by_task` pairs across a task's visits).
`plot_runs(runs, path)`
draws, for one run, the reward components, the status shares stacked per step and the step
time stacked by part; for several runs, the mean return and the mean share of groups with
>= 2 correct as lines with a 95% band (mean ± 1.96 standard errors), each run thin, and each
run's step seconds. A step's numbers follow which pool tasks it drew, so one run's plot also
draws the mean of the last `BLOCK` steps (return, outcome, share ok), and `summary` gives the
means per block of `BLOCK` steps (`blocks`): the trend that single steps hide.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from cudaperf.execute.types import sum_phases
from cudaperf.jsonl import complete_lines

__all__ = [
    "blocks",
    "first_last_by_task",
    "mean_band",
    "paired_change",
    "plot_runs",
    "read_steps",
    "rolling",
    "summary",
    "trained_steps",
]

BLOCK = 10  # steps per block of `blocks` and window of the plot's rolling means

# seconds of a step, by part (stacked in the plot: generate, analyse, eval, canary, update)
BREAKDOWN = (
    "generate_s",
    "analyse_s",
    "eval_s",
    "evaluator_s",
    "eval_wait_s",
    "canary_s",
    "update_s",
    "optimizer_s",
    "step_s",
)
STACKED = ("generate_s", "analyse_s", "eval_s", "canary_s", "update_s")
STATUSES = (
    "ok",
    "wrong_output",
    "runtime_error",
    "timeout",
    "compiled",
    "compile_error",
    "format_error",
    "rejected",
    "infra_error",
)


def trained_steps(path: str | Path) -> list[int]:
    """The distinct steps a run's steps.jsonl logged as trained (its `step` rows), in order;
    [] when there is no such file; a last line cut by a killed writer is skipped. A resumed
    process logs each step once more only if it redid it, so this counts a step once."""
    p = Path(path)
    if not p.is_file():
        return []
    steps = set()
    for line in complete_lines(p.read_text(encoding="utf-8")):
        if not line.strip():
            continue
        row = json.loads(line)
        if isinstance(row, dict) and row.get("kind") == "step":
            steps.add(int(row["step"]))
    return sorted(steps)


def read_steps(run: str | Path) -> list[dict]:
    """Rows per step of `run` (a run folder or its steps.jsonl), in step order."""
    path = Path(run)
    path = path / "steps.jsonl" if path.is_dir() else path
    if not path.is_file():
        raise ValueError(f"{run}: no steps.jsonl; give a `cudaperf train` run folder")
    by_step: dict[int, dict] = {}
    rollouts: dict[int, list[dict]] = {}
    for line in complete_lines(path.read_text(encoding="utf-8")):  # a cut last line: skipped
        if not line.strip():
            continue
        rec = json.loads(line)
        kind = rec.get("kind")
        if kind == "rollout":  # the rollout of step s is logged while global_step is s - 1
            if "processes" in rec:  # one merged record per step; a rerun's replaces it
                rollouts[rec["step"] + 1] = [rec]
            else:  # older runs: one record per process
                rollouts.setdefault(rec["step"] + 1, []).append(rec)
        elif kind == "step":
            row = by_step.setdefault(rec["step"], {"step": rec["step"]})
            row.update({k: rec[k] for k in ("step_s", "optimizer_s") if k in rec})
        elif kind == "trainer" and "loss" in rec:
            by_step.setdefault(rec["step"], {"step": rec["step"]})["loss"] = rec["loss"]
    for step, recs in rollouts.items():
        row = by_step.setdefault(step, {"step": step})
        rec = recs[0] if len(recs) == 1 and "processes" in recs[0] else merge_rollouts(recs)
        row.update({k: v for k, v in rec.items() if k not in ("kind", "step", "run")})
        if "step_s" in row:  # what is left of the step after the rollout
            rollout = sum(
                row.get(k, 0.0) for k in ("generate_s", "analyse_s", "eval_s", "canary_s")
            )
            row["update_s"] = round(row["step_s"] - rollout, 3)
    return [by_step[s] for s in sorted(by_step) if "rows" in by_step[s]]


SUMS = ("rows", "groups", "prompt_tokens", "completion_tokens", "candidates", "cached")
SLOWEST = ("generate_s", "analyse_s", "eval_s", "evaluator_s", "eval_wait_s", "canary_s")


def merge_rollouts(recs: list[dict]) -> dict:
    """One step's rollout records of several processes (in process order) as one record with
    the fields of a one-process record: counts and tokens summed, seconds the slowest
    process's, means, turn scores and status shares weighted by rows (the share of groups with
    >= 2 correct by groups), `tasks` per process in `tasks_by_process`, per-task scores merged
    (weighted by rows), evaluation seconds per phase summed, canaries and samples
    concatenated."""
    first = recs[0]
    rows = sum(r["rows"] for r in recs) or 1
    groups = sum(r.get("groups", 0) for r in recs) or 1
    out: dict = {k: first[k] for k in ("kind", "step") if k in first}
    out["processes"] = len(recs)
    out |= {k: sum(r.get(k, 0) for r in recs) for k in SUMS if any(k in r for r in recs)}
    out |= {k: max(r.get(k, 0.0) for r in recs) for k in SLOWEST if any(k in r for r in recs)}
    for k in sorted({k for r in recs for k in r if k.endswith("_mean")}):
        out[k] = _weighted([(r.get(k), r["rows"]) for r in recs])
    if any("score_by_turn" in r for r in recs):
        turns = max(len(r.get("score_by_turn", [])) for r in recs)
        out["score_by_turn"] = [
            _weighted(
                [
                    (r["score_by_turn"][k], r["rows"])
                    for r in recs
                    if k < len(r.get("score_by_turn", []))
                ]
            )
            for k in range(turns)
        ]
    shares: dict[str, float] = {}
    for r in recs:
        for s, v in r.get("status_share", {}).items():
            shares[s] = round(shares.get(s, 0.0) + v * r["rows"] / rows, 4)
    out["status_share"] = dict(sorted(shares.items()))
    out["groups_2_correct"] = round(
        sum(r.get("groups_2_correct", 0.0) * r.get("groups", 0) for r in recs) / groups, 4
    )
    if any("tasks" in r for r in recs):
        out["tasks_by_process"] = [r.get("tasks", []) for r in recs]
    if any("score_by_task" in r for r in recs):
        out["score_by_task"] = _merge_by_task([r.get("score_by_task", {}) for r in recs])
    if any("eval_phases_s" in r for r in recs):  # per phase, summed over processes
        out["eval_phases_s"] = sum_phases(r.get("eval_phases_s", {}) for r in recs)
    if any("canary" in r for r in recs):
        out["canary"] = [c for r in recs for c in r.get("canary", [])]
    if any("samples" in r for r in recs):
        out["samples"] = [s for r in recs for s in r.get("samples", [])]
    return out


def _merge_by_task(parts: list[dict]) -> dict:
    """Processes' {task: {"score", "rows"}} as one (a task in two processes: weighted by rows)."""
    rows: dict[str, list] = {}
    for part in parts:
        for task, v in part.items():
            rows.setdefault(task, []).append((v.get("score"), v.get("rows", 0)))
    return {t: {"score": _weighted(p), "rows": sum(n for _, n in p)} for t, p in rows.items()}


def first_last_by_task(rows: list[dict]) -> dict:
    """The pool's tasks recur: per task seen (and scored) at two steps or more, its first and its
    last step's mean score, paired. Mean first, mean last, mean and standard error of the
    difference, and how many tasks rose or fell: a learning signal that the steps' changing task
    mix does not blur (a step's mean moves with which tasks it drew)."""
    seen: dict[str, list[float]] = {}
    for row in rows:
        for task, v in (row.get("score_by_task") or {}).items():
            if v.get("score") is not None:
                seen.setdefault(task, []).append(v["score"])
    return paired_change([(v[0], v[-1]) for v in seen.values() if len(v) >= 2])


def paired_change(pairs: list[tuple[float, float]]) -> dict:
    """(first, last) per task: how many, the mean first and last, the mean and standard error
    of last - first, and how many rose or fell (`first_last_by_task`'s statistics)."""
    if not pairs:
        return {"tasks": 0}
    diffs = [b - a for a, b in pairs]
    n = len(diffs)
    mean = sum(diffs) / n
    se = (sum((d - mean) ** 2 for d in diffs) / (n - 1) / n) ** 0.5 if n > 1 else None
    return {
        "tasks": n,
        "first_mean": round(sum(a for a, _ in pairs) / n, 4),
        "last_mean": round(sum(b for _, b in pairs) / n, 4),
        "diff_mean": round(mean, 4),
        "diff_se": round(se, 4) if se is not None else None,
        "rose": sum(d > 0 for d in diffs),
        "fell": sum(d < 0 for d in diffs),
    }


def blocks(rows: list[dict], size: int = BLOCK) -> list[dict]:
    """Means per block of `size` consecutive steps (the last block may be shorter): return,
    score, outcome, the shares ok and compile_error, and each turn's score (`score_by_turn`,
    turn 1 first). Training-set numbers, like every curve: a block's tasks are the pool's,
    drawn again and again."""
    out = []
    for i in range(0, len(rows), size):
        part = rows[i : i + size]
        share = [r.get("status_share") or {} for r in part]
        by_turn = [r.get("score_by_turn") or [] for r in part]
        turns = max(map(len, by_turn), default=0)
        out.append(
            {
                "steps": f"{part[0]['step']}-{part[-1]['step']}",
                "return": _mean([r.get("return_mean") for r in part]),
                "score": _mean([r.get("score_mean") for r in part]),
                "outcome": _mean([r.get("outcome_mean") for r in part]),
                "ok": _mean([s.get("ok", 0.0) for s in share]),
                "compile_error": _mean([s.get("compile_error", 0.0) for s in share]),
                "score_by_turn": [
                    _mean([t[k] for t in by_turn if len(t) > k]) for k in range(turns)
                ],
            }
        )
    return out


def rolling(values: list, size: int = BLOCK) -> list[float | None]:
    """Per position, the mean of the last `size` values that are numbers (None while none)."""
    out = []
    for i in range(len(values)):
        out.append(_mean(values[max(0, i - size + 1) : i + 1]))
    return out


def _weighted(pairs) -> float | None:
    have = [(v, n) for v, n in pairs if v is not None]
    w = sum(n for _, n in have)
    return round(sum(v * n for v, n in have) / w, 4) if w else None


def summary(runs: list[str | Path]) -> dict:
    """Per run: steps, first/last return and score, mean seconds per step (and per evaluator
    phase, `eval_phases_s_mean`)."""
    out = {}
    for r in runs:
        rows = read_steps(r)
        if not rows:
            out[str(r)] = {"steps": 0}
            continue
        out[str(r)] = {
            "steps": len(rows),
            "return_first": rows[0].get("return_mean"),
            "return_last": rows[-1].get("return_mean"),
            "score_first": rows[0].get("score_mean"),
            "score_last": rows[-1].get("score_mean"),
            **{f"{k}_mean": _mean([x.get(k) for x in rows]) for k in BREAKDOWN},
            "eval_phases_s_mean": _phase_means(rows),
            "candidates_per_step": _mean([x.get("candidates") for x in rows]),
            "cached_per_step": _mean([x.get("cached") for x in rows]),
            "processes": rows[-1].get("processes", 1),
            "first_last_by_task": first_last_by_task(rows),
            "blocks": blocks(rows),
        }
    return out


def _phase_means(rows: list[dict]) -> dict[str, float]:
    """The evaluator's seconds per phase (`eval_phases_s`), mean per step over the steps that
    logged them ({} for runs from before the evaluator reported phases)."""
    logged = [x["eval_phases_s"] for x in rows if x.get("eval_phases_s")]
    return {k: round(v / len(logged), 3) for k, v in sum_phases(logged, digits=None).items()}


def _mean(xs) -> float | None:
    v = [x for x in xs if isinstance(x, int | float)]
    return round(sum(v) / len(v), 4) if v else None


def plot_runs(runs: list[str | Path], path: str | Path) -> Path:
    """Write the plot (PNG) for `runs` to `path` (see the module doc)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tables = [read_steps(r) for r in runs]
    if not any(tables):
        raise ValueError("no GRPO steps in these runs' steps.jsonl")
    fig, (top, bottom, times) = plt.subplots(3, 1, figsize=(8, 10), sharex=True)
    if len(tables) == 1:
        rows = tables[0]
        steps = [r["step"] for r in rows]
        for key in (
            "return_mean",
            "score_mean",
            "outcome_mean",
            "speed_mean",
            "structure_mean",
            "ranker_mean",
        ):
            top.plot(steps, [r.get(key) for r in rows], label=key.removesuffix("_mean"))
        for key, style in (("return_mean", "k--"), ("outcome_mean", "k:")):
            name = key.removesuffix("_mean")
            smooth = rolling([r.get(key) for r in rows])
            top.plot(steps, smooth, style, lw=1.6, label=f"{name}, mean of last {BLOCK} steps")
        _stack(bottom, steps, rows)
        ok = rolling([(r.get("status_share") or {}).get("ok", 0.0) for r in rows])
        bottom.plot(steps, ok, "k--", lw=1.6, label=f"ok, mean of last {BLOCK} steps")
        bottom.legend(fontsize=7, loc="lower left", ncol=3, framealpha=0.7)
        _times(times, steps, rows)
    else:
        _band(top, tables, "return_mean")
        _band(bottom, tables, "groups_2_correct")
        bottom.set_ylabel("groups with >= 2 correct")
        for run, t in zip(runs, tables, strict=True):
            times.plot(
                [r["step"] for r in t], [r.get("step_s") for r in t], lw=0.8, label=Path(run).name
            )
        times.set_ylabel("seconds per step")
        times.legend(fontsize=7)
    top.set_ylabel("reward")
    top.legend(fontsize=7, ncol=2, framealpha=0.7)
    times.set_xlabel("GRPO step")
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def _stack(ax, steps, rows) -> None:
    shares = [[r.get("status_share", {}).get(s, 0.0) for r in rows] for s in STATUSES]
    keep = [(s, v) for s, v in zip(STATUSES, shares, strict=True) if any(v)]
    ax.stackplot(steps, *[v for _, v in keep], labels=[s for s, _ in keep])
    ax.set_ylabel("share of samples")
    ax.legend(fontsize=7, loc="upper left")


def _times(ax, steps, rows) -> None:
    parts = [(k, [max(0.0, r.get(k) or 0.0) for r in rows]) for k in STACKED]
    keep = [(k, v) for k, v in parts if any(v)]
    if keep:
        ax.stackplot(steps, *[v for _, v in keep], labels=[k.removesuffix("_s") for k, _ in keep])
        ax.legend(fontsize=7, loc="upper left")
    ax.set_ylabel("seconds per step")


def _band(ax, tables, key) -> None:
    for t in tables:
        ax.plot([r["step"] for r in t], [r.get(key) for r in t], lw=0.6, alpha=0.5)
    steps, mean, half = mean_band(tables, key)
    ax.plot(steps, mean, color="black", label=f"mean of {len(tables)} runs")
    ax.fill_between(
        steps,
        [m - h for m, h in zip(mean, half, strict=True)],
        [m + h for m, h in zip(mean, half, strict=True)],
        alpha=0.25,
        label="95% band",
    )


def mean_band(
    tables: list[list[dict]], key: str, steps: list[int] | None = None
) -> tuple[list[int], list[float], list[float]]:
    """Per step (`steps`, default every step some table has): the mean of `key` over the
    tables' rows of that step and 1.96 standard errors (0 for one value; a NaN mean for none)."""
    if steps is None:
        steps = sorted({r["step"] for t in tables for r in t})
    mean, half = [], []
    for s in steps:
        v = [r[key] for t in tables for r in t if r["step"] == s and r.get(key) is not None]
        m = sum(v) / len(v) if v else float("nan")
        se = math.sqrt(sum((x - m) ** 2 for x in v) / (len(v) - 1) / len(v)) if len(v) > 1 else 0.0
        mean.append(m)
        half.append(1.96 * se)
    return steps, mean, half
