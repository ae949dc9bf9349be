"""Refinement over the sample set or dataset tasks: per task and turn, best reward and speedup.

    python bench/refine_sample.py --model scripted:weakest-first --turns 4 --samples 2 \\
        --out-dir bench/results/refine_h200/scripted_sample
    python bench/refine_sample.py --model smollm2 --turns 4 --samples 2 --patience 4 \\
        --out-dir bench/results/refine_h200/smollm2
    python bench/refine_sample.py --model scripted:weakest-first --turns 4 --samples 1 \\
        --patience 4 --tasks data/tasks.jsonl.gz --split heldout --min-impls 3 --limit 12 \\
        --out-dir bench/results/refine_h200/scripted_dataset

Runs `cudaperf.refine.refine_many` over every task of `cudaperf.tasks.io.load_sample()` (or
of `--tasks FILE`: one task per held-out family with enough implementations; or those named
with --task) in lockstep: one generation batch and one evaluator batch per turn.
Writes to --out-dir, each file rewritten or appended as the run goes (a crash keeps what was
done; --resume skips tasks whose summary is already in the trajectory):

- `trajectories.jsonl`: the refine trajectory (turn and summary records, `refine.trajectory`)
- `table.json`: per task and turn: best reward so far, the turn's best reward, its speedup
  against the task's baseline (naive CUDA for C→CUDA, eager PyTorch for PyTorch→CUDA) and
  status; per task the summary; per turn the mean best-so-far reward and generation seconds
- `table.md`: the same as Markdown (also printed at the end)
- `reward_per_turn.png`: mean best-so-far reward per turn over the tasks (matplotlib)

`--model`: `smollm2` (the bundled SmolLM2-135M-Instruct; `--model-cache` or
$CUDAPERF_MODEL_CACHE holds its converted checkpoint), `scripted:weakest-first` (replays each
task's implementations slowest-first by their stored measurements), a HF name, checkpoint
directory or .gguf file, or an http(s):// OpenAI-compatible server URL.
Without a GPU the evaluator only compiles (status `compiled`, no speedups).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path

from cudaperf.execute.config import EvalConfig
from cudaperf.refine import TurnRecord, make_backend, read_trajectory, refine_many
from cudaperf.refine.trajectory import SummaryRecord, finished_tasks
from cudaperf.reward import RewardConfig, RewardScorer
from cudaperf.reward.scorer import ranker_from_spec
from cudaperf.tasks.io import load_sample, load_tasks
from cudaperf.tasks.model import Task, TaskKind

T0 = time.perf_counter()


def say(msg: str) -> None:
    print(f"[{time.perf_counter() - T0:6.1f}s] {msg}", flush=True)


class Timed:
    """Wraps a backend: prints and records how long each generation call took."""

    def __init__(self, inner) -> None:
        self.inner, self.name, self.seconds = inner, inner.name, []

    def _timed(self, what: str, fn, *args):
        say(f"generating {what}")
        t = time.perf_counter()
        out = fn(*args)
        self.seconds.append(round(time.perf_counter() - t, 2))
        say(f"generated in {self.seconds[-1]:.1f}s; evaluating")
        return out

    def generate(self, messages, n):
        return self._timed(f"{n} replies", self.inner.generate, messages, n)

    def __getattr__(self, name):
        if name == "generate_batch" and hasattr(self.inner, "generate_batch"):
            return lambda convs, n: self._timed(
                f"{n} replies for each of {len(convs)} tasks", self.inner.generate_batch, convs, n
            )
        raise AttributeError(name)


def baseline(task: Task) -> str:
    return "naive" if task.kind is TaskKind.C2CUDA else "eager"


def turn_row(task: Task, rec: TurnRecord, best_so_far: float | None) -> dict:
    top = next((s for s in rec.samples if s.index == rec.chosen), None)
    res = top.result if top else None
    statuses = [s.reward.status for s in rec.samples if s.reward is not None]
    sp = getattr(res, f"speedup_vs_{baseline(task)}", None) if res else None
    return {
        "turn": rec.turn,
        "best_so_far": best_so_far,
        "turn_best": rec.best_total,
        "speedup": sp,
        "baseline": baseline(task),
        "status": top.reward.status if top and top.reward else (statuses[0] if statuses else ""),
        "statuses": statuses,
        "reply_head": (top.reply.strip().splitlines() or [""])[0][:80] if top else "",
    }


def build_table(tasks: list[Task], records: list, meta: dict) -> dict:
    by_id = {t.id: t for t in tasks}
    rows: dict[str, dict] = {}
    for r in records:
        row = rows.setdefault(r.task_id, {"task": r.task_id, "turns": [], "summary": None})
        if isinstance(r, SummaryRecord):
            row["summary"] = r.model_dump(exclude={"best_code"})
            continue
        prev = [t["best_so_far"] for t in row["turns"] if t["best_so_far"] is not None]
        best = max([*prev, *([r.best_total] if r.best_total is not None else [])], default=None)
        row["turns"].append(turn_row(by_id[r.task_id], r, best))
    per_turn = []
    for k in range(1, meta["turns"] + 1):
        vals = []
        for row in rows.values():
            got = [t["best_so_far"] for t in row["turns"] if t["turn"] <= k]
            if got and got[-1] is not None and (row["summary"] or len(row["turns"]) >= k):
                vals.append(got[-1])  # a stopped task carries its best forward
        per_turn.append(
            {
                "turn": k,
                "tasks": len(vals),
                "mean_best_so_far": sum(vals) / len(vals) if vals else None,
            }
        )
    return meta | {"tasks": list(rows.values()), "per_turn": per_turn}


def _f(v, fmt="+.3f") -> str:
    return "-" if v is None else format(v, fmt)


def markdown(table: dict) -> str:
    head = (
        f"# refine on {table.get('task_set', 'the sample set')}: {table['model']}\n\n"
        f"{table['turns']} turns x {table['samples']} samples, mode {table['mode']}, "
        f"gpu {table['gpu'] or '-'}, {table['elapsed_s']:.0f} s.\n"
        "Per turn: best reward so far / the turn's best reward / its speedup vs the baseline "
        "(naive CUDA for C, eager PyTorch for torch) / its status.\n\n"
    )
    n = table["turns"]
    lines = [
        "| task | " + " | ".join(f"turn {k}" for k in range(1, n + 1)) + " | stopped |",
        "|---" * (n + 2) + "|",
    ]
    for row in table["tasks"]:
        cells = []
        for k in range(1, n + 1):
            t = next((t for t in row["turns"] if t["turn"] == k), None)
            sp = f"{t['speedup']:.2f}x" if t and t["speedup"] else "-"
            cells.append(
                f"{_f(t['best_so_far'])} / {_f(t['turn_best'])} / {sp} / {t['status']}" if t else ""
            )
        stop = row["summary"]["stopped"] if row["summary"] else "(running)"
        lines.append(
            f"| {row['task'].removeprefix('sample/')} | " + " | ".join(cells) + f" | {stop} |"
        )
    means = " | ".join(_f(p["mean_best_so_far"]) for p in table["per_turn"])
    lines.append(f"| **mean best so far** | {means} | |")
    return head + "\n".join(lines) + "\n"


def plot(table: dict, path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        say("matplotlib is not installed: no plot")
        return
    pts = [
        (p["turn"], p["mean_best_so_far"])
        for p in table["per_turn"]
        if p["mean_best_so_far"] is not None
    ]
    fig, ax = plt.subplots(figsize=(5, 3.2))
    for row in table["tasks"]:
        xs = [t["turn"] for t in row["turns"] if t["best_so_far"] is not None]
        ys = [t["best_so_far"] for t in row["turns"] if t["best_so_far"] is not None]
        ax.plot(xs, ys, color="0.8", lw=0.8)
    if pts:
        label = "mean over tasks (a stopped task keeps its best)"
        ax.plot(*zip(*pts, strict=True), "o-", color="C0", lw=2, label=label)
    ax.set(
        xlabel="turn",
        ylabel="best reward so far",
        xticks=range(1, table["turns"] + 1),
        title=f"{table['model']} ({table['mode']})",
    )
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="scripted:weakest-first")
    p.add_argument("--turns", type=int, default=4)
    p.add_argument("--samples", type=int, default=2)
    p.add_argument("--patience", type=int, default=1)
    p.add_argument("--out-dir", type=Path, required=True)
    p.add_argument("--task", action="append", help="only these task ids (or their last parts)")
    p.add_argument(
        "--tasks",
        type=Path,
        help="pick tasks from this task file (e.g. the dataset, "
        "data/tasks.jsonl.gz) instead of the sample set",
    )
    p.add_argument(
        "--split",
        default="heldout",
        help="with --tasks: families of this split "
        "(train, validation, test, heldout; splits.json beside the file)",
    )
    p.add_argument(
        "--min-impls", type=int, default=3, help="with --tasks: at least this many implementations"
    )
    p.add_argument(
        "--limit",
        type=int,
        default=12,
        help="with --tasks: at most this many tasks, one per family, families in name order",
    )
    p.add_argument("--max-new-tokens", type=int, default=768)
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--trials", type=int, default=30, help="timed trials per config")
    p.add_argument("--preset", default="unified")
    p.add_argument(
        "--ranker",
        default="default",
        help="the reward's ranker term: default (the "
        "packaged feature ranker), none, or a ranker file/folder",
    )
    p.add_argument("--cache-dir", type=Path, help="evaluator build/result cache")
    p.add_argument("--model-cache", type=Path, default=os.environ.get("CUDAPERF_MODEL_CACHE"))
    p.add_argument("--compile-only", action="store_true", default=None)
    p.add_argument("--resume", action="store_true", help="skip tasks already summarised")
    return p.parse_args(argv)


def select(tasks: list[Task], names: list[str] | None) -> list[Task]:
    if not names:
        return tasks
    out = [t for t in tasks if any(t.id == n or t.id.endswith("/" + n) for n in names)]
    if len(out) != len(names):
        sys.exit(f"--task {names}: matched {[t.id for t in out]}")
    return out


def pick(args) -> list[Task]:
    """`--tasks`: one task per family of `--split` with >= `--min-impls` implementations (the
    first by id), up to `--limit` families; otherwise the sample set."""
    if args.tasks is None:
        return load_sample()
    from cudaperf.tasks.splits import read_splits, tasks_in_split

    sp = args.tasks.parent / "splits.json"
    tasks = tasks_in_split(
        load_tasks(args.tasks), args.split, read_splits(sp) if sp.exists() else None
    )
    first: dict[str, Task] = {}
    for t in sorted(tasks, key=lambda t: t.id):
        if len(t.implementations) >= args.min_impls:
            first.setdefault(t.family, t)
    return [first[f] for f in sorted(first)][: args.limit]


def backend_for(args, tasks: list[Task]):
    if args.model.startswith("scripted:"):
        return make_backend(args.model, tasks=tasks)
    if args.model.startswith(("http://", "https://")):
        return make_backend(
            args.model, temperature=args.temperature, max_tokens=args.max_new_tokens
        )
    return make_backend(
        args.model,
        temperature=args.temperature,
        seed=args.seed,
        max_new_tokens=args.max_new_tokens,
        cache_dir=args.model_cache,
    )


def main(argv=None) -> None:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    tasks = select(pick(args), args.task)
    out = args.out_dir
    out.mkdir(parents=True, exist_ok=True)
    traj = out / "trajectories.jsonl"
    kept = _resume(traj) if args.resume else []
    if not args.resume and traj.exists():
        traj.unlink()
    done = finished_tasks(kept)
    todo = [t for t in tasks if t.id not in done]
    ev = {"trials": args.trials, "compile_baseline": False}
    ev |= {
        k: v
        for k, v in (("compile_only", args.compile_only), ("cache_dir", args.cache_dir))
        if v is not None
    }
    cfg = EvalConfig(**ev)
    ranker = ranker_from_spec(args.ranker)
    scorer = RewardScorer(
        tasks,
        config=RewardConfig.preset(args.preset),
        eval_config=cfg,
        ranker=ranker,
        analyze="always",
    )
    gpu = _gpu()
    mode = "compile-only" if cfg.compile_only or (cfg.compile_only is None and not gpu) else "full"
    say(f"{len(todo)} tasks to refine ({len(done)} done before), {mode}; loading {args.model}")
    backend = Timed(backend_for(args, todo or tasks))
    say(f"backend ready: {backend.name}")
    meta = {
        "model": args.model,
        "task_set": str(args.tasks or "the sample set"),
        "turns": args.turns,
        "samples": args.samples,
        "max_new_tokens": args.max_new_tokens,
        "preset": args.preset,
        "ranker": "none" if ranker is None else args.ranker,
        "mode": mode,
        "gpu": gpu,
        "trials": args.trials,
        "command": " ".join(sys.argv),
    }

    def write(_=None) -> dict:
        records = read_trajectory(traj) if traj.exists() else []
        modes = {
            s.result.mode
            for r in records
            if isinstance(r, TurnRecord)
            for s in r.samples
            if s.result is not None
        }
        meta["mode"] = "/".join(sorted(modes)) or meta["mode"]
        table = build_table(
            tasks,
            records,
            meta | {"elapsed_s": time.perf_counter() - T0, "gen_seconds": backend.seconds},
        )
        (out / "table.json").write_text(json.dumps(table, indent=1), encoding="utf-8")
        (out / "table.md").write_text(markdown(table), encoding="utf-8")
        return table

    def on_turn(rec: TurnRecord) -> None:
        top = next((s for s in rec.samples if s.index == rec.chosen), None)
        rw = top.reward if top else None
        sp = f"{rw.speedup:.2f}x vs {rw.baseline}" if rw and rw.speedup else "-"
        say(
            f"turn {rec.turn} {rec.task_id}: best {_f(rec.best_total)} "
            f"({rw.status if rw else 'no valid reward'}), speedup {sp}"
        )
        write()

    if todo:
        refine_many(
            todo,
            backend,
            scorer,
            turns=args.turns,
            samples=args.samples,
            patience=args.patience,
            out=traj,
            on_turn=on_turn,
        )
    table = write()
    plot(table, out / "reward_per_turn.png")
    print(markdown(table), flush=True)
    say(f"wrote {out}/trajectories.jsonl, table.json, table.md, reward_per_turn.png")


def _resume(traj: Path) -> list:
    """Keep only the records of finished tasks (a task cut off mid-run starts again)."""
    if not traj.exists():
        return []
    records = read_trajectory(traj)
    done = finished_tasks(records)
    kept = [r for r in records if r.task_id in done]
    traj.write_text("".join(r.model_dump_json() + "\n" for r in kept), encoding="utf-8")
    return kept


def _gpu() -> str:
    try:
        from cudaperf.execute.build import detect_gpus

        gpus = detect_gpus()
        return gpus[0].name if gpus else ""
    except Exception:  # noqa: BLE001 - a label only
        return ""


if __name__ == "__main__":
    main()
