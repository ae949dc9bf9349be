"""Evaluator throughput: KernelBench's own harness vs cudaperf, same candidates, same GPU.

    python bench/eval_throughput.py --kernelbench PATH [--spread N | --limit N] [--kb-limit N] \
        [--deadline-s S] [--work DIR] [--resume-from OLD.json] --out FILE.json

PATH is a KernelBench checkout (repo root: its `src/kernelbench` and `KernelBench/levelN`).
Candidates come from `index.json` in `--candidates`: each entry names a problem and the same
kernels in KernelBench's `load_inline` form and in cudaperf's native form. Three columns:

(kb)     KernelBench's harness as its batch script (`scripts/eval_from_generations.py`) runs it:
         parallel pre-compile of the load_inline candidates over the CPU cores
         (`build_compile_cache`, TORCH_CUDA_ARCH_LIST from `--kb-gpu-arch`), then per candidate
         a fresh spawned process running `eval_kernel_against_ref` (5 correctness trials,
         100 timed trials of the candidate and 100 of the reference, CUDA events; the task's
         own size only) under its 180 s timeout.
(inline) cudaperf on the same load_inline candidates, (native) cudaperf on the native twins:
         every config of the task as cudaperf's KernelBench importer derives them (default,
         small, heldout; `--configs default` for the file's own size only), 5 correctness
         trials per config on fresh secret-seeded inputs, up to 100 timed trials per config
         within `--time-budget` s, all run-time checks, eager baseline (+ torch.compile unless
         `--no-compile-baseline`), each pass from a cold cache.

Resumable: every finished piece is appended to `<work>/records.jsonl` (the cudaperf passes
whole, KernelBench's harness per candidate and per pre-compile), and a rerun of the same
command skips what is recorded. `--deadline-s S` starts nothing that would not finish S s after
the start and stops what runs at S; the JSON (all passes, the table, every record) is rebuilt
from the records at the end of every call. The work folder persists on a warm machine; after a
cold start, `--resume-from` the last JSON restores the records (unfinished builds are redone).
Rates: a cudaperf pass is its wall time; KernelBench's is the sum of its per-candidate
evaluations plus its pre-compile's wall time shared evenly over the candidates it built.

Device call sequence for issue #15 (one H200, 16 cores, <= 540 s a call, back to back so the
work folder in ~/.cache survives; the same command in every call, carry [".whl", ".kb"]):

    source scripts/device_env.sh; L=$OUT/eval_throughput_h200.log; python3 \
      bench/eval_throughput.py --kernelbench .kb --spread 12 --no-compile-baseline \
      --deadline-s 500 --out $OUT/eval_throughput_h200.json >$L 2>&1; rc=$?; tail -n 30 $L; exit $rc

  call A (~500 s): the native pass (12 candidates, 3 configs each; at the last run's ~28/min
         with one config, about 0.5-1.5 min), the inline pass (12 load_inline builds over 16
         cores, then the GPU: about 1-3 min), then, if >= 180 s are left, KernelBench's
         pre-compile (about 1-2 min) and its first candidates (~32 s each at its measured
         1.85/min) until the deadline; else KernelBench starts in call B.
  call B (~300-500 s): the remaining KernelBench candidates; the JSON says "complete": true.
  call C only if B's JSON says "complete": false (same command). If the machine went cold
  between calls, copy the last JSON to bench/results/eval_throughput_h200.json here and add
  `--resume-from bench/results/eval_throughput_h200.json` (unfinished builds are redone).
  The last call's JSON and log go to bench/results/.

Stages, in sibling modules: throughput_records.py (deadline, records, selection),
throughput_kb.py (KernelBench's harness), throughput_cudaperf.py (the cudaperf passes),
throughput_summary.py (columns, agreement, table); this script plans, runs and writes the JSON.
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from throughput_cudaperf import bench_task, run_cudaperf_pass
from throughput_kb import (
    KB_CORRECT_TRIALS,
    KB_PERF_TRIALS,
    KB_SEED,
    kb_fingerprint,
    kb_import_problem,
    kb_jobs,
    kb_root,
    run_kb_pass,
)
from throughput_records import Deadline, Records, item_key, now, select, sha12
from throughput_summary import FORMS, summarise

FORMAT = "eval_throughput-v2"
EXECUTE = Path(__file__).resolve().parents[1] / "src" / "cudaperf" / "execute"  # hashed: which
# evaluator ran, also where the device's copy of the tree has no .git


def preflight(root: Path, plan: dict, records: Records) -> list[str]:
    """What would make this call fail later, found now: nvcc, ninja, KernelBench's import."""
    problems = []
    if shutil.which("nvcc") is None:
        problems.append("nvcc not on PATH (scripts/device_env.sh adds /usr/local/cuda/bin)")
    if "inline" in plan["keys"] or "jobs" in plan:
        from torch.utils.cpp_extension import is_ninja_available

        if not is_ninja_available():
            problems.append("ninja not found; load_inline (both harnesses) needs it")
    skey = plan["kb_settings_key"]
    todo = [
        j for j in plan.get("jobs", []) if not records.last("kb_row", key=j["key"], settings=skey)
    ]
    if todo and (why := kb_import_problem(root, todo[0]["arch"])):
        problems.append(why)
    return problems


