"""Time per decode step of every committed chunk of the ablation's 1-turn bench runs.

`dynamic` generation decodes a chunk's replies in one batch until the longest ends, so a
chunk's generation time is about (its longest reply in tokens) x (the time of one decode step).
This reads each run's `timing.jsonl` (one row a chunk) and the replies the chunk generated (its
records in the trajectory, in order; for a last chunk the run stopped in, `pending_replies.jsonl`)
and prints, per chunk: its tasks, generation seconds, longest reply and replies at the cap
(tokens, counted with SmolLM2's tokenizer), and milliseconds per decode step; a JSON file and a
plot of the per-step times by date come with it.

    python bench/ablation/decode_steps.py            # bench/results/ablation/bench, all runs

A chunk whose generation was cut (not complete, no pending replies) says nothing of a step's
time and is left out. A process's first chunk includes warming up the model.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from cudaperf.refine.trajectory import TurnRecord  # noqa: E402
from cudaperf.report.run import (  # noqa: E402
    PENDING,
    TIMING,
    read_records,
    read_timing,
    trajectory_file,
)

BENCH = ROOT / "bench/results/ablation/bench"
OUT = BENCH / "decode_steps.json"
GAP_S = 5.0  # seconds between one chunk's end and the next's start within one process
CAP = 1024  # the ablation's --max-tokens (PROTOCOL.md, session-30 note (5))
KINDS = {"first": "first", "same": "same shape", "new": "new shape"}
KIND_WHAT = {
    "first": "a process's first chunk",
    "same": "a later chunk of as many tasks as the one before it",
    "new": "a later chunk of another number of tasks",
}


def _pending(run: Path) -> list[dict]:
    """The reply sets of the chunk the run stopped in (`refine.pending`'s file; [] if none)."""
    path = run / PENDING
    return [json.loads(x) for x in path.read_text().splitlines() if x] if path.is_file() else []


def run_chunks(run: Path, count: Callable[[str], int], cap: int = CAP) -> list[dict]:
    """One row per chunk of `run` (a bench run folder of 1 turn) whose replies are known."""
    meta = json.loads((run / "run.json").read_text())
    if meta.get("turns", 1) != 1:
        raise ValueError(f"{run}: a run of {meta.get('turns')} turns (this reads 1-turn runs)")
    records = read_records(trajectory_file(run))
    turns = [r for r in records if isinstance(r, TurnRecord) and r.turn == 1]
    timing = [r for r in read_timing(run / TIMING) if r.get("generate_s") is not None]
    pending = _pending(run)
    # timing.jsonl came after some runs' first chunks: their rows are the last chunks
    i = len(turns) - sum(t["tasks"] for t in timing if t.get("complete"))
    if i < 0:
        raise ValueError(f"{run}: timing.jsonl's chunks hold more tasks than its trajectory")
    rows, prev = [], None
    for n, t in enumerate(timing):
        # one `bench run` process runs its chunks back to back: a chunk that starts more than
        # GAP_S after the previous one ended is the first of a new process
        start = dt.datetime.fromisoformat(t["started"])
        first = prev is None or (start - prev[0]).total_seconds() - prev[1] > GAP_S
        shape = "first" if first else ("same" if t["tasks"] == prev[2] else "new")
        prev = (start, t.get("wall_s") or 0.0, t["tasks"])
        if t.get("complete"):
            replies = [s.reply for r in turns[i : i + t["tasks"]] for s in r.samples]
            i += t["tasks"]
        elif n == len(timing) - 1 and pending:
            replies = [x for r in pending for x in r["replies"]]
        else:
            continue  # cut before its replies were kept
        if not replies:
            raise ValueError(f"{run}: chunk of {t['started']} has no replies in the trajectory")
        lens = [count(x) for x in replies]
        rows.append(
            {
                "run": str(run.relative_to(BENCH)) if run.is_relative_to(BENCH) else str(run),
                "started": t["started"],
                "tasks": t["tasks"],
                "recorded": bool(t.get("complete")),
                "in_process": shape,
                "generate_s": t["generate_s"],
                "longest_tokens": max(lens),
                "at_cap": sum(x >= cap for x in lens),
                "replies": len(lens),
                "ms_per_step": round(1000 * t["generate_s"] / max(lens), 1),
            }
        )
    return rows


def one_turn_runs(root: Path) -> list[Path]:
    """Every bench run folder under `root` with a timing.jsonl and 1 turn."""
    out = []
    for t in sorted(root.glob(f"**/{TIMING}")):
        meta = json.loads((t.parent / "run.json").read_text())
        if meta.get("turns", 1) == 1:
            out.append(t.parent)
    return out


def smollm2_count() -> Callable[[str], int]:
    from cudaperf.train.models import load_policy

    tok = load_policy("smollm2").tokenizer
    return lambda text: len(tok(text, add_special_tokens=False)["input_ids"])


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4.5))
    colors = {"first": "tab:red", "same": "tab:green", "new": "tab:orange"}
    for kind, what in KIND_WHAT.items():
        mine = [r for r in rows if r["in_process"] == kind]
        when = [dt.datetime.fromisoformat(r["started"]) for r in mine]
        ax.plot(when, [r["ms_per_step"] for r in mine], "o", color=colors[kind], label=what)
    ax.set_ylim(bottom=0)
    ax.set_ylabel("ms per decode step (generation s / longest reply)")
    ax.set_title("dynamic decoding of the ablation's bench chunks, by when each ran")
    ax.legend(fontsize=8, loc="lower right")
    fig.autofmt_xdate()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", type=Path, default=BENCH)
    ap.add_argument("--out", type=Path, default=OUT, help="the JSON (a .png beside it)")
    a = ap.parse_args(argv)
    runs = one_turn_runs(a.root)
    if not runs:
        print(f"decode_steps: no 1-turn bench run (timing.jsonl) under {a.root}", file=sys.stderr)
        return 2
    count = smollm2_count()
    rows = []
    try:
        for run in runs:
            rows += run_chunks(run, count)
    except (ValueError, KeyError, OSError) as e:
        print(f"decode_steps: {e}", file=sys.stderr)
        return 2
    rows.sort(key=lambda r: r["started"])
    head = f"{'started':17} {'tasks':>5} {'gen s':>7} {'longest':>7} {'at cap':>6} {'ms/step':>7}"
    print(head + "  chunk      run")
    for r in rows:
        print(
            f"{r['started'][:16]:17} {r['tasks']:5d} {r['generate_s']:7.1f} "
            f"{r['longest_tokens']:7d} {r['at_cap']:6d} {r['ms_per_step']:7.1f}  "
            f"{KINDS[r['in_process']]:10} {r['run']}"
        )
    ms = [r["ms_per_step"] for r in rows]
    by_kind = {}
    for k in KINDS:
        mine = sorted(r["ms_per_step"] for r in rows if r["in_process"] == k)
        if mine:
            by_kind[k] = {
                "chunks": len(mine),
                "min": mine[0],
                "max": mine[-1],
                "median": round(statistics.median(mine), 2),
            }
    doc = {
        "what": "ms per decode step of each bench chunk: generation s / longest reply (tokens)",
        "command": "python bench/ablation/decode_steps.py",
        "date": dt.date.today().isoformat(),
        "python": platform.python_version(),
        "cap_tokens": CAP,
        "chunks": rows,
        "ms_per_step_min": min(ms),
        "ms_per_step_max": max(ms),
        "chunks_with_a_reply_at_cap": sum(r["at_cap"] > 0 for r in rows),
        "ms_per_step_by_chunk_kind": by_kind,
        "chunk_kinds": dict(KIND_WHAT),
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(doc, indent=1) + "\n")
    plot(rows, a.out.with_suffix(".png"))
    print(
        f"{len(rows)} chunks, {doc['chunks_with_a_reply_at_cap']} with a reply at the "
        f"{CAP}-token cap; {min(ms):g}-{max(ms):g} ms a step; wrote {a.out} and its .png"
    )
    for k, v in by_kind.items():
        print(
            f"  {KIND_WHAT[k]}: {v['chunks']} chunks, median {v['median']:g} ms a step "
            f"({v['min']:g}-{v['max']:g})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
