"""Why a process's first `dynamic` generation chunk is slow: calls of one shape, back to back.

The ablation's bench chunks (`bench/ablation/decode_steps.py`) took 23-28 ms a decode step as
a process's later chunk of the same size and 54-112 ms as its first or one of a new size. A
guess to test: `dynamic` generation grows its KV cache a token at a time, so a process's first
call of a shape keeps asking the GPU for new memory (`cudaMalloc`) where a later call reuses
what the caching allocator kept. This runs, in one process, `--calls` generate calls of one
shape (random prompt ids of `--prompt` tokens, `--batch` rows, every reply forced to `--new`
tokens) and writes per call: seconds, ms per decode step and the allocator's device
allocations during it (`num_device_alloc`). `--reserve-gib G` first allocates and frees G GiB,
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
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args(argv)
    for name in ("batch", "prompt", "new", "calls"):
        if getattr(a, name) < 1:
            ap.error(f"--{name} must be at least 1")
    if a.reserve_gib < 0:
        ap.error("--reserve-gib must be 0 or more")
    return a


def main(argv: list[str] | None = None) -> int:
    a = parse(argv)
    if a.expandable:  # read when CUDA starts: before torch touches the GPU
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    sys.path.insert(0, str(ROOT / "src"))
    import torch

    from cudaperf.generation import generate_ids, sampling_config
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
    gen = torch.Generator().manual_seed(a.seed)
    vocab = model.config.vocab_size
    prompts = torch.randint(0, vocab, (a.batch, a.prompt), generator=gen).tolist()
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
        "prompt_tokens": a.prompt,
        "new_tokens": a.new,
        "reserve_gib": a.reserve_gib,
        "expandable_segments": a.expandable,
        "calls": [],
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    for i in range(a.calls):
        torch.manual_seed(a.seed + i)
        before = stats().get("num_device_alloc", 0)
        if device.type == "cuda":
            torch.cuda.synchronize()
        t = time.perf_counter()
        out = generate_ids(model, prompts, cfg, "dynamic", tok.pad_token_id, (), a.batch)
        if device.type == "cuda":
            torch.cuda.synchronize()
        secs = time.perf_counter() - t
        steps = max(map(len, out))
        row = {
            "call": i + 1,
            "seconds": round(secs, 3),
            "steps": steps,
            "ms_per_step": round(1000 * secs / steps, 2),
            "device_allocs": stats().get("num_device_alloc", 0) - before,
            "tokens_sha256": hashlib.sha256(json.dumps(out).encode()).hexdigest()[:16],
        }
        doc["calls"].append(row)
        a.out.write_text(json.dumps(doc, indent=1) + "\n")  # each call as it ends
        print(
            f"call {row['call']}: {row['seconds']:.1f} s, {row['ms_per_step']:.1f} ms a step, "
            f"{row['device_allocs']} device allocations, tokens {row['tokens_sha256']}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
