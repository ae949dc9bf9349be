"""Why a process's first `dynamic` generation chunk is slow: calls of one shape, back to back.

The ablation's bench chunks (`bench/ablation/decode_steps.py`) took a median 24 ms a decode
step (23-53) as a process's later chunk of the same size and 54-112 ms as its first or one of
a new size. A
guess to test: `dynamic` generation grows its KV cache a token at a time, so a process's first
call of a shape keeps asking the GPU for new memory (`cudaMalloc`) where a later call reuses
what the caching allocator kept. This runs, in one process, `--calls` generate calls of one
shape (random prompt ids of `--prompt` tokens, `--batch` rows, every reply forced to `--new`
tokens) and writes per call: seconds, ms per decode step and the allocator's device
allocations during it (`num_device_alloc`), and its steps one by one (`steps_ms`, from a
CUDA event recorded at each step, so the GPU's own timeline: transformers does not wait for
the GPU every step) with the allocations made at each (`allocs_at_step`): a cost the allocator
causes shows as slow steps where the allocations are, a cold host as slowness spread over every
step. `--then-batch B` adds one call of `B` rows (a later chunk of another size, which also ran
slow). `--reserve-gib G` first allocates and frees G GiB,
so the allocator holds one segment the cache is cut from; `--expandable` runs with
`PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`. Each call's tokens are hashed: with one
`--seed`, a layout of memory that changes no result gives the same hashes.

    python bench/decode_warm.py --out $OUT/warm_default.json
    python bench/decode_warm.py --reserve-gib 8 --out $OUT/warm_reserve.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--batch", type=int, default=64, help="rows a call (a 16-task chunk: 64)")
    ap.add_argument("--prompt", type=int, default=900, help="prompt tokens a row")
    ap.add_argument("--new", type=int, default=1024, help="tokens each reply is forced to")
    ap.add_argument("--calls", type=int, default=2)
    ap.add_argument("--reserve-gib", type=float, default=0.0)
    ap.add_argument("--expandable", action="store_true")
    ap.add_argument("--then-batch", type=int, default=0, help="one more call of this many rows")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args(argv)
    for name in ("batch", "prompt", "new", "calls"):
        if getattr(a, name) < 1:
            ap.error(f"--{name} must be at least 1")
    if a.then_batch < 0:
        ap.error("--then-batch must be 0 or more")
    if a.reserve_gib < 0:
        ap.error("--reserve-gib must be 0 or more")
    return a


def main(argv: list[str] | None = None) -> int:
    a = parse(argv)
    if a.expandable:  # read when CUDA starts: before torch touches the GPU
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    sys.path.insert(0, str(ROOT / "src"))
    import torch

    from cudaperf.generation import sampling_config
    from cudaperf.train.models import load_policy

    try:
        pol = load_policy(a.model)
    except ValueError as e:
        print(f"decode_warm: {e}", file=sys.stderr)
        return 2
    model, tok = pol.model.eval(), pol.tokenizer
    device = next(model.parameters()).device
    stats = torch.cuda.memory_stats if device.type == "cuda" else (lambda: {})
    if a.reserve_gib and device.type == "cuda":
        block = torch.empty(int(a.reserve_gib * 2**30), dtype=torch.uint8, device=device)
        del block  # freed to the allocator's cache, not to the GPU
    vocab = model.config.vocab_size
    prompts = _prompts(torch, a.seed, a.batch, a, vocab)
    cfg = sampling_config(model, 0.8, a.new)
    cfg.min_new_tokens = a.new  # no reply ends early: every call decodes `--new` steps
    doc = {
        "what": "dynamic generate calls of one shape in one process (bench/decode_warm.py)",
        "command": "python bench/decode_warm.py "
        + " ".join(sys.argv[1:] if argv is None else argv),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "device": torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "batch": a.batch,
        "then_batch": a.then_batch or None,
        "prompt_tokens": a.prompt,
        "new_tokens": a.new,
        "reserve_gib": a.reserve_gib,
        "expandable_segments": a.expandable,
        "calls": [],
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    shapes = [a.batch] * a.calls + ([a.then_batch] if a.then_batch else [])
    for i, rows in enumerate(shapes):
        torch.manual_seed(a.seed + i)
        batch = prompts if rows == a.batch else _prompts(torch, a.seed + 1000, rows, a, vocab)
        clock = StepClock(device, stats)
        before = stats().get("num_device_alloc", 0)
        if device.type == "cuda":
            torch.cuda.synchronize()
        t = time.perf_counter()
        out = _generate(model, batch, cfg, tok.pad_token_id, rows, clock)
        if device.type == "cuda":
            torch.cuda.synchronize()
        secs = time.perf_counter() - t
        steps = max(map(len, out))
        row = {
            "call": i + 1,
            "batch": rows,
            "seconds": round(secs, 3),
            "steps": steps,
            "ms_per_step": round(1000 * secs / steps, 2),
            "device_allocs": stats().get("num_device_alloc", 0) - before,
            "tokens_sha256": hashlib.sha256(json.dumps(out).encode()).hexdigest()[:16],
            **clock.summary(),
        }
        doc["calls"].append(row)
        a.out.write_text(json.dumps(doc, indent=1) + "\n")  # each call as it ends
        print(
            f"call {row['call']} ({rows} rows): {row['seconds']:.1f} s, "
            f"{row['ms_per_step']:.1f} ms a step (steps: median {row['step_ms_median']}, "
            f"p90 {row['step_ms_p90']}, max {row['step_ms_max']}; {row['steps_with_alloc']} "
            f"with a device allocation, {row['ms_in_alloc_steps']} ms in them), "
            f"{row['device_allocs']} device allocations, tokens {row['tokens_sha256']}",
            flush=True,
        )
    return 0


def _prompts(torch, seed: int, rows: int, a: argparse.Namespace, vocab: int) -> list[list[int]]:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (rows, a.prompt), generator=gen).tolist()


def _generate(model, prompts, cfg, pad_id, rows: int, clock: StepClock):
    """`generate_ids` in `dynamic` mode, with `clock` called at every decoding step (a
    stopping criterion that never stops: it changes no token)."""
    import functools

    from transformers import StoppingCriteriaList

    from cudaperf.generation import generate_ids

    own = model.generate
    model.generate = functools.partial(own, stopping_criteria=StoppingCriteriaList([clock]))
    try:
        return generate_ids(model, prompts, cfg, "dynamic", pad_id, (), rows)
    finally:
        model.generate = own


STEP_KEYS = (
    "step_ms_median",
    "step_ms_p90",
    "step_ms_max",
    "step_ms_first_quarter",
    "step_ms_last_quarter",
    "steps_with_alloc",
    "ms_in_alloc_steps",
)


class StepClock:
    """Called by `generate` once per decoding step (as a stopping criterion that never
    stops): records a CUDA event there (on the CPU, the host clock) and the allocator's
    device allocations so far. Events are read after the call, so nothing waits for the GPU
    that would not have waited anyway."""

    def __init__(self, device, stats) -> None:
        self.device, self.stats = device, stats
        self.marks: list = []
        self.allocs: list[int] = []
        self.no = None

    def __call__(self, input_ids, scores, **kw):
        import torch

        if self.device.type == "cuda":
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            self.marks.append(ev)
        else:
            self.marks.append(time.perf_counter())
        self.allocs.append(self.stats().get("num_device_alloc", 0))
        if self.no is None or self.no.shape[0] != input_ids.shape[0]:
            self.no = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        return self.no

    def steps_ms(self) -> list[float]:
        """Milliseconds from each step's mark to the next one's (the first step's prefill is
        not in it: it starts at the first mark)."""
        if self.device.type == "cuda":
            return [a.elapsed_time(b) for a, b in zip(self.marks, self.marks[1:], strict=False)]
        return [1000 * (b - a) for a, b in zip(self.marks, self.marks[1:], strict=False)]

    def summary(self) -> dict:
        ms = self.steps_ms()
        grew = [b - a for a, b in zip(self.allocs, self.allocs[1:], strict=False)]
        if not ms:  # one decoding step: nothing between two marks
            return dict.fromkeys(STEP_KEYS) | {"steps_ms": [], "allocs_at_step": []}
        q = sorted(ms)
        quarter = max(1, len(ms) // 4)
        return {
            "step_ms_median": round(statistics.median(ms), 2),
            "step_ms_p90": round(q[min(len(q) - 1, int(0.9 * len(q)))], 2),
            "step_ms_max": round(q[-1], 2),
            "step_ms_first_quarter": round(statistics.median(ms[:quarter]), 2),
            "step_ms_last_quarter": round(statistics.median(ms[-quarter:]), 2),
            "steps_with_alloc": sum(g > 0 for g in grew),
            "ms_in_alloc_steps": round(sum(m for m, g in zip(ms, grew, strict=True) if g), 1),
            "steps_ms": [round(m, 3) for m in ms],
            "allocs_at_step": grew,
        }


if __name__ == "__main__":
    sys.exit(main())
