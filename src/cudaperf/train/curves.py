"""Training curves from run folders' `steps.jsonl`: per-step tables and plots.

`read_steps(run)` gives one row per GRPO step (rollout statistics: reward components, the
turn scores, status shares, share of groups with >= 2 correct, generate / evaluate / update /
step seconds, tokens; and the trainer's loss). `plot_runs(runs, path)` draws, for one run, the
reward components and the status shares stacked per step; for several runs, the mean
return over runs as a line with a 95% band (mean ± 1.96 standard errors) and each run thin.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

__all__ = ["plot_runs", "read_steps", "summary"]

STATUSES = ("ok", "wrong_output", "runtime_error", "timeout", "compiled", "compile_error",
            "format_error", "rejected", "infra_error")  # fmt: skip


def read_steps(run: str | Path) -> list[dict]:
    """Rows per step of `run` (a run folder or its steps.jsonl), in step order."""
    path = Path(run)
    path = path / "steps.jsonl" if path.is_dir() else path
    if not path.is_file():
        raise ValueError(f"{run}: no steps.jsonl; give a `cudaperf train` run folder")
    by_step: dict[int, dict] = {}
    rollouts: dict[int, list[dict]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        rec = json.loads(line)
        kind = rec.get("kind")
        if kind == "rollout":  # the rollout of step s is logged while global_step is s - 1
            rollouts.setdefault(rec["step"] + 1, []).append(rec)
        elif kind == "step":
            by_step.setdefault(rec["step"], {"step": rec["step"]})["step_s"] = rec["step_s"]
        elif kind == "trainer" and "loss" in rec:
            by_step.setdefault(rec["step"], {"step": rec["step"]})["loss"] = rec["loss"]
    for step, recs in rollouts.items():
        row = by_step.setdefault(step, {"step": step})
        row.update(merge_rollouts(recs))
        if "step_s" in row:  # what is left of the step after generating and evaluating
            row["update_s"] = round(row["step_s"] - row["generate_s"] - row["eval_s"], 3)
    return [by_step[s] for s in sorted(by_step) if "rows" in by_step[s]]


def merge_rollouts(recs: list[dict]) -> dict:
    """One step's rollout records of several processes as one: counts and tokens summed,
    seconds the slowest process's, means and shares weighted by rows (groups for the share
    of groups with >= 2 correct)."""
    rows = sum(r["rows"] for r in recs) or 1
    groups = sum(r.get("groups", 0) for r in recs) or 1
    out: dict = {"rows": rows, "groups": groups, "processes": len(recs)}
    for k in ("prompt_tokens", "completion_tokens"):
        out[k] = sum(r.get(k, 0) for r in recs)
    for k in ("generate_s", "eval_s"):
        out[k] = max(r.get(k, 0.0) for r in recs)
    keys = {k for r in recs for k in r if k.endswith("_mean")}
    for k in keys:
        have = [(r[k], r["rows"]) for r in recs if r.get(k) is not None]
        w = sum(n for _, n in have)
        out[k] = sum(v * n for v, n in have) / w if w else None
    shares: dict[str, float] = {}
    for r in recs:
        for s, v in r.get("status_share", {}).items():
            shares[s] = shares.get(s, 0.0) + v * r["rows"] / rows
    out["status_share"] = shares
    out["groups_2_correct"] = sum(r.get("groups_2_correct", 0.0) * r.get("groups", 0)
                                  for r in recs) / groups  # fmt: skip
    return out


def summary(runs: list[str | Path]) -> dict:
    """Per run: steps, first/last return and score, mean seconds per step."""
    out = {}
    for r in runs:
        rows = read_steps(r)
        if not rows:
            out[str(r)] = {"steps": 0}
            continue
        out[str(r)] = {
            "steps": len(rows),
            "return_first": rows[0].get("return_mean"), "return_last": rows[-1].get("return_mean"),
            "score_first": rows[0].get("score_mean"), "score_last": rows[-1].get("score_mean"),
            "step_s_mean": _mean([x.get("step_s") for x in rows]),
            "generate_s_mean": _mean([x.get("generate_s") for x in rows]),
            "eval_s_mean": _mean([x.get("eval_s") for x in rows]),
            "update_s_mean": _mean([x.get("update_s") for x in rows]),
        }  # fmt: skip
    return out


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
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 7), sharex=True)
    if len(tables) == 1:
        rows = tables[0]
        steps = [r["step"] for r in rows]
        for key in ("return_mean", "score_mean", "outcome_mean", "speed_mean", "structure_mean",
                    "ranker_mean"):  # fmt: skip
            top.plot(steps, [r.get(key) for r in rows], label=key.removesuffix("_mean"))
        _stack(bottom, steps, rows)
    else:
        _band(top, tables, "return_mean")
        _band(bottom, tables, "groups_2_correct")
        bottom.set_ylabel("groups with >= 2 correct")
    top.set_ylabel("reward")
    top.legend(fontsize=8)
    bottom.set_xlabel("GRPO step")
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


def _band(ax, tables, key) -> None:
    steps = sorted({r["step"] for t in tables for r in t})
    for t in tables:
        ax.plot([r["step"] for r in t], [r.get(key) for r in t], lw=0.6, alpha=0.5)
    mean, lo, hi = [], [], []
    for s in steps:
        v = [r[key] for t in tables for r in t if r["step"] == s and r.get(key) is not None]
        m = sum(v) / len(v) if v else float("nan")
        se = (math.sqrt(sum((x - m) ** 2 for x in v) / (len(v) - 1) / len(v))
              if len(v) > 1 else 0.0)  # fmt: skip
        mean.append(m)
        lo.append(m - 1.96 * se)
        hi.append(m + 1.96 * se)
    ax.plot(steps, mean, color="black", label=f"mean of {len(tables)} runs")
    ax.fill_between(steps, lo, hi, alpha=0.25, label="95% band")