# ----------------------------------------------------------------------------- main


def _sh(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def versions(root: Path) -> dict:
    import torch

    nvcc = _sh(["nvcc", "--version"])
    pyproject = (root / "pyproject.toml").read_text() if (root / "pyproject.toml").is_file() else ""
    kb_version = next(
        (
            ln.split("=")[1].strip().strip('"')
            for ln in pyproject.splitlines()
            if ln.startswith("version")
        ),
        "",
    )
    return {
        "torch": torch.__version__,
        "cuda": torch.version.cuda or "",
        "nvcc": nvcc.splitlines()[-1] if nvcc else "",
        "python": sys.version.split()[0],
        "driver": _sh(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]),
        "cudaperf_commit": _sh(["git", "rev-parse", "--short", "HEAD"]) or "unknown",
        "cudaperf_execute_sha": sha12("".join(p.read_text() for p in sorted(EXECUTE.glob("*.py")))),
        "kernelbench_version": kb_version,
        "kernelbench_harness_sha": kb_fingerprint(root),
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    a = ap.add_argument
    a("--kernelbench", type=Path, required=True, help="KernelBench checkout (repo root)")
    a("--candidates", type=Path, default=Path("bench/kernelbench_candidates"))
    a("--out", type=Path, required=True, help="the JSON written at the end of every call")
    a("--limit", type=int, default=0, help="use only the first N candidates of index.json")
    a("--spread", type=int, default=0, help="use N candidates evenly spread over index.json")
    a("--kb-limit", type=int, default=0, help="KernelBench's harness on the first N selected")
    a(
        "--time-budget",
        type=float,
        default=2.0,
        help="cudaperf: seconds of timed trials per config (at least 5 trials, at most 100)",
    )
    a("--skip", default="", help="comma list of columns to skip: kb,inline,native")
    a(
        "--no-compile-baseline",
        action="store_true",
        help="skip the torch.compile baseline (KernelBench's harness times only eager)",
    )
    a(
        "--configs",
        choices=("all", "default"),
        default="all",
        help="cudaperf's configs: every config the importer derives, or the file's own only",
    )
    a(
        "--deadline-s",
        type=float,
        default=None,
        help="start nothing that would end after S s, stop what runs at S; rerun to resume",
    )
    a(
        "--work",
        type=Path,
        default=Path("~/.cache/cudaperf-eval-throughput"),
        help="records and builds kept between calls (a rerun resumes from them)",
    )
    a("--resume-from", type=Path, default=None, help="an earlier call's JSON: adopt its records")
    a("--kb-gpu-arch", default="Hopper", help="KernelBench's gpu_arch (TORCH_CUDA_ARCH_LIST)")
    a("--kb-timeout", type=float, default=180.0, help="KernelBench's per-candidate timeout")
    a("--report-only", action="store_true", help="run nothing: rebuild the JSON from records")
    args = ap.parse_args(argv)
    if args.limit and args.spread:
        ap.error("--limit and --spread pick candidates differently; give one of them")
    if min(args.limit, args.spread, args.kb_limit) < 0 or args.time_budget <= 0:
        ap.error("--limit, --spread and --kb-limit take N >= 0, --time-budget seconds > 0")
    bad = set(filter(None, args.skip.split(","))) - {"kb", "inline", "native"}
    if bad:
        ap.error(f"--skip {','.join(sorted(bad))}: unknown; use kb, inline or native")
    if args.resume_from and not args.resume_from.is_file():
        ap.error(f"--resume-from {args.resume_from}: no such file")
    return args


def make_plan(args: argparse.Namespace, root: Path, items: list[dict], gpu: str | None) -> dict:
    """What this command asks for: per column its candidates' keys and settings."""
    skip = set(filter(None, args.skip.split(",")))
    plan: dict = {"keys": {}, "settings": {}, "codes": {}}
    if "kb" not in skip:
        kb_items = items[: args.kb_limit] if args.kb_limit else items
        plan["jobs"] = kb_jobs(
            root, kb_items, args.candidates, args.work.expanduser(), args.kb_gpu_arch
        )
        plan["keys"]["kernelbench"] = [j["key"] for j in plan["jobs"]]
    plan["kb_settings"] = {
        "harness_sha": kb_fingerprint(root),
        "gpu_arch": args.kb_gpu_arch,
        "gpu": gpu,
        "num_correct_trials": KB_CORRECT_TRIALS,
        "num_perf_trials": KB_PERF_TRIALS,
        "seed": KB_SEED,
        "timeout_s": args.kb_timeout,
        "timing_method": "cuda_event",
    }
    plan["kb_settings_key"] = sha12(json.dumps(plan["kb_settings"], sort_keys=True))
    for name in ("inline", "native"):
        if name in skip:
            continue
        codes = [(args.candidates / it[name]).read_text() for it in items]
        plan["codes"][name] = codes
        plan["keys"][name] = [item_key(it, c) for it, c in zip(items, codes, strict=True)]
        plan["settings"][name] = {
            "form": FORMS[name],
            "candidates": plan["keys"][name],
            "configs": args.configs,
            "time_budget_s": args.time_budget,
            "compile_baseline": not args.no_compile_baseline,
            "trials": 100,
            "correctness_trials": 5,
            "gpu": gpu,
        }
    return plan


def run_all(args, root: Path, items: list[dict], plan: dict, records: Records, deadline) -> dict:
    """The passes not yet recorded, in the order native, inline, KernelBench."""
    outcome: dict = {}
    tasks = None
    for name in ("native", "inline"):
        if name not in plan["keys"]:
            continue
        if records.last("pass", name=name, settings=plan["settings"][name]):
            outcome[name] = "recorded earlier"
            continue
        if tasks is None:  # task preparation (configs derived on the CPU) is not timed
            tasks = [
                bench_task(root, it["level"], it["problem"], args.configs == "all") for it in items
            ]
        rec = run_cudaperf_pass(
            name,
            tasks,
            plan["codes"][name],
            plan["keys"][name],
            plan["settings"][name],
            args.work.expanduser(),
            deadline,
        )
        outcome[name] = "done" if rec else "deadline"
        if rec:
            records.add(rec)
    if "jobs" in plan:
        outcome["kernelbench"] = run_kb_pass(
            records, plan["jobs"], plan["kb_settings_key"], deadline, timeout_s=args.kb_timeout
        )
    return outcome


def write_out(args, root: Path, plan: dict, records: Records, gpu: str | None, cmd: str) -> dict:
    s = summarise(records, plan)
    cols = s["columns"]
    out: dict = {
        "format": FORMAT,
        "complete": s["complete"],
        "gpu": gpu,
        "date": now(),
        "command": cmd,
        "calls": records.of("call"),
        "versions": versions(root),
        "settings": {
            "cudaperf": {
                k: v
                for k, v in next(iter(plan["settings"].values()), {}).items()
                if k not in ("candidates", "form")
            },
            "kernelbench": plan["kb_settings"],
        },
        "table": s["table"],
        "columns": cols,
    }
    for name, key in (
        ("native", "cudaperf"),
        ("inline", "cudaperf_inline"),
        ("kernelbench", "kernelbench"),
    ):
        if name in cols and cols[name]["n"]:
            out[f"candidates_per_min_{key}"] = cols[name]["candidates_per_min"]
            out[f"n_{key}"], out[f"correct_{key}"] = cols[name]["n"], cols[name]["correct"]
    a = s.get("agreement_vs_inline") or s.get("agreement_vs_native")
    if a:
        out["agreement_vs"] = "inline" if "agreement_vs_inline" in s else "native"
        out["agreement_correctness"] = round(a["same_verdict"] / a["n"], 4) if a["n"] else None
        out["median_time_ratio"] = a["median_time_ratio"]
    out |= {k: v for k, v in s.items() if k.startswith("agreement_vs_")}
    out["records"] = records.items
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text(json.dumps(out, indent=1))
    tmp.replace(args.out)
    return out


def _gpu_name() -> str | None:
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    root = kb_root(args.kernelbench)
    index = args.candidates / "index.json"
    if not index.is_file():
        sys.exit(f"error: {index} not found; pass --candidates DIR (the folder of index.json)")
    items = select(json.loads(index.read_text()), args.limit, args.spread)
    records = Records(args.work.expanduser() / "records.jsonl")
    if args.resume_from:
        old = json.loads(args.resume_from.read_text())
        if old.get("format") != FORMAT:
            sys.exit(
                f"error: {args.resume_from} was not written by this version ({FORMAT}); "
                "drop --resume-from to start fresh"
            )
        print(f"resume-from: {records.merge(old['records'])} records adopted", flush=True)
    gpu = _gpu_name()
    if gpu is None and not args.report_only:
        sys.exit("error: no CUDA GPU visible; run this on the GPU machine (or --report-only)")
    plan = make_plan(args, root, items, gpu)
    problems = [] if args.report_only else preflight(root, plan, records)
    if problems:
        sys.exit("error: " + "; ".join(problems))
    cmd = shlex.join(["python3", sys.argv[0], *(sys.argv[1:] if argv is None else argv)])
    deadline, call, interrupted = Deadline(args.deadline_s), {"started": now()}, False
    try:
        if not args.report_only:
            call["outcome"] = run_all(args, root, items, plan, records, deadline)
    except KeyboardInterrupt:
        interrupted, call["outcome"] = True, "interrupted (Ctrl-C)"
    finally:
        if not args.report_only:
            records.add(
                {
                    "type": "call",
                    "command": cmd,
                    "deadline_s": args.deadline_s,
                    "ended": now(),
                    **call,
                }
            )
        out = write_out(args, root, plan, records, gpu, cmd)
    print("\n" + "\n".join(out["table"]))
    print(f"wrote {args.out}")
    return 130 if interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
