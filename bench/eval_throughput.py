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
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import multiprocessing as mp
import os
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import time
import types
from collections.abc import Callable, Iterable
from pathlib import Path

FORMAT = "eval_throughput-v2"
EXECUTE = Path(__file__).resolve().parents[1] / "src" / "cudaperf" / "execute"  # hashed: which
# evaluator ran, also where the device's copy of the tree has no .git
KB_CORRECT_TRIALS, KB_PERF_TRIALS, KB_SEED = 5, 100, 42
FORMS = {"kernelbench": "load_inline", "inline": "load_inline", "native": "native"}
LABELS = {
    "kernelbench": "KernelBench harness",
    "inline": "cudaperf",
    "native": "cudaperf",
}


class Stop(KeyboardInterrupt):
    """The deadline came while a cudaperf pass ran (raised by SIGALRM; the evaluator's Ctrl-C
    path then stops its builds and workers)."""


class Deadline:
    """Seconds left of a call's `--deadline-s` (no deadline: `limit_s` None)."""

    def __init__(self, limit_s: float | None, clock: Callable[[], float] = time.monotonic):
        self.clock, self.limit_s, self.t0 = clock, limit_s, clock()

    def left(self) -> float:
        return float("inf") if self.limit_s is None else self.limit_s - (self.clock() - self.t0)


class Records:
    """Append-only JSONL of finished work; each line is flushed and fsynced when added, a torn
    last line (a kill mid-write) is dropped on reading, so a rerun sees exactly what finished."""

    def __init__(self, path: Path):
        self.path = path
        self.items: list[dict] = []
        data = path.read_bytes() if path.is_file() else b""
        if data and not data.endswith(b"\n"):  # a kill mid-write: drop the torn tail, so
            data = data[: data.rfind(b"\n") + 1]  # the next line starts on a line of its own
            path.write_bytes(data)
            print(f"  records: dropped a torn last line of {path}", flush=True)
        for line in data.decode().splitlines():
            self.items.append(json.loads(line))

    def add(self, rec: dict) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as f:
            f.write(json.dumps(rec, sort_keys=True) + "\n")
            f.flush()
            os.fsync(f.fileno())
        self.items.append(rec)

    def merge(self, recs: Iterable[dict]) -> int:
        """Add the given records that are not here yet (e.g. from an earlier call's JSON)."""
        have = {json.dumps(r, sort_keys=True) for r in self.items}
        new = [r for r in recs if json.dumps(r, sort_keys=True) not in have]
        for r in new:
            self.add(r)
        return len(new)

    def of(self, kind: str) -> list[dict]:
        return [r for r in self.items if r.get("type") == kind]

    def last(self, kind: str, **match) -> dict | None:
        hits = [r for r in self.of(kind) if all(r.get(k) == v for k, v in match.items())]
        return hits[-1] if hits else None


# ----------------------------------------------------------------------------- selection


def kb_root(path: Path) -> Path:
    """The KernelBench repo root from the root itself or its problem folder."""
    for cand in (path, path.parent):
        if (cand / "src" / "kernelbench" / "eval.py").is_file():
            return cand
    sys.exit(f"error: {path} is not a KernelBench checkout (no src/kernelbench/eval.py); "
             "pass its repo root, e.g. --kernelbench .kb")  # fmt: skip


