"""KernelBench's side of bench/eval_throughput.py: its harness imported and run as its batch
script runs it (parallel pre-compile, then one fresh spawned process per candidate), resumable
per candidate. Every function a spawned child runs lives at module level here, so the child
(which gets the parent's sys.path) imports it by this module's name."""

from __future__ import annotations

import multiprocessing as mp
import os
import shutil
import signal
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path

from throughput_records import Deadline, Records, item_key, now, sha12

KB_CORRECT_TRIALS, KB_PERF_TRIALS, KB_SEED = 5, 100, 42


def kb_root(path: Path) -> Path:
    """The KernelBench repo root from the root itself or its problem folder."""
    for cand in (path, path.parent):
        if (cand / "src" / "kernelbench" / "eval.py").is_file():
            return cand
    sys.exit(
        f"error: {path} is not a KernelBench checkout (no src/kernelbench/eval.py); "
        "pass its repo root, e.g. --kernelbench .kb"
    )


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
    return {
        "key": job["key"],
        "ok": bool(ok),
        "error": str(err or "")[:300],
        "seconds": round(time.perf_counter() - t0, 2),
    }


def _kb_eval(job: dict) -> dict:
    """`eval_kernel_against_ref` on one candidate (in a fresh spawned process)."""
    kbe = _kb_child(job["root"], job["arch"])
    import torch

    try:
        r = kbe.eval_kernel_against_ref(
            job["ref"],
            job["src"],
            seed_num=KB_SEED,
            num_correct_trials=KB_CORRECT_TRIALS,
            num_perf_trials=KB_PERF_TRIALS,
            measure_performance=True,
            build_dir=job["build_dir"],
            device=torch.device("cuda:0"),
        )
    except Exception as e:  # noqa: BLE001 - the batch script records the harness's failure too
        return {"compiled": False, "correct": False, "error": f"{type(e).__name__}: {e}"[:300]}
    if r is None:  # the harness's "lock file error, please retry"
        return {"compiled": False, "correct": False, "error": "harness returned None (retry)"}
    timed = bool(r.runtime and r.runtime > 0)  # KernelBench reports mean milliseconds
    meta = {k: str(v)[:200] for k, v in (r.metadata or {}).items() if k != "hardware"}
    return {
        "compiled": bool(r.compiled),
        "correct": bool(r.correctness),
        "runtime_us": r.runtime * 1e3 if timed else None,
        "ref_runtime_us": r.ref_runtime * 1e3 if timed and r.ref_runtime > 0 else None,
        "metadata": meta,
    }


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


def _built(records: Records, bkey: str, build_dir: Path) -> dict | None:
    rec = records.last("kb_build", key=bkey)
    if rec and (not rec["ok"] or any(build_dir.rglob("*.so"))):
        return rec  # a failure stays a failure; a success needs its build still on disk
    return None


def run_kb_pass(
    records: Records,
    jobs: list[dict],
    settings_key: str,
    deadline: Deadline,
    *,
    build: Callable = spawn_builds,
    evaluate: Callable = spawn_eval,
    timeout_s: float = 180.0,
    first_estimate_s: float = 60.0,
    min_build_left_s: float = 180.0,
) -> str:
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
        seg, t0 = f"seg{len(records.of('kb_segment'))}-{now()}", deadline.clock()

        def done(b: dict) -> None:
            records.add({"type": "kb_build", "key": b.pop("key"), "segment": seg, **b})

        finished = build([j | {"key": j["bkey"]} for j in need], deadline, done)
        wall = round(deadline.clock() - t0, 3)
        records.add(
            {
                "type": "kb_segment",
                "segment": seg,
                "n_jobs": len(need),
                "wall_s": wall,
                "complete": finished,
            }
        )
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
        row |= {
            "type": "kb_row",
            "key": j["key"],
            "settings": settings_key,
            "problem": j["problem"],
            "segment": b["segment"] if b else None,
            "eval_s": round(deadline.clock() - t0, 3),
        }
        records.add(row)
        print(
            f"  kernelbench {j['problem']}: correct={row['correct']} ({row['eval_s']:.0f} s)",
            flush=True,
        )
    return "complete"


def kb_jobs(root: Path, items: list[dict], cand_dir: Path, work: Path, arch: str) -> list[dict]:
    jobs = []
    for it in items:
        src = (cand_dir / it["inline"]).read_text()
        key = item_key(it, src)
        ref = (root / "KernelBench" / f"level{it['level']}" / it["problem"]).read_text()
        bkey = f"{key}|{arch}"
        jobs.append(
            {
                "key": key,
                "bkey": bkey,
                "problem": it["problem"],
                "src": src,
                "ref": ref,
                "build_dir": str(work / "kb_build" / sha12(bkey)),
                "root": str(root),
                "arch": arch,
            }
        )
    return jobs
