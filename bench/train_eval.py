"""Held-out evaluation of a trained policy: generate, evaluate, summarise (three steps, so
generation and timing never share the GPU and each step can run in its own device call).

    python bench/train_eval.py generate --model smollm2 [--adapter RUN/final] \\
        --holdout RUN/holdout.json --label sft --out replies.jsonl
    python bench/train_eval.py evaluate --replies replies.jsonl --out evals.jsonl
    python bench/train_eval.py summarise --evals evals.jsonl --out summary.json

Sets (C→CUDA tasks, `--per-set` each, round-robin over families, first ids first):
`unseen` = the held-out tasks of trained families (`holdout.json`'s `unseen_tasks`, never
trained on), `test` = tasks of the test families of splits.json. Each task gets `--samples`
sampled replies to refine's first prompt. `evaluate` scores every reply with one persistent
evaluator (`EvalSession`, the training preset's trial counts, written down in the output) and
appends one line per reply as it goes (a rerun skips what is done; `--deadline-s` stops
cleanly). `summarise`: per label and set, the shares of format error / compile error / wrong
(wrong output, runtime error, timeout, rejected) / correct, fast_1.0 and fast_1.2 (correct
and faster than the naive implementation by more than 1.0x / 1.2x), the geometric-mean
speedup over naive of the correct ones, and the share of replies that ended with EOS.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

from cudaperf.tasks.io import load_tasks
from cudaperf.tasks.model import Task

T0 = time.perf_counter()


def say(msg: str) -> None:
    print(f"[{time.perf_counter() - T0:6.1f}s] {msg}", flush=True)


def _round_robin(tasks: list[Task], n: int) -> list[Task]:
    by: dict[str, list[Task]] = defaultdict(list)
    for t in sorted(tasks, key=lambda t: t.id):
        by[t.family].append(t)
    out: list[Task] = []
    while len(out) < n and any(by.values()):
        for fam in sorted(by):
            if by[fam] and len(out) < n:
                out.append(by[fam].pop(0))
    return out


def eval_sets(tasks_path: Path, holdout: Path, per_set: int) -> dict[str, list[Task]]:
    from cudaperf.tasks.splits import read_splits

    tasks = [t for t in load_tasks(tasks_path) if t.kind.value == "c2cuda"]
    unseen_ids = set(json.loads(holdout.read_text())["unseen_tasks"])
    fams = read_splits(tasks_path.parent / "splits.json")
    return {
        "unseen": _round_robin([t for t in tasks if t.id in unseen_ids], per_set),
        "test": _round_robin([t for t in tasks if fams.get(t.family) == "test"], per_set),
    }


def generate(args) -> None:
    """Replies written batch by batch; a rerun skips the (set, task, sample) rows already in
    --out (so a call cut by its time limit loses at most one batch)."""

    from cudaperf.generation import chat_ids, generate_ids, sampling_config
    from cudaperf.refine.hf import HFBackend
    from cudaperf.refine.prompts import first_messages

    sets = eval_sets(args.tasks, args.holdout, args.per_set)
    be = HFBackend(
        args.model,
        adapter=args.adapter,
        temperature=args.temperature,
        max_new_tokens=args.max_new_tokens,
        seed=args.seed,
    )
    tok, model = be.tokenizer, be.model
    done = _done(args.out)
    rows = [
        (name, t, k)
        for name, ts in sets.items()
        for t in ts
        for k in range(args.samples)
        if (args.label, name, t.id, k) not in done
    ]
    say(
        f"{len(rows)} replies to generate ({len(done)} done), model {be.name}, "
        f"generation {args.generation}"
    )
    cfg = sampling_config(model, args.temperature, args.max_new_tokens)
    prompt = {}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("a", encoding="utf-8") as fh:
        for i in range(0, len(rows), args.batch):
            chunk = rows[i : i + args.batch]
            for _, task, _ in chunk:
                if task.id not in prompt:
                    prompt[task.id] = chat_ids(tok, first_messages(task))
            ids = [prompt[task.id] for _, task, _ in chunk]
            t = time.perf_counter()
            comps = generate_ids(
                model, ids, cfg, args.generation, tok.pad_token_id, [tok.eos_token_id], args.batch
            )
            dt = time.perf_counter() - t
            ntok = sum(map(len, comps))
            for (name, task, k), c in zip(chunk, comps, strict=True):
                eos = bool(c) and c[-1] == tok.eos_token_id
                fh.write(
                    json.dumps(
                        {
                            "label": args.label,
                            "set": name,
                            "task_id": task.id,
                            "sample": k,
                            "tokens": len(c),
                            "eos": eos,
                            "reply": tok.decode(c, skip_special_tokens=True),
                        }
                    )
                    + "\n"
                )
            fh.flush()
            say(
                f"batch {i // args.batch + 1}: {len(comps)} replies, {ntok} tokens in {dt:.1f}s "
                f"({ntok / dt:.0f} tok/s)"
            )


def _done(path: Path) -> set[tuple]:
    if not path.is_file():
        return set()
    rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    return {(r["label"], r["set"], r["task_id"], r["sample"]) for r in rows}


def evaluate(args) -> None:
    from cudaperf.execute.session import TRAINING, EvalSession, training_config
    from cudaperf.reward import RewardScorer

    rows = [json.loads(x) for f in args.replies for x in f.read_text().splitlines() if x.strip()]
    done = _done(args.out)
    todo = [r for r in rows if (r["label"], r["set"], r["task_id"], r["sample"]) not in done]
    tasks = {t.id: t for t in load_tasks(args.tasks)}
    todo.sort(key=lambda r: r["task_id"])  # one task's candidates together (reference reuse)
    session = EvalSession(training_config())
    scorer = RewardScorer(
        [tasks[r["task_id"]] for r in todo], evaluator=session, analyzer=lambda code: []
    )
    say(f"{len(todo)} replies to evaluate ({len(done)} done); settings {TRAINING}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with session, args.out.open("a", encoding="utf-8") as fh:
        for i in range(0, len(todo), args.chunk):
            if args.deadline_s and time.perf_counter() - T0 > args.deadline_s:
                say(f"deadline: stopping with {len(todo) - i} replies left (rerun to go on)")
                break
            chunk = todo[i : i + args.chunk]
            t = time.perf_counter()
            scored = scorer.score([(r["task_id"], r["reply"]) for r in chunk])
            for r, s in zip(chunk, scored, strict=True):
                res = s.result
                fh.write(
                    json.dumps(
                        {
                            "label": r["label"],
                            "set": r["set"],
                            "task_id": r["task_id"],
                            "sample": r["sample"],
                            "eos": r["eos"],
                            "tokens": r["tokens"],
                            "status": s.breakdown.status,
                            "total": s.breakdown.total,
                            "speedup_vs_naive": res.speedup_vs_naive if res else None,
                            "wall_s": res.wall_s if res else 0.0,
                        }
                    )
                    + "\n"
                )
            fh.flush()
            st = Counter(s.breakdown.status for s in scored)
            say(
                f"chunk {i // args.chunk + 1}: {len(chunk)} in {time.perf_counter() - t:.1f}s "
                f"{dict(st)}"
            )
    say(f"evaluator: {session.batches} batches, {session.seconds:.1f}s")


WRONG = ("wrong_output", "runtime_error", "timeout", "rejected")


def summarise_rows(rows: list[dict]) -> dict:
    out: dict = {}
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        groups[(r["label"], r["set"])].append(r)
    for (label, name), rs in sorted(groups.items()):
        n = len(rs)
        st = Counter(r["status"] for r in rs)
        ok = [r for r in rs if r["status"] == "ok"]
        sp = [r["speedup_vs_naive"] for r in ok if r["speedup_vs_naive"]]
        out.setdefault(label, {})[name] = {
            "samples": n,
            "tasks": len({r["task_id"] for r in rs}),
            "format_error": round(st["format_error"] / n, 4),
            "compile_error": round(st["compile_error"] / n, 4),
            "wrong": round(sum(st[s] for s in WRONG) / n, 4),
            "correct": round(len(ok) / n, 4),
            "fast_1.0": round(sum(1 for x in sp if x > 1.0) / n, 4),
            "fast_1.2": round(sum(1 for x in sp if x > 1.2) / n, 4),
            "geomean_speedup_correct": round(math.exp(sum(map(math.log, sp)) / len(sp)), 4)
            if sp
            else None,
            "tasks_with_a_correct_sample": len({r["task_id"] for r in ok}),
            "ended_with_eos": round(sum(1 for r in rs if r["eos"]) / n, 4),
            "statuses": dict(sorted(st.items())),
        }
    return out


def summarise(args) -> None:
    rows = [json.loads(x) for f in args.evals for x in f.read_text().splitlines() if x.strip()]
    out = summarise_rows(rows)
    args.out.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(out, indent=1))


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("generate")
    g.add_argument("--model", default="smollm2")
    g.add_argument("--adapter", type=Path)
    g.add_argument("--holdout", type=Path, required=True)
    g.add_argument("--tasks", type=Path, default=Path("data/tasks.jsonl.gz"))
    g.add_argument("--per-set", type=int, default=60)
    g.add_argument("--samples", type=int, default=4)
    g.add_argument("--max-new-tokens", type=int, default=1024)
    g.add_argument("--temperature", type=float, default=0.8)
    g.add_argument("--batch", type=int, default=240, help="sequences per generate call")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--generation", default="auto", help="cudaperf.generation mode")
    g.add_argument("--label", required=True)
    g.add_argument("--out", type=Path, required=True)
    e = sub.add_parser("evaluate")
    e.add_argument("--replies", type=Path, nargs="+", required=True)
    e.add_argument("--tasks", type=Path, default=Path("data/tasks.jsonl.gz"))
    e.add_argument("--chunk", type=int, default=64)
    e.add_argument("--deadline-s", type=float, default=None)
    e.add_argument("--out", type=Path, required=True)
    s = sub.add_parser("summarise")
    s.add_argument("--evals", type=Path, nargs="+", required=True)
    s.add_argument("--out", type=Path, required=True)
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    {"generate": generate, "evaluate": evaluate, "summarise": summarise}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
