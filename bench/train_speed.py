"""Generation speed of the policy: tokens/s per `cudaperf.generation` mode and batch size.

    python bench/train_speed.py --model smollm2 [--adapter RUN/final] \
        --modes dynamic,static,compile,continuous --batches 8,16,32,64,128 \
        --out bench/results/train_speed_gen_h200.json --plot bench/results/train_speed_gen_h200.png

Prompts are refine's first prompts of training-split C→CUDA tasks (the prompts GRPO samples
from), drawn with a fixed seed. Each (mode, batch) runs `--repeats` times on fresh prompts:
repeat 0 includes one-off costs (for `compile`, compiling the decoding step), later repeats are
the steady state the table reports. Every run is appended to `<out>.jsonl` as it ends (a rerun
skips what is there), the summary JSON and the plot are rewritten after each; `--deadline-s`
stops before starting a run that could not end in time. A mode that fails is recorded with its
error and the sweep goes on. `--weights` says how an `--adapter` samples: `merged` (default) into
the model, as `HFBackend` loads it; `adapter`, the PEFT model with its LoRA layers unmerged, in
training mode with dropout off, as `cudaperf train grpo --generation-weights adapter` samples;
`twin`, the merged twin of `--generation-weights merged` (`train.twin`). Compare the three at
GRPO's shape (16 sequences of ~1,400-token prompts, 1,024 new tokens) to see what the adapter's
layers cost a step (`bench/train_h200.sh step64` measures a real step).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import sys
import time
from pathlib import Path


def say(msg: str) -> None:
    print(msg, flush=True)


def prompts(tasks: Path, n: int, seed: int, tok) -> list[list[int]]:
    from cudaperf.generation import chat_ids
    from cudaperf.refine.prompts import first_messages
    from cudaperf.train.data import load_training_tasks

    pool = sorted(load_training_tasks(tasks, None, ("c2cuda",)), key=lambda t: t.id)
    random.Random(seed).shuffle(pool)
    return [chat_ids(tok, first_messages(t)) for t in (pool * (n // max(len(pool), 1) + 1))[:n]]


def one_run(model, tok, ids, mode: str, max_new: int, temperature: float) -> dict:
    import torch

    from cudaperf.generation import generate_ids, sampling_config

    cfg = sampling_config(model, temperature, max_new)
    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    t = time.perf_counter()
    comps = generate_ids(model, ids, cfg, mode, tok.pad_token_id, [tok.eos_token_id], len(ids))
    if cuda:
        torch.cuda.synchronize()
    secs = time.perf_counter() - t
    ntok = sum(map(len, comps))
    return {
        "sequences": len(ids),
        "new_tokens": ntok,
        "seconds": round(secs, 3),
        "tokens_per_s": round(ntok / secs, 1) if secs > 0 else None,
        "eos_share": round(
            sum(bool(c) and c[-1] == tok.eos_token_id for c in comps) / len(comps), 3
        ),
        "prompt_tokens_mean": round(sum(map(len, ids)) / len(ids), 1),
        "peak_mem_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if cuda else None,
    }


def summarise(rows: list[dict]) -> dict:
    """Per (mode, batch): steady-state tokens/s (mean over repeats >= 1, else repeat 0) and
    the first run's seconds."""
    out: dict[str, dict] = {}
    for r in rows:
        key = f"{r['mode']}@{r['batch']}"
        d = out.setdefault(key, {"mode": r["mode"], "batch": r["batch"], "runs": []})
        d["runs"].append(r)
    for d in out.values():
        runs = d.pop("runs")
        ok = [r for r in runs if r.get("error") is None]
        steady = [r for r in ok if r["repeat"] >= 1] or [r for r in ok if r["repeat"] == 0]
        d["tokens_per_s"] = (
            round(sum(r["tokens_per_s"] for r in steady) / len(steady), 1) if steady else None
        )
        first = [r for r in ok if r["repeat"] == 0]
        d["first_run_s"] = first[0]["seconds"] if first else None
        d["error"] = next((r["error"] for r in runs if r.get("error")), None)
    return out


