"""Evaluator throughput: KernelBench's own harness vs cudaperf, same candidates, same GPU, one run.

    python bench/eval_throughput.py --kernelbench PATH --candidates bench/kernelbench_candidates \
        --out bench/results/eval_throughput_h200.json [--kb-limit N]

PATH is the user's own KernelBench checkout (repo root: its `src/kernelbench` and
`KernelBench/levelN`). Candidates come from `index.json` in the candidates folder: each entry
names a problem and the same kernels in KernelBench's `load_inline` form and in cudaperf's
native form. Three timed passes, each from a cold build cache:

(a) KernelBench's harness as its batch script runs it: parallel pre-compile of every candidate
    over the CPU cores (`build_compile_cache`), then `eval_kernel_against_ref` per candidate
    with 5 correctness trials and 100 timing trials (it also times the reference).
(b) cudaperf on the same load_inline candidates, (c) cudaperf on the native twins: every config,
    5 correctness trials with fresh inputs, 100 timing trials with L2 flushes, mutation,
    pointer-cache, stream, timer, profiler and roofline checks, eager and torch.compile
    baselines.
Prints a short table and writes every per-candidate result to the JSON file.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
import types
from pathlib import Path

from cudaperf.execute.api import evaluate_batch
from cudaperf.execute.config import EvalConfig
from cudaperf.execute.types import Candidate
from cudaperf.tasks.model import Task


def kb_root(path: Path) -> Path:
    """The KernelBench repo root from the root itself or its problem folder."""
    for cand in (path, path.parent):
        if (cand / "src" / "kernelbench" / "eval.py").is_file():
            return cand
    sys.exit(f"error: {path} is not a KernelBench checkout (no src/kernelbench/eval.py)")


def bench_task(root: Path, level: int, problem: str) -> Task:
    """A one-config task from a KernelBench problem file, KernelBench's fp32 tolerance."""
    src = (root / "KernelBench" / f"level{level}" / problem).read_text()
    return Task(
        id=f"kernelbench/level{level}/{Path(problem).stem}",
        kind="torch2cuda",
        family=Path(problem).stem,
        source=src,
        entry="Model",
        configs=[{"name": "default", "sizes": {}}],
        tolerance={"atol": 1e-4, "rtol": 1e-4},
        provenance={"source": "KernelBench (user's checkout)", "license": "MIT"},
    )


def _import_kernelbench(root: Path):
    """Import kernelbench.eval, stubbing LLM-client modules its package imports but never uses."""
    sys.path.insert(0, str(root / "src"))
    for name in ("dotenv", "openai", "litellm"):
        try:
            __import__(name)
        except ImportError:
            stub = types.ModuleType(name)
            stub.load_dotenv = lambda *a, **k: None
            stub.OpenAI = object
            stub.completion = None
            sys.modules[name] = stub
    import kernelbench.eval as kbe

    return kbe


def _kb_build(args):
    root, src, build_dir = args
    kbe = _import_kernelbench(Path(root))
    ok, _, err = kbe.build_compile_cache(src, False, build_dir)
    return ok, err


