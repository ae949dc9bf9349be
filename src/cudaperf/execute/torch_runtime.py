"""PyTorch→CUDA candidates inside the GPU worker: check, time, cross-check, baselines.

Per config, with the task module's size constants overridden by the config:
1. `Model` and `ModelNew` are built from `get_init_inputs()` under the same torch seed.
2. Correctness trials (fresh inputs from a seed the candidate cannot see, written into the
   *same* input buffers every trial, so an output cache keyed on pointers returns stale data):
   the first trial runs the candidate before the reference exists (no freed reference output
   to reuse); later ones keep the reference output alive while the candidate runs. Inputs are
   cloned and compared afterwards (mutation is rejected). Outputs must match elementwise
   (atol + rtol·|want|), be finite where the reference is, and have a normwise relative error
   <= `normwise_rtol` (so zeros never pass on tiny outputs).
3. Timing: CUDA events around the forward with device-wide synchronisation, L2 flushed before
   each trial, a wall-clock cross-check (work escaping the events is rejected), a roofline check
   (input bytes per second above the card's ceiling is rejected), and an integrity check that
   the timers were not replaced.
4. Profiler cross-check (first timed config): the candidate's own kernels must be launched
   and carry most of the GPU time of a forward.
5. Baselines: PyTorch eager and `torch.compile` (default mode) of `Model` on the same inputs,
   timed the same way, cached on disk per (task, config, GPU, versions).
Precision is pinned: TF32 is off for matmul and cuDNN on both sides.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import sys
import time
import types
from pathlib import Path
from typing import Any

import torch

from cudaperf.execute.sanity import escape_message, roofline_message
from cudaperf.execute.types import ConfigResult, Status, Timing
from cudaperf.tasks.candidate import cuda_sources_in_python
from cudaperf.tasks.model import InputConfig, Task
from cudaperf.tasks.pymodule import exec_with_sizes

__all__ = ["compare_outputs", "load_module", "run_torch_job", "time_forward"]

log = logging.getLogger(__name__)


def _timers() -> dict:
    """The timing and synchronisation functions a candidate could replace."""
    return {
        "torch.cuda.Event.elapsed_time": torch.cuda.Event.elapsed_time,
        "torch.cuda.Event.record": torch.cuda.Event.record,
        "torch.cuda.synchronize": torch.cuda.synchronize,
        "time.perf_counter": time.perf_counter,
    }


# The real timers, captured before any candidate code is imported into this process.
_ORIGINAL_TIMERS = _timers()
_KERNEL_NAME = re.compile(r"__global__\s+[\w\s:<>,*]*?\b(\w+)\s*\(")
_LAUNCH_BOUNDS = re.compile(r"__launch_bounds__\s*\([^)]*\)")
_CUDA_ERROR = ("CUDA error", "cudaError", "illegal memory access", "device-side assert", "CUBLAS")


def _pin_precision() -> None:
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


def load_module(source: str, name: str, sizes: dict[str, Any] | None = None) -> types.ModuleType:
    """Execute `source` as a fresh module; `sizes` override its constants where assigned."""
    mod = exec_with_sizes(source, sizes or {}, name)
    sys.modules[name] = mod  # load_inline and pickling look modules up by name
    return mod


def _timers_intact() -> str:
    bad = [k for k, v in _timers().items() if v is not _ORIGINAL_TIMERS[k]]
    return f"the candidate replaced {', '.join(bad)}" if bad else ""


def _as_list(out: Any) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        return [o for o in out if isinstance(o, torch.Tensor)]
    raise TypeError(f"forward returned {type(out).__name__}, expected a tensor or a tuple")


def compare_outputs(want: Any, got: Any, atol: float, rtol: float, normwise_rtol: float):
    """(correct, max_abs_err, max_rel_err, message) for a candidate's output."""
    try:
        ws, gs = _as_list(want), _as_list(got)
    except TypeError as e:
        return False, None, None, str(e)
    if len(ws) != len(gs):
        return False, None, None, f"returned {len(gs)} tensors, expected {len(ws)}"
    max_abs = max_rel = 0.0
    for k, (w, g) in enumerate(zip(ws, gs, strict=True)):
        if tuple(g.shape) != tuple(w.shape):
            return (
                False,
                None,
                None,
                f"output {k} has shape {tuple(g.shape)}, expected {tuple(w.shape)}",
            )
        if g.dtype != w.dtype:
            return False, None, None, f"output {k} has dtype {g.dtype}, expected {w.dtype}"
        w64, g64 = w.detach().double(), g.detach().double()
        bad_nan = (~torch.isfinite(g64) & torch.isfinite(w64)).sum().item()
        bad_nan += (torch.isinf(w64) & (g64 != w64)).sum().item()  # needs the same infinity
        if bad_nan:
            return (
                False,
                None,
                None,
                f"output {k} has {bad_nan} NaN/Inf values where the reference is finite (or "
                "another infinity)",
            )
        diff = (g64 - w64).abs().nan_to_num(0.0)
        max_abs = max(max_abs, diff.max().item() if diff.numel() else 0.0)
        rel = diff / w64.abs().clamp_min(max(atol, 1e-30))
        max_rel = max(max_rel, rel.max().item() if rel.numel() else 0.0)
        over = diff > atol + rtol * w64.abs().nan_to_num(0.0)
        if over.any():
            idx = int(over.flatten().nonzero()[0].item())
            return (
                False,
                max_abs,
                max_rel,
                (
                    f"output {k}: {int(over.sum().item())} of {w.numel()} elements outside "
                    "tolerance; "
                    f"first at flat index {idx}: got {g64.flatten()[idx].item():.6g}, "
                    f"expected {w64.flatten()[idx].item():.6g}"
                ),
            )
        wn = w64.nan_to_num(0.0).norm().item()
        if wn > 0 and diff.norm().item() / wn > normwise_rtol:
            return (
                False,
                max_abs,
                max_rel,
                (
                    f"output {k}: normwise relative error {diff.norm().item() / wn:.3g} exceeds "
                    f"{normwise_rtol:g} (the outputs are small; all-zero or constant results fail)"
                ),
            )
    return True, max_abs, max_rel, ""