def select(items: list[dict], limit: int = 0, spread: int = 0) -> list[dict]:
    """The first `limit` entries, or `spread` entries evenly spaced over the index (both
    levels), or all; the order of index.json is kept."""
    if spread:
        n = min(spread, len(items))
        return [items[(k * len(items)) // n] for k in range(n)]
    return items[:limit] if limit else items


def sha12(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def item_key(it: dict, code: str) -> str:
    """A candidate's identity in the records: level, problem and the code's hash."""
    return f"level{it['level']}/{it['problem']}@{sha12(code)}"


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


# ----------------------------------------------------------------------------- cudaperf passes


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
    from cudaperf.execute.torch_build import native_sources

    srcs = {s for c in codes for s in native_sources(c)}
    n = 0
    for cu in root.glob("*/kernel.cu"):
        if cu.read_text(errors="replace") in srcs:
            shutil.rmtree(cu.parent, ignore_errors=True)
            n += 1
    return n


def run_cudaperf_pass(
    name: str, tasks: list, codes: list[str], keys: list[str], settings: dict, work: Path,
    deadline: Deadline, evaluate: Callable | None = None,
) -> dict | None:  # fmt: skip
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
        trials=100, warmup=10, cache_dir=pdir / "cache", use_result_cache=False,
        correctness_trials=5, compile_baseline=settings["compile_baseline"],
        time_budget_s=settings["time_budget_s"],
    )  # fmt: skip
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
        print(f"  cudaperf/{name}: stopped at the deadline after {spent:.0f} s; it reruns whole "
              "in the next call (if it never fits, select fewer)", flush=True)  # fmt: skip
        return None
    finally:
        if alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old if old is not None else signal.SIG_DFL)
    wall = time.perf_counter() - t0
    named = [{"key": k, "task": t.id, "task_configs": [c.name for c in t.configs]}
             for t, k in zip(tasks, keys, strict=True)]  # fmt: skip
    return {
        "type": "pass", "name": name, "settings": settings, "wall_s": round(wall, 3),
        "rows": [rows.get(n["key"], MISSING) | n for n in named],
        "cold_native_builds_removed": dropped, "finished": _now(),
    }  # fmt: skip


MISSING = {"status": "missing", "correct": False, "n_configs": 0, "configs": [], "median_us": None}


def _alarm(signum, frame):
    raise Stop()


# ----------------------------------------------------------------------------- KernelBench


def _import_kernelbench(root: Path):
    """Import kernelbench.eval, stubbing LLM-client modules its package imports but never uses
    for evaluation (dotenv, openai, litellm); numpy, requests, pydantic, tqdm must be there."""
    if str(root / "src") not in sys.path:
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


def kb_fingerprint(root: Path) -> str:
    """Hash of KernelBench's eval.py and timing.py (the harness that ran)."""
    src = root / "src" / "kernelbench"
    return sha12("".join((src / f).read_text() for f in ("eval.py", "timing.py")))


def _kb_child(root: str, arch: str):
    """KernelBench imported in a child, TORCH_CUDA_ARCH_LIST set as its batch script sets it
    (the same in the pre-compile and the evaluation, so the evaluation reuses the build)."""
    kbe = _import_kernelbench(Path(root))
    from kernelbench.utils import set_gpu_arch

    set_gpu_arch([arch])
    return kbe


def _kb_build(job: dict) -> dict:
    """Pre-compile one candidate in a pool worker (`build_compile_cache`)."""
    kbe = _kb_child(job["root"], job["arch"])
    t0 = time.perf_counter()
    ok, _, err = kbe.build_compile_cache(job["src"], False, job["build_dir"])
    return {"key": job["key"], "ok": bool(ok), "error": str(err or "")[:300],
            "seconds": round(time.perf_counter() - t0, 2)}  # fmt: skip


def _kb_eval(job: dict) -> dict:
    """`eval_kernel_against_ref` on one candidate (in a fresh spawned process)."""
    kbe = _kb_child(job["root"], job["arch"])
    import torch

    try:
        r = kbe.eval_kernel_against_ref(
            job["ref"], job["src"], seed_num=KB_SEED, num_correct_trials=KB_CORRECT_TRIALS,
            num_perf_trials=KB_PERF_TRIALS, measure_performance=True,
            build_dir=job["build_dir"], device=torch.device("cuda:0"),
        )  # fmt: skip
    except Exception as e:  # noqa: BLE001 - the batch script records the harness's failure too
        return {"compiled": False, "correct": False, "error": f"{type(e).__name__}: {e}"[:300]}
    if r is None:  # the harness's "lock file error, please retry"
        return {"compiled": False, "correct": False, "error": "harness returned None (retry)"}
    timed = bool(r.runtime and r.runtime > 0)  # KernelBench reports mean milliseconds
    meta = {k: str(v)[:200] for k, v in (r.metadata or {}).items() if k != "hardware"}
    return {
        "compiled": bool(r.compiled), "correct": bool(r.correctness),
        "runtime_us": r.runtime * 1e3 if timed else None,
        "ref_runtime_us": r.ref_runtime * 1e3 if timed and r.ref_runtime > 0 else None,
        "metadata": meta,
    }  # fmt: skip


def _end_pool(pool) -> None:
    """Terminate a pool, then kill what its workers started (each worker led its own process
    group: nvcc and ninja of a cut build go too). Killing workers before `terminate` could
    leave a queue lock held and hang it."""
    groups = [p.pid for p in getattr(pool, "_pool", [])]
    pool.terminate()
    pool.join()
    for g in groups:
        try:
            os.killpg(g, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def spawn_builds(jobs: list[dict], deadline: Deadline, on_done: Callable[[dict], None]) -> bool:
    """KernelBench's parallel pre-compile over all cores; True when every job finished."""
    ctx = mp.get_context("spawn")
    pool = ctx.Pool(min(os.cpu_count() or 1, len(jobs)), initializer=os.setpgrp)
    try:
        it = pool.imap_unordered(_kb_build, jobs)
        for _ in jobs:
            if deadline.left() <= 0:
                return False
            on_done(it.next(timeout=max(deadline.left(), 0.1)))
        return True
    except mp.TimeoutError:
        return False
    finally:
        _end_pool(pool)


def spawn_eval(job: dict, deadline: Deadline, timeout_s: float) -> dict | None:
    """One candidate in a fresh process (the batch script's `mp.Pool(1)` per candidate):
    its row, KernelBench's timeout row past `timeout_s`, None when the deadline came first."""
    ctx = mp.get_context("spawn")
    pool = ctx.Pool(1, initializer=os.setpgrp)
    wait = min(timeout_s, max(deadline.left(), 0.1))
    try:
        return pool.apply_async(_kb_eval, (job,)).get(timeout=wait)
    except mp.TimeoutError:
        if wait < timeout_s:
            return None
        return {"compiled": False, "correct": False, "error": "Evaluation timed out"}
    finally:
        _end_pool(pool)


def _kb_probe(root: str, arch: str) -> bool:
    kbe = _kb_child(root, arch)
    return callable(kbe.build_compile_cache) and callable(kbe.eval_kernel_against_ref)


def kb_import_problem(root: Path, arch: str, timeout_s: float = 120.0) -> str:
    """'' when KernelBench's harness imports in a spawned child as the passes import it,
    else the reason in one line (checked before any pass, so a missing package costs seconds)."""
    pool = mp.get_context("spawn").Pool(1)
    try:
        ok = pool.apply_async(_kb_probe, (str(root), arch)).get(timeout=timeout_s)
        return "" if ok else "kernelbench.eval lacks build_compile_cache/eval_kernel_against_ref"
    except Exception as e:  # noqa: BLE001 - any failure to import is the answer
        return f"KernelBench's harness does not import: {type(e).__name__}: {e}"[:300]
    finally:
        _end_pool(pool)


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


def _built(records: Records, bkey: str, build_dir: Path) -> dict | None:
    rec = records.last("kb_build", key=bkey)
    if rec and (not rec["ok"] or any(build_dir.rglob("*.so"))):
        return rec  # a failure stays a failure; a success needs its build still on disk
    return None


def run_kb_pass(
    records: Records, jobs: list[dict], settings_key: str, deadline: Deadline, *,
    build: Callable = spawn_builds, evaluate: Callable = spawn_eval, timeout_s: float = 180.0,
    first_estimate_s: float = 60.0, min_build_left_s: float = 180.0,
) -> str:  # fmt: skip
    """KernelBench's harness over `jobs` (each: key, problem, src, ref, build_dir, ...),
    skipping candidates whose row is recorded; 'complete', 'deadline' or 'stopped'."""
    todo = [j for j in jobs if not records.last("kb_row", key=j["key"], settings=settings_key)]
    need = [j for j in todo if not _built(records, j["bkey"], Path(j["build_dir"]))]
    if need:
        if deadline.left() < min_build_left_s:
            print(f"  kernelbench: {len(need)} to pre-compile; left for a fresh call", flush=True)
            return "deadline"
        for j in need:  # stale lock files of a killed build would make load_inline wait forever
            shutil.rmtree(j["build_dir"], ignore_errors=True)
        seg, t0 = f"seg{len(records.of('kb_segment'))}-{_now()}", deadline.clock()

        def done(b: dict) -> None:
            records.add({"type": "kb_build", "key": b.pop("key"), "segment": seg, **b})

        finished = build([j | {"key": j["bkey"]} for j in need], deadline, done)
        wall = round(deadline.clock() - t0, 3)
        records.add({"type": "kb_segment", "segment": seg, "n_jobs": len(need),
                     "wall_s": wall, "complete": finished})  # fmt: skip
        if not finished:
            return "deadline"
    for j in todo:
        b = _built(records, j["bkey"], Path(j["build_dir"]))
        spent = [r["eval_s"] for r in records.of("kb_row") if r.get("settings") == settings_key]
        est = 1.2 * max(spent) if spent else first_estimate_s
        if b is not None and b["ok"] and deadline.left() < est:
            return "deadline"
        t0 = deadline.clock()
        if b is None or not b["ok"]:  # the pre-compile failed: recorded, not evaluated
            row = {"compiled": False, "correct": False, "error": (b or {}).get("error", "")}
        else:
            row = evaluate(j, deadline, timeout_s)
            if row is None:
                return "deadline"
        row |= {"type": "kb_row", "key": j["key"], "settings": settings_key,
                "problem": j["problem"], "segment": b["segment"] if b else None,
                "eval_s": round(deadline.clock() - t0, 3)}  # fmt: skip
        records.add(row)
        print(f"  kernelbench {j['problem']}: correct={row['correct']} ({row['eval_s']:.0f} s)",
              flush=True)  # fmt: skip
    return "complete"


def kb_jobs(root: Path, items: list[dict], cand_dir: Path, work: Path, arch: str) -> list[dict]:
    jobs = []
    for it in items:
        src = (cand_dir / it["inline"]).read_text()
        key = item_key(it, src)
        ref = (root / "KernelBench" / f"level{it['level']}" / it["problem"]).read_text()
        bkey = f"{key}|{arch}"
        jobs.append({"key": key, "bkey": bkey, "problem": it["problem"], "src": src, "ref": ref,
                     "build_dir": str(work / "kb_build" / sha12(bkey)), "root": str(root),
                     "arch": arch})  # fmt: skip
    return jobs


# ----------------------------------------------------------------------------- summary

CHECKS = {
    "kernelbench": f"{KB_CORRECT_TRIALS} correctness trials (seed {KB_SEED}), "
    f"{KB_PERF_TRIALS} timed trials of the candidate and {KB_PERF_TRIALS} of the reference "
    "(CUDA events, mean), the problem file's own size only, one process per candidate",
    "cudaperf": "5 correctness trials per config on fresh secret-seeded inputs (task's own and "
    "a signed wider distribution), up to 100 timed trials per config (L2 flushed) within the "
    "time budget, re-check after timing, mutation/aliasing/stream/timer/profiler/roofline "
    "checks, eager baseline, candidate in its own confined process",
}


def _problem(key: str) -> str:
    return key.split("@")[0]


def _rate(n: int, wall: float) -> float | None:
    return round(60 * n / wall, 2) if n and wall > 0 else None


def kb_column(records: Records, keys: list[str], settings_key: str) -> dict:
    """KernelBench's rows for `keys`; wall = their evaluations + each pre-compile segment's
    wall time shared evenly over that segment's jobs (jobs cut by a deadline take their share
    with them, so the rate is never lowered by our splitting into calls)."""
    rows = [r for k in keys if (r := records.last("kb_row", key=k, settings=settings_key))]
    segs = {s["segment"]: s for s in records.of("kb_segment")}
    build = sum(segs[r["segment"]]["wall_s"] / segs[r["segment"]]["n_jobs"]
                for r in rows if r.get("segment") in segs)  # fmt: skip
    wall = sum(r["eval_s"] for r in rows) + build
    return {
        "n_planned": len(keys), "n": len(rows), "correct": sum(r["correct"] for r in rows),
        "wall_s": round(wall, 2), "build_share_s": round(build, 2),
        "candidates_per_min": _rate(len(rows), wall), "configs_per_candidate": 1,
        "configs": "default only (the problem file's own sizes)", "rows": rows,
        "build_segments": len({r.get("segment") for r in rows if r.get("segment")}),
    }  # fmt: skip


def cudaperf_column(rec: dict | None, keys: list[str]) -> dict:
    if rec is None:
        return {"n_planned": len(keys), "n": 0, "correct": 0, "rows": []}
    rows = rec["rows"]
    n_cfg = [r["n_configs"] for r in rows]
    trials = [c["trials"] for r in rows for c in r["configs"] if c["trials"]]
    names = sorted({c for r in rows for c in r.get("task_configs", [])})
    return {
        "n_planned": len(keys), "n": len(rows), "correct": sum(r["correct"] for r in rows),
        "wall_s": rec["wall_s"], "candidates_per_min": _rate(len(rows), rec["wall_s"]),
        "configs_per_candidate": {"min": min(n_cfg), "max": max(n_cfg), "total": sum(n_cfg)},
        "configs": f"every config of the task ({', '.join(names)}; held-out included)"
        if rec["settings"]["configs"] == "all" else "default only",
        "every_config_checked": all(r["n_configs"] == len(r.get("task_configs", [])) for r in rows),
        "timed_trials_per_config": {"min": min(trials), "median": statistics.median(trials)}
        if trials else None,
        "rows": rows,
    }  # fmt: skip


def agreement(kb: dict, ours: dict) -> dict:
    """Correctness agreement and time ratios over the candidates both sides finished."""
    mine = {_problem(r["key"]): r for r in ours["rows"]}
    pairs = [(a, mine[_problem(a["key"])]) for a in kb["rows"] if _problem(a["key"]) in mine]
    same = sum(a["correct"] == b["correct"] for a, b in pairs)
    ratios = [b["median_us"] / a["runtime_us"] for a, b in pairs
              if a.get("runtime_us") and b.get("median_us")]  # fmt: skip
    disagree = [_problem(a["key"]) for a, b in pairs if a["correct"] != b["correct"]]
    return {
        "n": len(pairs), "same_verdict": same, "disagree": disagree,
        "median_time_ratio": round(statistics.median(ratios), 4) if ratios else None,
        "time_ratio_n": len(ratios),
        "time_ratio_is": "cudaperf median (default config) / KernelBench mean, same kernels",
    }  # fmt: skip


def summarise(records: Records, plan: dict) -> dict:
    """The comparison from the records alone (what `plan` asked for: keys per column)."""
    cols: dict[str, dict] = {}
    for name, keys in plan["keys"].items():
        if name == "kernelbench":
            col = kb_column(records, keys, plan["kb_settings_key"])
        else:
            col = cudaperf_column(
                records.last("pass", name=name, settings=plan["settings"][name]), keys
            )
        side = "kernelbench" if name == "kernelbench" else "cudaperf"
        cols[name] = {"harness": LABELS[name], "form": FORMS[name], "checks": CHECKS[side]} | col
    out: dict = {"columns": cols}
    if "kernelbench" in cols:
        for name in ("inline", "native"):
            if name in cols and cols[name]["n"] and cols["kernelbench"]["n"]:
                out[f"agreement_vs_{name}"] = agreement(cols["kernelbench"], cols[name])
    out["complete"] = all(c["n"] == c["n_planned"] for c in cols.values())
    out["same_problems"] = len({tuple(sorted(map(_problem, k))) for k in plan["keys"].values()}) < 2
    out["cudaperf_settings"] = next(iter(plan["settings"].values()), None)
    out["table"] = table(cols, out)
    return out


def table(cols: dict, summary: dict) -> list[str]:
    lines = [
        f"{'harness':<22}{'form':<13}{'done':>9}{'correct':>9}{'cfg/cand':>10}{'cand/min':>10}"
    ]
    for c in cols.values():
        cfg = c.get("configs_per_candidate")
        cfg = cfg if isinstance(cfg, int) else (f"{cfg['total'] / c['n']:.2f}" if cfg else "-")
        rate = c.get("candidates_per_min") or "-"
        lines.append(f"{c['harness']:<22}{c['form']:<13}{c['n']:>4}/{c['n_planned']:<4}"
                     f"{c['correct']:>9}{cfg:>10}{rate:>10}")  # fmt: skip
    for c in cols.values():
        every = {True: "; every config checked", False: "; NOT every config checked"}
        tt = c.get("timed_trials_per_config")
        tt = f"; timed trials per config: min {tt['min']}, median {tt['median']}" if tt else ""
        lines.append(f"{c['harness']} ({c['form']}): configs: {c.get('configs', '-')}"
                     f"{every.get(c.get('every_config_checked'), '')}{tt}")  # fmt: skip
    lines.append(f"KernelBench checks: {CHECKS['kernelbench']}")
    lines.append(f"cudaperf checks: {CHECKS['cudaperf']}")
    st = summary.get("cudaperf_settings")
    if st:
        cb = "on" if st.get("compile_baseline") else "off"
        lines.append(f"cudaperf settings: time budget {st.get('time_budget_s')} s per config, "
                     f"torch.compile baseline {cb}")  # fmt: skip
    same = "yes" if summary["same_problems"] else "NO"
    lines.append(f"same problems in every column: {same}")
    for name in ("inline", "native"):
        a = summary.get(f"agreement_vs_{name}")
        if a:
            lines.append(f"agreement KernelBench vs cudaperf {FORMS[name]}: {a['same_verdict']}/"
                         f"{a['n']} same verdict; median time ratio {a['median_time_ratio']} "
                         f"over {a['time_ratio_n']}")  # fmt: skip
    lines.append("complete" if summary["complete"] else "NOT complete: rerun the same command")
    return lines


# ----------------------------------------------------------------------------- main


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def _sh(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def versions(root: Path) -> dict:
    import torch

    nvcc = _sh(["nvcc", "--version"])
    pyproject = (root / "pyproject.toml").read_text() if (root / "pyproject.toml").is_file() else ""
    kb_version = next((ln.split("=")[1].strip().strip('"') for ln in pyproject.splitlines()
                       if ln.startswith("version")), "")  # fmt: skip
    return {
        "torch": torch.__version__, "cuda": torch.version.cuda or "",
        "nvcc": nvcc.splitlines()[-1] if nvcc else "", "python": sys.version.split()[0],
        "driver": _sh(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]),
        "cudaperf_commit": _sh(["git", "rev-parse", "--short", "HEAD"]) or "unknown",
        "cudaperf_execute_sha": sha12("".join(p.read_text() for p in sorted(EXECUTE.glob("*.py")))),
        "kernelbench_version": kb_version, "kernelbench_harness_sha": kb_fingerprint(root),
    }  # fmt: skip


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
        plan["jobs"] = kb_jobs(root, kb_items, args.candidates, args.work.expanduser(),
                               args.kb_gpu_arch)  # fmt: skip
        plan["keys"]["kernelbench"] = [j["key"] for j in plan["jobs"]]
    plan["kb_settings"] = {
        "harness_sha": kb_fingerprint(root), "gpu_arch": args.kb_gpu_arch, "gpu": gpu,
        "num_correct_trials": KB_CORRECT_TRIALS, "num_perf_trials": KB_PERF_TRIALS,
        "seed": KB_SEED, "timeout_s": args.kb_timeout, "timing_method": "cuda_event",
    }  # fmt: skip
    plan["kb_settings_key"] = sha12(json.dumps(plan["kb_settings"], sort_keys=True))
    for name in ("inline", "native"):
        if name in skip:
            continue
        codes = [(args.candidates / it[name]).read_text() for it in items]
        plan["codes"][name] = codes
        plan["keys"][name] = [item_key(it, c) for it, c in zip(items, codes, strict=True)]
        plan["settings"][name] = {
            "form": FORMS[name], "candidates": plan["keys"][name], "configs": args.configs,
            "time_budget_s": args.time_budget, "compile_baseline": not args.no_compile_baseline,
            "trials": 100, "correctness_trials": 5, "gpu": gpu,
        }  # fmt: skip
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
            tasks = [bench_task(root, it["level"], it["problem"], args.configs == "all")
                     for it in items]  # fmt: skip
        rec = run_cudaperf_pass(
            name, tasks, plan["codes"][name], plan["keys"][name], plan["settings"][name],
            args.work.expanduser(), deadline,
        )  # fmt: skip
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
        "format": FORMAT, "complete": s["complete"], "gpu": gpu, "date": _now(),
        "command": cmd, "calls": records.of("call"), "versions": versions(root),
        "settings": {"cudaperf": {k: v for k, v in next(iter(plan["settings"].values()), {})
                                  .items() if k not in ("candidates", "form")},
                     "kernelbench": plan["kb_settings"]},
        "table": s["table"], "columns": cols,
    }  # fmt: skip
    for name, key in (("native", "cudaperf"), ("inline", "cudaperf_inline"),
                      ("kernelbench", "kernelbench")):  # fmt: skip
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
            sys.exit(f"error: {args.resume_from} was not written by this version ({FORMAT}); "
                     "drop --resume-from to start fresh")  # fmt: skip
        print(f"resume-from: {records.merge(old['records'])} records adopted", flush=True)
    gpu = _gpu_name()
    if gpu is None and not args.report_only:
        sys.exit("error: no CUDA GPU visible; run this on the GPU machine (or --report-only)")
    plan = make_plan(args, root, items, gpu)
    problems = [] if args.report_only else preflight(root, plan, records)
    if problems:
        sys.exit("error: " + "; ".join(problems))
    cmd = shlex.join(["python3", sys.argv[0], *(sys.argv[1:] if argv is None else argv)])
    deadline, call, interrupted = Deadline(args.deadline_s), {"started": _now()}, False
    try:
        if not args.report_only:
            call["outcome"] = run_all(args, root, items, plan, records, deadline)
    except KeyboardInterrupt:
        interrupted, call["outcome"] = True, "interrupted (Ctrl-C)"
    finally:
        if not args.report_only:
            records.add({"type": "call", "command": cmd, "deadline_s": args.deadline_s,
                         "ended": _now(), **call})  # fmt: skip
        out = write_out(args, root, plan, records, gpu, cmd)
    print("\n" + "\n".join(out["table"]))
    print(f"wrote {args.out}")
    return 130 if interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