def run_kernelbench(
    root: Path, items: list[dict], cand_dir: Path, work: Path, on_row=lambda rows, wall: None
) -> dict:
    kbe = _import_kernelbench(root)
    import torch

    jobs = []
    for k, it in enumerate(items):
        ref = (root / "KernelBench" / f"level{it['level']}" / it["problem"]).read_text()
        jobs.append((ref, (cand_dir / it["inline"]).read_text(), str(work / f"kb_{k}")))
    t0 = time.perf_counter()
    ctx = mp.get_context("spawn")
    with ctx.Pool(os.cpu_count()) as pool:
        built = pool.map(_kb_build, [(str(root), c, b) for _, c, b in jobs])
    t_build = time.perf_counter() - t0
    rows = []
    for (ref, cand, bdir), it, (ok, err) in zip(jobs, items, built, strict=True):
        row = {"problem": it["problem"], "compiled": ok, "correct": False, "runtime_us": None}
        if ok:
            try:
                r = kbe.eval_kernel_against_ref(
                    ref, cand, seed_num=42, num_correct_trials=5, num_perf_trials=100,
                    measure_performance=True, build_dir=bdir, device=torch.device("cuda:0"),
                )  # fmt: skip
                ok_t = bool(r and r.runtime and r.runtime > 0)  # KernelBench reports ms means
                row.update(correct=bool(r and r.correctness))
                row["runtime_us"] = r.runtime * 1e3 if ok_t else None
                row["ref_runtime_us"] = r.ref_runtime * 1e3 if ok_t and r.ref_runtime else None
            except Exception as e:  # noqa: BLE001 - record the harness's failure and go on
                row["error"] = f"{type(e).__name__}: {e}"[:300]
        else:
            row["error"] = str(err)[:300]
        rows.append(row)
        print(f"  kernelbench {it['problem']}: correct={row['correct']}", flush=True)
        on_row(rows, time.perf_counter() - t0)  # saved as it goes: this pass is slow
    wall = time.perf_counter() - t0
    return {"rows": rows, "wall_s": wall, "build_s": t_build}


def run_cudaperf(
    tasks: list[Task],
    codes: list[str],
    work: Path,
    label: str,
    compile_baseline: bool,
    time_budget_s: float,
) -> dict:
    config = EvalConfig(
        trials=100, warmup=10, cache_dir=work / "cache", use_result_cache=False,
        correctness_trials=5, compile_baseline=compile_baseline, time_budget_s=time_budget_s,
    )  # fmt: skip
    jobs = [(t, Candidate(code=c, id=t.id)) for t, c in zip(tasks, codes, strict=True)]
    rows: dict[str, dict] = {}
    t0 = time.perf_counter()
    for res in evaluate_batch(jobs, config, out=work / f"{label}.jsonl"):
        cfg = res.configs[0] if res.configs else None
        rows[res.candidate_id] = {
            "status": res.status.value,
            "correct": res.status.value == "ok",
            "median_us": cfg.timing.median_us if cfg and cfg.timing else None,
            "speedup_vs_eager": res.speedup_vs_eager,
            "speedup_vs_compile": res.speedup_vs_compile,
            "message": (res.feedback[0] if res.feedback else "")[:200],
        }
        print(f"  cudaperf/{label} {res.candidate_id}: {res.status.value}", flush=True)
    wall = time.perf_counter() - t0
    return {"rows": [rows[t.id] | {"task": t.id} for t in tasks], "wall_s": wall}