def _flush_buffer() -> torch.Tensor:
    l2 = torch.cuda.get_device_properties(0).L2_cache_size or (64 << 20)
    return torch.empty(2 * l2 // 4, dtype=torch.float32, device="cuda")


def time_forward(fn, args, warmup: int, trials: int, budget_ms: float):
    """Per-trial event and wall times (µs) of `fn(*args)`, L2 flushed before each trial."""
    flush = _flush_buffer()
    with torch.no_grad():
        for _ in range(warmup):
            fn(*args)
        torch.cuda.synchronize()
        ev, wall, spent = [], [], 0.0
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for _ in range(trials):
            flush.zero_()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            start.record()
            fn(*args)
            end.record()
            torch.cuda.synchronize()  # device-wide: side-stream work is waited for here
            wall.append((time.perf_counter() - t0) * 1e6)
            ev.append(start.elapsed_time(end) * 1e3)
            spent += wall[-1] / 1e3
            if spent > budget_ms and len(ev) >= 5:
                break
    return ev, wall


def _kernel_names(code: str) -> set[str]:
    srcs = [_LAUNCH_BOUNDS.sub("", s) for s in cuda_sources_in_python(code)]
    return {m.group(1) for s in srcs for m in _KERNEL_NAME.finditer(s)}


def profile_share(fn, args, names: set[str]) -> tuple[float | None, str]:
    """Share of the forward's GPU kernel time spent in kernels named in `names`."""
    from torch.profiler import ProfilerActivity, profile

    with torch.no_grad(), profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn(*args)
        torch.cuda.synchronize()
    mine = total = 0.0
    for evt in prof.events():
        if str(evt.device_type).endswith("CUDA") and not evt.name.startswith(("Memcpy", "Memset")):
            dur = (
                evt.device_time_total if hasattr(evt, "device_time_total") else evt.cuda_time_total
            )
            total += dur
            base = evt.name.split("(")[0]
            if any(re.search(rf"\b{re.escape(n)}\b", base) for n in names):
                mine += dur
    if total == 0:
        return None, "the profiler recorded no GPU kernels (check skipped)"
    return mine / total, ""


def _seed(salt: int, cfg: InputConfig, trial: int) -> int:
    h = hashlib.sha256(f"{salt}:{cfg.name}:{cfg.seed}:{trial}".encode()).digest()
    return int.from_bytes(h[:8], "little") & ((1 << 63) - 1)


def _fresh_inputs(ref_mod, seed: int, into: list | None) -> list:
    """`get_inputs()` under the CUDA default device: tensors are drawn on the GPU (a KernelBench
    level-1 input of 1.6e9 floats takes seconds to draw on the CPU, milliseconds here)."""
    torch.manual_seed(seed)
    with torch.device("cuda"):
        made = ref_mod.get_inputs()
    new = [x.cuda() if isinstance(x, torch.Tensor) else x for x in made]
    if into is None:
        return new
    for buf, x in zip(
        into, new, strict=True
    ):  # same buffers, new values: catches pointer-keyed caches
        if isinstance(buf, torch.Tensor):
            buf.copy_(x)
    return into


def _clone(xs: list) -> list:
    return [x.clone() if isinstance(x, torch.Tensor) else x for x in xs]


def _mutated(before: list, after: list) -> bool:
    return any(
        isinstance(a, torch.Tensor) and not torch.equal(a.nan_to_num(0.0), b.nan_to_num(0.0))
        for a, b in zip(before, after, strict=True)
    )


class _Fail(Exception):
    """A check failed: carries the status and message for this config."""

    def __init__(self, status: Status, message: str, restart: bool = False):
        super().__init__(message)
        self.status, self.message, self.restart = status, message, restart


def _check_trials(task: Task, cfg, ref_mod, ref, new, salt: int, req: dict):
    """Run the correctness trials; returns (inputs, max_abs, max_rel) or raises _Fail."""
    tol = task.tolerance
    inputs, worst = None, (0.0, 0.0)
    for trial in range(req.get("correctness_trials", 3)):
        inputs = _fresh_inputs(ref_mod, _seed(salt, cfg, trial), inputs)
        before, ref_in = _clone(inputs), _clone(inputs)
        with torch.no_grad():
            if trial == 0:  # candidate first: no reference output exists to be reused
                got = new(*inputs)
                torch.cuda.synchronize()
                want = ref(*ref_in)
            else:  # reference output stays alive while the candidate runs
                want = ref(*ref_in)
                torch.cuda.synchronize()
                got = new(*inputs)
            torch.cuda.synchronize()
        if _mutated(before, inputs):
            raise _Fail(Status.REJECTED, "the candidate modified its inputs; write only outputs")
        ok, mabs, mrel, msg = compare_outputs(want, got, tol.atol, tol.rtol, req["normwise_rtol"])
        if not ok:
            when = "" if trial == 0 else f" (trial {trial}: new values in the same input buffers)"
            raise _Fail(Status.WRONG_OUTPUT, msg + when)
        worst = (max(worst[0], mabs or 0.0), max(worst[1], mrel or 0.0))
        del got, want
    return inputs, worst


def _baseline_cache(req: dict) -> tuple[Path | None, dict]:
    path = Path(req["baseline_cache"]) if req.get("baseline_cache") else None
    data = {}
    if path and path.is_file():
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            data[rec["key"]] = rec["timing"]
    return path, data


def _baselines(task: Task, cfg, ref, inputs, req: dict) -> tuple[Timing | None, Timing | None]:
    """Eager and torch.compile timings of the reference, cached on disk."""
    path, cache = _baseline_cache(req)
    key_base = f"{task.id}:{hashlib.sha256(task.source.encode()).hexdigest()[:12]}:{cfg.name}:"
    key_base += f"{torch.cuda.get_device_name(0)}:{torch.__version__}"
    out = []
    for kind in ("eager", "compile"):
        key = key_base + ":" + kind
        if key not in cache:
            if kind == "compile" and not req.get("torch_compile", True):
                out.append(None)
                continue
            try:
                fn = ref if kind == "eager" else torch.compile(ref)
                ev, _ = time_forward(fn, inputs, req["warmup"], req["trials"], req["budget_ms"])
            except Exception as e:  # noqa: BLE001 - a failing baseline must not fail the candidate
                log.warning("%s baseline of %s/%s failed: %s", kind, task.id, cfg.name, e)
                out.append(None)
                continue
            cache[key] = Timing.of(ev).model_dump()
            if path:
                with path.open("a") as fh:
                    fh.write(json.dumps({"key": key, "timing": cache[key]}) + "\n")
        out.append(Timing.model_validate(cache[key]))
    return out[0], out[1]


def _timed(task: Task, cfg, ref, new, inputs, req: dict, profile: bool) -> dict:
    ev, wall = time_forward(new, inputs, req["warmup"], req["trials"], req["budget_ms"])
    tampered = _timers_intact()
    if tampered:
        raise _Fail(Status.REJECTED, tampered)
    timing, wall_t = Timing.of(ev), Timing.of(wall)
    nbytes = sum(x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor))
    hack = escape_message(timing, wall_t) or roofline_message(
        nbytes, timing, req["max_bandwidth_gbs"]
    )
    if hack:
        raise _Fail(Status.REJECTED, hack)
    note = ""
    if profile:
        share, note = profile_share(new, inputs, req["kernel_names"])
        if share is not None and share == 0.0:
            raise _Fail(Status.REJECTED, "none of the candidate's own kernels ran in forward")
        if share is not None and share < req["min_kernel_share"]:
            raise _Fail(
                Status.REJECTED,
                (
                    f"the candidate's kernels carry only {share:.0%} of the forward's GPU time; "
                    "the rest is PyTorch doing the task's work"
                ),
            )
    eager, compiled = _baselines(task, cfg, ref, inputs, req)
    return {"timing": timing, "eager_timing": eager, "compile_timing": compiled, "note": note}