def plot(summary: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for mode in sorted({d["mode"] for d in summary.values()}):
        pts = sorted(
            (d["batch"], d["tokens_per_s"])
            for d in summary.values()
            if d["mode"] == mode and d["tokens_per_s"]
        )
        if pts:
            ax.plot(*zip(*pts, strict=True), marker="o", label=mode)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("sequences per call")
    ax.set_ylabel("generated tokens / s (steady state)")
    ax.set_title("policy generation speed by mode")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def load(a):
    """The sampler (`.model`, `.tokenizer`, `.name`, `.device`) for `--weights` (module doc)."""
    import types

    import torch

    if a.weights == "merged":
        from cudaperf.refine.hf import HFBackend

        return HFBackend(a.model, adapter=a.adapter, max_new_tokens=a.max_new_tokens, seed=a.seed)
    if a.adapter is None:
        sys.exit(f"--weights {a.weights}: give the --adapter it samples through")
    from trl.trainer.utils import disable_dropout_in_model

    from cudaperf.train.models import load_policy
    from cudaperf.train.twin import MergedTwin

    torch.manual_seed(a.seed)
    pol = load_policy(a.model, adapter=a.adapter)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = pol.model.to(device)
    disable_dropout_in_model(model)  # as GRPO runs it (its disable_dropout), in training mode
    model.train()
    if a.weights == "twin":
        model = MergedTwin(model).model
    name = f"{pol.name}+{a.adapter.name} ({a.weights})"
    return types.SimpleNamespace(model=model, tokenizer=pol.tokenizer, name=name, device=device)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--adapter", type=Path)
    ap.add_argument("--weights", choices=("merged", "adapter", "twin"), default="merged")
    ap.add_argument("--tasks", type=Path, default=Path("data/tasks.jsonl.gz"))
    ap.add_argument("--modes", default="dynamic,static,compile,continuous")
    ap.add_argument("--batches", default="8,16,32,64,128")
    ap.add_argument("--repeats", type=int, default=2, help="runs per (mode, batch); >= 2")
    ap.add_argument("--max-new-tokens", type=int, default=512)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--deadline-s", type=float, default=None)
    ap.add_argument("--out", type=Path, default=Path("bench/results/train_speed_gen.json"))
    ap.add_argument("--plot", type=Path, default=None)
    a = ap.parse_args()
    from cudaperf.generation import MODES

    modes = a.modes.split(",")
    if bad := [m for m in modes if m not in MODES]:
        sys.exit(f"--modes {','.join(bad)}: unknown; use some of {','.join(MODES)}")
    try:
        batches = [int(b) for b in a.batches.split(",")]
    except ValueError:
        sys.exit(f"--batches {a.batches!r}: give sizes such as 8,16,32")
    if a.repeats < 1 or min(batches) < 1:
        sys.exit("--repeats and --batches: use >= 1")
    t0 = time.perf_counter()
    import torch

    be = load(a)
    say(f"model {be.name} on {be.device} ({be.model.dtype}), load {time.perf_counter() - t0:.1f}s")
    pool = prompts(a.tasks, max(batches) * a.repeats, a.seed, be.tokenizer)
    jsonl = a.out.with_suffix(".jsonl")
    a.out.parent.mkdir(parents=True, exist_ok=True)
    rows = [json.loads(x) for x in jsonl.read_text().splitlines()] if jsonl.exists() else []
    done = {(r["mode"], r["batch"], r["repeat"]) for r in rows}
    say(f"{'mode':>10} {'batch':>5} {'rep':>3} {'tok/s':>8} {'s':>7} {'eos':>5}")
    for b in batches:  # batch-major: a deadline cut still compares every mode at small batches
        for mode in modes:
            for rep in range(a.repeats):
                if (mode, b, rep) in done:
                    continue
                last = [
                    r["seconds"]
                    for r in rows
                    if r["mode"] == mode and r.get("seconds") and r["batch"] <= b
                ]
                need = max(last) if last else 0.0
                if a.deadline_s and time.perf_counter() - t0 + need > a.deadline_s:
                    say(f"deadline: stopping before {mode} batch {b} repeat {rep}")
                    return _finish(a, rows, be, t0)
                ids = pool[rep * b : (rep + 1) * b]
                rec = {"mode": mode, "batch": b, "repeat": rep, "max_new_tokens": a.max_new_tokens}
                try:
                    rec |= one_run(
                        be.model, be.tokenizer, ids, mode, a.max_new_tokens, a.temperature
                    )
                    rec["error"] = None
                except Exception as e:  # a mode this transformers/torch cannot run
                    rec["error"] = (
                        f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
                    )
                    if torch.cuda.is_available():
                        torch.cuda.empty_cache()
                rows.append(rec)
                with jsonl.open("a", encoding="utf-8") as fh:
                    fh.write(json.dumps(rec) + "\n")
                say(
                    f"{mode:>10} {b:>5} {rep:>3} {rec.get('tokens_per_s') or '-':>8} "
                    f"{rec.get('seconds', '-'):>7} {rec.get('eos_share', '-'):>5} "
                    f"{rec['error'] or ''}"
                )
                _finish(a, rows, be, t0, quiet=True)
    _finish(a, rows, be, t0)


def _finish(a, rows, be, t0: float, quiet: bool = False) -> None:
    import torch
    import transformers

    summary = summarise(rows)
    doc = {
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "date": dt.date.today().isoformat(),
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
        "model": be.name,
        "weights": a.weights,
        "device": be.device,
        "dtype": str(be.model.dtype),
        "command": "python " + " ".join(sys.argv),
        "how": "steady-state tokens/s = mean over repeats >= 1 of generated tokens / seconds "
        "(one generate call of `batch` prompts, sampled, up to max_new_tokens each)",
        "summary": list(summary.values()),
        "runs": rows,
        "seconds": round(time.perf_counter() - t0, 1),
    }
    a.out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    if a.plot:
        plot(summary, a.plot)
    if not quiet:
        best = max(
            (d for d in summary.values() if d["tokens_per_s"]),
            default=None,
            key=lambda d: d["tokens_per_s"],
        )
        if best:
            say(f"fastest: {best['mode']} at batch {best['batch']}: {best['tokens_per_s']} tok/s")
        say(f"wrote {a.out}" + (f" and {a.plot}" if a.plot else ""))


if __name__ == "__main__":
    main()
