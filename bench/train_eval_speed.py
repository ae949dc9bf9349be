"""Seconds to score one GRPO batch of C→CUDA candidates, cold and warm, as training scores it.

    python bench/train_eval_speed.py --n 64 --out bench/results/train_eval_speed_h200.json

The scorer is `train.grpo.make_scorer` (one persistent `EvalSession` with the TRAINING preset,
the pooled structural analyzer, the default ranker, the unified reward), on the GRPO training
pool (`train.grpo.training_pool`, training-split tasks only) of `--n` tasks. Phases, in order,
each written to the JSON as it ends:

1. `prepare`: the pool's naive implementations (what `cudaperf train grpo` does before step 1:
   references, CPU and naive baselines, then cached), from an empty cache (`--cache-dir`,
   default a fresh temporary folder), in batches of `--prepare-chunk` tasks, the JSON updated
   after each (a cold pool can outlast a device call: 64 tasks had not finished in 145 s on
   the H200, 2026-12-04, and nothing was written);
2. `batch_a`: `--per-task` stored non-naive implementations of each task (cycling through
   them), scored in one batch (the pool's tasks are now prepared: compile + GPU time,
   analysis and ranker);
3. `batch_b`: as many others per task (new candidates, warm evaluator): the number to hold
   against the goal of <= 10 s for 64 candidates on one H200;
4. `batch_a_again`: batch A again (the scorer's own cache: nothing is re-run);
5. with `--workers-per-gpu 1 2 4`: the phases above run with the first count of C→CUDA
   workers per GPU (`EvalConfig.workers_per_gpu`), then for each further count a new evaluator
   session (same cache: the pool stays prepared) scores batch A (`batch_a_k<K>`: warms the new
   workers' input sets) and batch B (`batch_b_k<K>`: the number to hold against `batch_b`),
   each candidate's code changed by a comment naming K, so nothing comes from a cache.

A GRPO step scores several samples of few tasks (the pilots: 4 tasks, 16 candidates each over
two turns), so `--n 4 --per-task 16` is its shape: four tasks to prepare, not 64 (a cold 64-task
pool took 330 s on the H200, 2026-12-05, and left no device time for the batches), and each
task's input sets serve 16 candidates, as in a step. A candidate past a task's first cycle of
implementations is one of them with a comment naming the sample, so each is a new source
(compiled and run, as a sampled reply is).

Each phase records wall seconds and their breakdown (analysis prefetch, evaluator, the rest:
ranker and reward) and the status counts. Without a GPU it runs compile-only (said in the
JSON). Prints a short table. Ctrl-C or SIGTERM (`timeout`) stops it with the phases done so far
in the JSON.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import signal
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path


def say(msg: str) -> None:
    print(msg, flush=True)


def candidates(pool, pick: int, per_task: int = 1):
    """`per_task` (task, code) items per task: samples `pick * per_task` onwards of its
    implementations that are not the naive one, cycling through them; a sample past the first
    cycle carries a comment naming it, so every item of every batch is a distinct source."""
    from cudaperf.execute.api import naive_implementation

    out = []
    for t in pool:
        naive = naive_implementation(t)
        others = [i.code for i in t.implementations if naive is None or i.code != naive.code]
        for j in range(pick * per_task, (pick + 1) * per_task) if others else ():
            code = others[j % len(others)]
            out.append((t, code if j < len(others) else f"{code}\n// sample {j}\n"))
    return out


def score_phase(scorer, items) -> dict:
    """Score (task, code) items in one batch as the rollout does: analysis prefetch, then the
    scorer (evaluator, analyzer cache hits, ranker, reward)."""
    from cudaperf.tasks.reply import Extraction

    t0 = time.perf_counter()
    scorer.analyzer.prefetch([c for _, c in items])
    t1 = time.perf_counter()
    scored = scorer.score_extracted([(t, Extraction(code=c)) for t, c in items])
    t2 = time.perf_counter()
    met = scorer.evaluator.take()
    return {
        "candidates": len(items),
        "seconds": round(t2 - t0, 2),
        "analyse_s": round(t1 - t0, 2),
        "score_s": round(t2 - t1, 2),
        "evaluator_s": met["evaluator_s"],
        "eval_phases_s": met.get("eval_phases_s", {}),
        "cached": met["cached"],
        "statuses": dict(Counter(s.result.status.value for s in scored if s.result)),
    }


def scored_phase(doc: dict, name: str, scorer, items) -> None:
    """`score_phase` of `items`, into `doc["phases"][name]` and one printed row."""
    r = score_phase(scorer, items)
    doc["phases"][name] = r
    say(
        f"{name:>14} {r['candidates']:>5} {r['seconds']:>8.2f} {r['analyse_s']:>8.2f} "
        f"{r['evaluator_s']:>8.2f} {r['statuses']}"
    )


def best_workers(doc: dict, gain: float = 0.9) -> tuple[int, str]:
    """The count of C→CUDA workers per GPU that scored batch B fastest, and why. A count above
    the first is taken only when every further count's batch B ended with the same statuses as
    the first's (the same verdicts on the same candidates) and it took at most `gain` times
    the first count's seconds (a smaller gain is within a run's noise); else the first."""
    phases = doc.get("phases", {})
    first = doc.get("settings", {}).get("workers_per_gpu", 1)
    base = phases.get("batch_b")
    if not base:
        return first, "no batch B was measured"
    more = {
        int(n.removeprefix("batch_b_k")): r for n, r in phases.items() if n.startswith("batch_b_k")
    }
    for k, r in sorted(more.items()):
        if r["statuses"] != base["statuses"]:
            return (
                first,
                f"{k} workers changed the verdicts ({r['statuses']} vs {base['statuses']})",
            )
    best, secs = first, base["seconds"]
    for k, r in sorted(more.items()):
        if r["seconds"] <= gain * base["seconds"] and r["seconds"] < secs:
            best, secs = k, r["seconds"]
    return best, f"batch B took {secs} s with {best}, {base['seconds']} s with {first}"


def _stop(signum, frame):  # SIGTERM (what `timeout` sends) ends the run as Ctrl-C does
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=64, help="tasks in the pool")
    ap.add_argument(
        "--per-task", type=int, default=1, help="candidates per task in each batch (module doc)"
    )
    ap.add_argument("--tasks", type=Path, default=Path("data/tasks.jsonl.gz"))
    ap.add_argument("--cache-dir", type=Path, default=None, help="evaluator cache (default: new)")
    ap.add_argument("--compile-only", action="store_true")
    ap.add_argument("--out", type=Path, default=Path("bench/results/train_eval_speed.json"))
    ap.add_argument("--prepare-chunk", type=int, default=8, help="tasks per prepare batch")
    ap.add_argument(
        "--workers-per-gpu",
        type=int,
        nargs="+",
        default=[1],
        metavar="K",
        help="C→CUDA workers per GPU: the first for every phase, each further one for batches "
        "A and B again on a new evaluator (module doc)",
    )
    ap.add_argument(
        "--best-workers",
        type=Path,
        default=None,
        metavar="JSON",
        help="print the workers-per-GPU count a measured JSON favours (best_workers), and exit",
    )
    a = ap.parse_args(argv)
    if a.best_workers:
        try:
            k, why = best_workers(json.loads(a.best_workers.read_text()))
        except (OSError, ValueError) as e:
            sys.exit(f"--best-workers {a.best_workers}: {e}; give a JSON this script wrote")
        print(k)
        print(why, file=sys.stderr)
        return
    if a.n < 1:
        sys.exit("--n: use >= 1")
    if min(a.workers_per_gpu) < 1:
        sys.exit("--workers-per-gpu: use counts >= 1, such as 1 2 4")
    if a.per_task < 1:
        sys.exit("--per-task: use >= 1 (a GRPO step's shape: --n 4 --per-task 16)")
    if a.prepare_chunk < 1:
        sys.exit("--prepare-chunk: use >= 1")
    if not a.tasks.is_file():
        sys.exit(f"--tasks {a.tasks}: no such file; give the dataset (data/tasks.jsonl.gz)")
    from cudaperf.execute.session import training_config
    from cudaperf.train.grpo import GrpoOptions, make_scorer, prepare_pool, training_pool

    cache = a.cache_dir or Path(tempfile.mkdtemp(prefix="cudaperf-evalspeed-"))
    opts = GrpoOptions(out=cache / "run", tasks=a.tasks, pool=a.n, compile_only=a.compile_only)
    _, pool = training_pool(opts)
    cfg = training_config(
        compile_only=True if a.compile_only else None,
        cache_dir=cache,
        workers_per_gpu=a.workers_per_gpu[0],
    )
    from dataclasses import asdict, replace

    from cudaperf.execute.session import EvalSession
    from cudaperf.execute.types import sum_phases

    t = time.perf_counter()
    session = EvalSession(cfg)
    env = session.backend.evaluator.env  # starts the workers
    scorer = make_scorer(opts, pool, evaluator=session)
    start_s = time.perf_counter() - t
    doc = {
        "date": dt.date.today().isoformat(),
        "command": "python " + " ".join(sys.argv),
        "mode": env.mode,
        "gpu": env.gpu_name,
        "pool_tasks": len(pool),
        "per_task": a.per_task,
        "cache_dir": str(cache),
        "session_start_s": round(start_s, 2),
        "settings": {
            k: v
            for k, v in asdict(cfg).items()
            if k
            in (
                "trials",
                "warmup",
                "time_budget_s",
                "cpu_trials",
                "cpu_time_budget_s",
                "correctness_trials",
                "run_timeout_s",
                "workers_per_gpu",
            )
        },
        "phases": {},
    }

    def write() -> None:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")

    write()
    say(f"{'phase':>14} {'cands':>5} {'s':>8} {'analyse':>8} {'eval':>8} statuses")
    signal.signal(signal.SIGTERM, _stop)
    t = time.perf_counter()
    try:
        prep = {
            "tasks": len(pool),
            "tasks_done": 0,
            "candidates": 0,
            "seconds": 0.0,
            "evaluator_s": 0.0,
            "eval_phases_s": {},
            "naive_not_ok": {},
            "done": False,
        }
        doc["phases"]["prepare"] = prep
        for i in range(0, len(pool), a.prepare_chunk):
            part = pool[i : i + a.prepare_chunk]
            secs, bad = prepare_pool(scorer, part)
            met = scorer.evaluator.take()
            prep["tasks_done"] += len(part)
            prep["candidates"] += met["candidates"]
            prep["seconds"] = round(prep["seconds"] + secs, 2)
            prep["evaluator_s"] = round(prep["evaluator_s"] + met["evaluator_s"], 2)
            phases = [prep["eval_phases_s"], met.get("eval_phases_s", {})]
            prep["eval_phases_s"] = sum_phases(phases, digits=2)
            prep["naive_not_ok"].update(bad)
            write()
        prep["done"] = True
        write()
        say(f"{'prepare':>14} {prep['candidates']:>5} {prep['seconds']:>8.2f}")
        a_items, b_items = candidates(pool, 0, a.per_task), candidates(pool, 1, a.per_task)
        runs = [("batch_a", a_items), ("batch_b", b_items), ("batch_a_again", a_items)]
        for name, items in runs:
            scored_phase(doc, name, scorer, items)
            write()
        for k in a.workers_per_gpu[1:]:
            for part in (scorer.evaluator, scorer.analyzer):
                part.close()
            session = EvalSession(replace(cfg, workers_per_gpu=k))
            scorer = make_scorer(opts, pool, evaluator=session)
            for name, items in (("batch_a", a_items), ("batch_b", b_items)):
                fresh = [(t, f"{code}\n// workers per GPU: {k}\n") for t, code in items]
                scored_phase(doc, f"{name}_k{k}", scorer, fresh)
                write()
    except KeyboardInterrupt:
        say("interrupted; the phases done are in the JSON")
    finally:
        for part in (scorer.evaluator, scorer.analyzer):
            if hasattr(part, "close"):
                part.close()
        doc["seconds"] = round(time.perf_counter() - t, 1)
        write()
    say(f"wrote {a.out}")


if __name__ == "__main__":
    main()