def _one_config(task, cfg, cand_code, salt, req, timed: bool, profile: bool) -> ConfigResult:
    base = {"config": cfg.name, "held_out": cfg.held_out}
    ref_mod = load_module(task.source, f"cudaperf_ref_{cfg.name}", cfg.sizes)
    init = ref_mod.get_init_inputs()
    seed = _seed(salt, cfg, -1)
    cand_mod = load_module(
        cand_code, f"cudaperf_cand_{hashlib.sha256(cand_code.encode()).hexdigest()[:12]}"
    )
    # Both models are built on the GPU from the same seed, so their parameters are equal.
    with torch.device("cuda"):
        torch.manual_seed(seed)
        ref = ref_mod.Model(*init).cuda().eval()
        torch.manual_seed(seed)
        new = cand_mod.ModelNew(*init).cuda().eval()
    inputs, (mabs, mrel) = _check_trials(task, cfg, ref_mod, ref, new, salt, req)
    res = dict(base, correct=True, max_abs_err=mabs, max_rel_err=mrel)
    if timed:
        t = _timed(task, cfg, ref, new, inputs, req, profile)
        res.update(
            timing=t["timing"], eager_timing=t["eager_timing"], compile_timing=t["compile_timing"]
        )
        res["message"] = t["note"]
    return ConfigResult(**res)