def _versions() -> dict:
    import subprocess

    import torch

    nvcc = subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout
    return {
        "torch": torch.__version__,
        "nvcc": nvcc.strip().splitlines()[-1] if nvcc else "",
        "python": sys.version.split()[0],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernelbench", type=Path, required=True)
    ap.add_argument("--candidates", type=Path, default=Path("bench/kernelbench_candidates"))
    ap.add_argument("--out", type=Path, default=Path("bench/results/eval_throughput_h200.json"))
    ap.add_argument("--kb-limit", type=int, default=0, help="KernelBench harness on the first N")
    ap.add_argument("--limit", type=int, default=0, help="use only the first N candidates")
    ap.add_argument(
        "--time-budget", type=float, default=2.0,
        help="cudaperf: seconds of timed trials per config (at least 5 trials, at most 100)",
    )  # fmt: skip
    ap.add_argument("--skip", default="", help="comma list of passes to skip: kb,inline,native")
    ap.add_argument(
        "--no-compile-baseline",
        action="store_true",
        help="skip the torch.compile baseline (KernelBench's harness times only eager)",
    )
    args = ap.parse_args()
    import torch

    root = kb_root(args.kernelbench)
    items = json.loads((args.candidates / "index.json").read_text())
    items = items[: args.limit] if args.limit else items
    tasks = [bench_task(root, it["level"], it["problem"]) for it in items]
    skip = set(filter(None, args.skip.split(",")))
    work = Path(tempfile.mkdtemp(prefix="cudaperf-bench-"))
    out: dict = {"n_candidates": len(items), "gpu": torch.cuda.get_device_name(0)}
    out["compile_baseline"] = not args.no_compile_baseline
    passes: dict = {}

    def save() -> None:  # after every pass, so a timeout keeps the passes already done
        out.update(summarise(passes))
        out.update(
            versions=_versions(),
            date=dt.date.today().isoformat(),
            command=" ".join(["python", *sys.argv]),
            passes=passes,
        )
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(out, indent=2))

    cb, tb = not args.no_compile_baseline, args.time_budget
    out["time_budget_s"] = tb
    if "native" not in skip:
        codes = [(args.candidates / it["native"]).read_text() for it in items]
        passes["native"] = run_cudaperf(tasks, codes, work / "native", "native", cb, tb)
        save()
    if "inline" not in skip:
        codes = [(args.candidates / it["inline"]).read_text() for it in items]
        passes["inline"] = run_cudaperf(tasks, codes, work / "inline", "inline", cb, tb)
        save()
    if "kb" not in skip:
        kb_items = items[: args.kb_limit] if args.kb_limit else items

        def partial(rows: list, wall: float) -> None:
            passes["kernelbench"] = {"rows": rows, "wall_s": wall, "partial": True}
            save()

        passes["kernelbench"] = run_kernelbench(
            root, kb_items, args.candidates, work / "kb", partial
        )
        save()
    print_table(out)


def summarise(passes: dict) -> dict:
    s: dict = {}
    for name, key in (("native", "candidates_per_min_cudaperf"),
                      ("inline", "candidates_per_min_cudaperf_inline"),
                      ("kernelbench", "candidates_per_min_kernelbench")):  # fmt: skip
        if name in passes:
            s[key] = round(60 * len(passes[name]["rows"]) / passes[name]["wall_s"], 2)
            s[key.replace("candidates_per_min", "n")] = len(passes[name]["rows"])
            s[key.replace("candidates_per_min", "correct")] = sum(
                r["correct"] for r in passes[name]["rows"]
            )
    ours_name = "inline" if "inline" in passes else "native"  # the same kernels in both forms
    if "kernelbench" in passes and ours_name in passes:
        kb = passes["kernelbench"]["rows"]
        ours = passes[ours_name]["rows"][: len(kb)]
        s["agreement_vs"] = ours_name
        agree = [a["correct"] == b["correct"] for a, b in zip(kb, ours, strict=True)]
        s["agreement_correctness"] = round(sum(agree) / len(agree), 4) if agree else None
        ratios = [
            b["median_us"] / a["runtime_us"]
            for a, b in zip(kb, ours, strict=True)
            if a.get("runtime_us") and b.get("median_us")
        ]
        s["median_time_ratio"] = round(statistics.median(ratios), 4) if ratios else None
        s["median_time_ratio_n"] = len(ratios)
    return s


def print_table(out: dict) -> None:
    print(f"\n{'pass':<28}{'n':>5}{'correct':>9}{'cand/min':>10}")
    for name, key in (("cudaperf native form", "cudaperf"),
                      ("cudaperf load_inline form", "cudaperf_inline"),
                      ("KernelBench harness", "kernelbench")):  # fmt: skip
        if f"candidates_per_min_{key}" in out:
            print(f"{name:<28}{out[f'n_{key}']:>5}{out[f'correct_{key}']:>9}"
                  f"{out[f'candidates_per_min_{key}']:>10}")  # fmt: skip
    for k in ("agreement_correctness", "median_time_ratio"):
        if k in out:
            print(f"{k}: {out[k]}")


if __name__ == "__main__":
    main()
