"""cudaperf's side of bench/eval_throughput.py: a KernelBench problem as a cudaperf task and
one cudaperf pass over the candidates from a cold cache, stopped whole by the deadline."""

from __future__ import annotations

import shutil
import signal
import time
from collections.abc import Callable
from pathlib import Path

from throughput_records import Deadline, Stop, now


def bench_task(root: Path, level: int, problem: str, every_config: bool = True):
    """The cudaperf task of a KernelBench problem: every config the importer derives (the
    file's own `default`, `small` ~1/8, held-out `heldout` ~3/4) or `default` only."""
    from cudaperf.tasks.importers.kernelbench import derive_configs
    from cudaperf.tasks.model import InputConfig, Task

    src = (root / "KernelBench" / f"level{level}" / problem).read_text()
    configs = derive_configs(src) if every_config else [InputConfig(name="default", sizes={})]
    return Task(
        id=f"kernelbench/level{level}/{Path(problem).stem}",
        kind="torch2cuda",
        family=Path(problem).stem,
        source=src,
        entry="Model",
        configs=configs,
        tolerance={"atol": 1e-4, "rtol": 1e-4},  # KernelBench's fp32 tolerance
        provenance={"source": "KernelBench (user's checkout)", "license": "MIT"},
    )


def cudaperf_row(res) -> dict:
    """One ExecResult as the JSON row: status, and per config its verdict, trials, times."""
    cfgs = [
        {
            "config": c.config,
            "held_out": c.held_out,
            "correct": c.correct,
            "median_us": c.timing.median_us if c.timing else None,
            "trials": c.timing.trials if c.timing else 0,
            "eager_us": c.eager_timing.median_us if c.eager_timing else None,
        }
        for c in res.configs
    ]
    default = next((c for c in cfgs if c["config"] == "default"), cfgs[0] if cfgs else {})
    return {
        "status": res.status.value,
        "correct": res.status.value == "ok",
        "n_configs": len(cfgs),
        "configs": cfgs,
        "median_us": default.get("median_us"),  # the default config (KernelBench's size)
        "speedup_vs_eager": res.speedup_vs_eager,
        "speedup_vs_compile": res.speedup_vs_compile,
        "wall_s": res.wall_s,
        "message": (res.feedback[0] if res.feedback else "")[:200],
    }


def drop_native_builds(codes: list[str], root: Path) -> int:
    """Remove cached native builds (~/.cache/cudaperf/native/<key>/kernel.cu) of these
    candidates' sources, so the native pass starts cold like the others; other entries stay."""
    from cudaperf.execute.pytorch.build import native_sources

    srcs = {s for c in codes for s in native_sources(c)}
    n = 0
    for cu in root.glob("*/kernel.cu"):
        if cu.read_text(errors="replace") in srcs:
            shutil.rmtree(cu.parent, ignore_errors=True)
            n += 1
    return n


def run_cudaperf_pass(
    name: str,
    tasks: list,
    codes: list[str],
    keys: list[str],
    settings: dict,
    work: Path,
    deadline: Deadline,
    evaluate: Callable | None = None,
) -> dict | None:
    """One cudaperf pass from a cold cache: its record, or None when the deadline stopped it
    (nothing of a stopped pass is kept: its rate only means something whole)."""
    from cudaperf.execute.config import EvalConfig
    from cudaperf.execute.types import Candidate

    if evaluate is None:
        from cudaperf.execute.api import evaluate_batch as evaluate
    pdir = work / name
    shutil.rmtree(pdir, ignore_errors=True)  # cold: no builds or rows of an earlier attempt
    dropped = drop_native_builds(codes, Path.home() / ".cache/cudaperf/native")
    config = EvalConfig(
        trials=100,
        warmup=10,
        cache_dir=pdir / "cache",
        use_result_cache=False,
        correctness_trials=5,
        compile_baseline=settings["compile_baseline"],
        time_budget_s=settings["time_budget_s"],
    )
    jobs = [(t, Candidate(code=c, id=k)) for t, c, k in zip(tasks, codes, keys, strict=True)]
    rows: dict[str, dict] = {}
    left = deadline.left()
    if left <= 1:
        return None
    alarm = left != float("inf")
    if alarm:
        old = signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, left)
    t0 = time.perf_counter()
    try:
        for res in evaluate(jobs, config, out=pdir / "results.jsonl"):
            rows[res.candidate_id] = cudaperf_row(res)
            print(f"  cudaperf/{name} {res.candidate_id}: {res.status.value}", flush=True)
    except Stop:
        spent = time.perf_counter() - t0
        print(
            f"  cudaperf/{name}: stopped at the deadline after {spent:.0f} s; it reruns whole "
            "in the next call (if it never fits, select fewer)",
            flush=True,
        )
        return None
    finally:
        if alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old if old is not None else signal.SIG_DFL)
    wall = time.perf_counter() - t0
    named = [
        {"key": k, "task": t.id, "task_configs": [c.name for c in t.configs]}
        for t, k in zip(tasks, keys, strict=True)
    ]
    return {
        "type": "pass",
        "name": name,
        "settings": settings,
        "wall_s": round(wall, 3),
        "rows": [rows.get(n["key"], MISSING) | n for n in named],
        "cold_native_builds_removed": dropped,
        "finished": now(),
    }


MISSING = {"status": "missing", "correct": False, "n_configs": 0, "configs": [], "median_us": None}


def _alarm(signum, frame):
    raise Stop()