def _classify(e: Exception) -> tuple[Status, bool]:
    text = f"{type(e).__name__}: {e}"
    if any(k in text for k in _CUDA_ERROR) or isinstance(e, torch.cuda.OutOfMemoryError):
        return Status.RUNTIME_ERROR, True  # the context may be broken: restart the worker
    return Status.RUNTIME_ERROR, False


def run_torch_job(task: Task, req: dict) -> dict:
    """Check and time one PyTorch→CUDA candidate on every config of `task`.

    `req` keys: code, salt, warmup, trials, budget_ms, normwise_rtol, max_bandwidth_gbs,
    min_kernel_share, correctness_trials, torch_compile, baseline_cache (path or None).
    Returns the worker reply: status, per-config results, message, restart.
    """
    _pin_precision()
    code = req["code"]
    req = dict(req, kernel_names=_kernel_names(code))
    status, results, restart = Status.OK, [], False
    for i, cfg in enumerate(task.configs):
        try:
            cr = _one_config(task, cfg, code, req["salt"], req, status is Status.OK, i == 0)
        except _Fail as f:
            cr = ConfigResult(
                config=cfg.name, held_out=cfg.held_out, correct=False, message=f.message
            )
            st, restart = f.status, f.restart
        except Exception as e:  # noqa: BLE001 - the candidate's code raised: a runtime error
            st, restart = _classify(e)
            msg = f"{type(e).__name__}: {str(e)[:500]}"
            cr = ConfigResult(config=cfg.name, held_out=cfg.held_out, correct=False, message=msg)
        else:
            st = Status.OK
        results.append(cr.model_dump(mode="json"))
        if status is Status.OK and st is not Status.OK:
            status = st
        if restart:
            break
    msg = next((r["message"] for r in results if r["message"] and not r["correct"]), "")
    return {"status": status.value, "configs": results, "message": msg, "restart": restart}
