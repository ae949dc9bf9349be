"""PyTorch→CUDA building blocks used on both sides of the process split (see `torch_trusted`).

Comparison of outputs (`compare_outputs`), module loading, device-wide sync, one timed call
(`time_once`: L2 flush, events and wall clock next to the launch), the empty-call timing
overhead, the profiler share of the candidate's own kernels, and the timer-integrity check.
Nothing here holds a secret: this module is imported by the candidate's process too, where
the real timers are captured at import, before any candidate code runs.
"""

from __future__ import annotations

import hashlib
import logging
import re
import sys
import time
import types
from typing import Any

import torch

from cudaperf.execute.types import Status
from cudaperf.tasks.candidate import cuda_sources_in_python
from cudaperf.tasks.model import InputConfig
from cudaperf.tasks.pymodule import exec_with_sizes

__all__ = [
    "as_list",
    "compare_outputs",
    "kernel_names",
    "load_module",
    "profile_share",
    "sync",
    "time_forward",
    "time_once",
    "timers_intact",
]

log = logging.getLogger(__name__)


# This module's own measuring functions (the candidate's process calls them by module
# attribute, so replacing one would change what is reported).
_RUNNER = ("sync", "flush_buffer", "warm", "time_once", "overhead_us", "burst", "profile_share")


def _timers() -> dict:
    """The timing, synchronisation and measuring functions a candidate could replace."""
    mod = sys.modules[__name__]
    return {
        "torch.cuda.Event.elapsed_time": torch.cuda.Event.elapsed_time,
        "torch.cuda.Event.record": torch.cuda.Event.record,
        "torch.cuda.synchronize": torch.cuda.synchronize,
        "time.perf_counter": time.perf_counter,
        **{f"pytorch.runtime.{n}": getattr(mod, n, None) for n in _RUNNER},
    }


# The real timers, captured before any candidate code is imported into this process.
_KERNEL_NAME = re.compile(r"__global__\s+[\w\s:<>,*]*?\b(\w+)\s*\(")
_LAUNCH_BOUNDS = re.compile(r"__launch_bounds__\s*\([^)]*\)")


def pin_precision() -> None:
    """TF32 off for matmul and cuDNN (both sides compute in full fp32)."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


def load_module(source: str, name: str, sizes: dict[str, Any] | None = None) -> types.ModuleType:
    """Execute `source` as a fresh module; `sizes` override its constants where assigned."""
    mod = exec_with_sizes(source, sizes or {}, name)
    sys.modules[name] = mod  # load_inline and pickling look modules up by name
    return mod


def candidate_module_name(code: str) -> str:
    """The module name a candidate is imported under (its content hash)."""
    return f"cudaperf_cand_{hashlib.sha256(code.encode()).hexdigest()[:12]}"


def timers_intact() -> str:
    """A rejection message naming the timing functions replaced since import, or ""."""
    bad = [k for k, v in _timers().items() if v is not _ORIGINAL_TIMERS[k]]
    return f"the candidate replaced {', '.join(bad)}" if bad else ""


def as_list(out: Any) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        return [o for o in out if isinstance(o, torch.Tensor)]
    raise TypeError(f"forward returned {type(out).__name__}, expected a tensor or a tuple")


# Elements per float64 slice of a comparison: a KernelBench level-1 output of 1.6e9 floats
# compared whole in float64 took ~10 temporaries of 12 GiB each and ran the H200 out of memory;
# slices of 2**24 elements keep the comparison's own memory near 1 GiB at any size.
COMPARE_CHUNK = 1 << 24


class _Errors:
    """One output's error statistics, gathered slice by slice (`_errors`)."""

    def __init__(self) -> None:
        self.bad_nan = self.n_over = 0
        self.max_abs = self.max_rel = self.sq_want = self.sq_diff = 0.0
        self.first: tuple[int, float, float] | None = None  # flat index, got, expected


def _slices(t: torch.Tensor, chunk: int):
    flat = t.detach().reshape(-1)
    for s in range(0, flat.numel(), chunk):
        yield s, flat[s : s + chunk].double()


def _rms_finite(w: torch.Tensor, chunk: int) -> float:
    sq, n = 0.0, 0
    for _, w64 in _slices(w, chunk):
        fin = w64[torch.isfinite(w64)]
        sq, n = sq + fin.square().sum().item(), n + fin.numel()
    return (sq / n) ** 0.5 if n else 0.0


def _errors(w, g, atol: float, rtol: float, signed: bool, chunk: int) -> _Errors:
    """Everything `compare_outputs` judges one output by, in float64 slices of `chunk`
    elements (the whole output is never converted at once)."""
    e = _Errors()
    floor = _rms_finite(w, chunk) if signed and w.numel() else 0.0
    for (s, w64), (_, g64) in zip(_slices(w, chunk), _slices(g, chunk), strict=True):
        e.bad_nan += int((~torch.isfinite(g64) & torch.isfinite(w64)).sum().item())
        e.bad_nan += int((torch.isinf(w64) & (g64 != w64)).sum().item())  # the same infinity
        diff = (g64 - w64).abs().nan_to_num(0.0)
        wabs = w64.abs().nan_to_num(0.0)  # a NaN the reference has counts as 0 everywhere
        e.max_abs = max(e.max_abs, diff.max().item())
        e.max_rel = max(e.max_rel, (diff / wabs.clamp_min(max(atol, 1e-30))).max().item())
        over = diff > atol + rtol * (wabs.clamp_min(floor) if signed else wabs)
        n = int(over.sum().item())
        if n and e.first is None:
            i = int(over.nonzero()[0].item())
            e.first = (s + i, g64[i].item(), w64[i].item())
        e.n_over += n
        e.sq_want += wabs.square().sum().item()
        e.sq_diff += diff.square().sum().item()
    return e


def compare_outputs(
    want: Any,
    got: Any,
    atol: float,
    rtol: float,
    normwise_rtol: float,
    signed: bool = False,
    chunk: int = COMPARE_CHUNK,
):
    """(correct, max_abs_err, max_rel_err, message) for a candidate's output. `signed`: the
    inputs separate functions, and each output's bound relative to the expected values has
    that output's RMS as its floor, as `execute.inputs.compare` has on the C path (sums cancel
    on signed inputs; see that module's docstring). Compared in float64, `chunk` elements at
    a time (`COMPARE_CHUNK`), so an output of any size costs the same little extra memory."""
    try:
        ws, gs = as_list(want), as_list(got)
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
        e = _errors(w, g, atol, rtol, signed, chunk)
        if e.bad_nan:
            return (
                False,
                None,
                None,
                (
                    f"output {k} has {e.bad_nan} NaN/Inf values where the reference is finite (or "
                    "another infinity)"
                ),
            )
        max_abs, max_rel = max(max_abs, e.max_abs), max(max_rel, e.max_rel)
        if e.first is not None:
            idx, gv, wv = e.first
            return (
                False,
                max_abs,
                max_rel,
                (
                    f"output {k}: {e.n_over} of {w.numel()} elements outside tolerance; "
                    f"first at flat index {idx}: got {gv:.6g}, expected {wv:.6g}"
                ),
            )
        wn = e.sq_want**0.5
        if wn > 0 and e.sq_diff**0.5 / wn > normwise_rtol:
            return (
                False,
                max_abs,
                max_rel,
                (
                    f"output {k}: normwise relative error {e.sq_diff**0.5 / wn:.3g} exceeds "
                    f"{normwise_rtol:g} (the outputs are small; all-zero or constant results fail)"
                ),
            )
    return True, max_abs, max_rel, ""


def sync(device: str) -> None:
    """Wait for all work on `device` (device-wide on CUDA; nothing to wait for on the CPU)."""
    if device == "cuda":
        torch.cuda.synchronize()


def flush_buffer(device: str) -> torch.Tensor:
    """A buffer twice the L2 size; zeroing it evicts the inputs from L2 (on the CPU, where
    nothing is timed for real, a small stand-in)."""
    if device != "cuda":
        return torch.empty(1 << 16, dtype=torch.float32)
    l2 = torch.cuda.get_device_properties(0).L2_cache_size or (64 << 20)
    return torch.empty(2 * l2 // 4, dtype=torch.float32, device=device)


def warm(fn, args, n: int, device: str) -> None:
    """`n` untimed calls, then a sync."""
    with torch.no_grad():
        for _ in range(n):
            fn(*args)
    sync(device)


def time_once(fn, args, flush: torch.Tensor, device: str) -> tuple[float, float]:
    """(event µs, wall µs) of one call, L2 flushed before it; on the CPU both are wall time.

    Device-wide synchronisation after the call waits for side-stream work too, so the wall
    time includes work that escapes the events (see `sanity.escape_message`)."""
    flush.zero_()
    sync(device)
    with torch.no_grad():
        if device != "cuda":
            t0 = time.perf_counter()
            fn(*args)
            w = (time.perf_counter() - t0) * 1e6
            return w, w
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0 = time.perf_counter()
        start.record()
        fn(*args)
        end.record()
        torch.cuda.synchronize()
        wall = (time.perf_counter() - t0) * 1e6
    return start.elapsed_time(end) * 1e3, wall


def overhead_us(flush: torch.Tensor, device: str, n: int = 11) -> float:
    """Median (wall - event) µs of timing an empty call: what `time_once` adds by itself."""
    xs = sorted(w - e for e, w in (time_once(_noop, (), flush, device) for _ in range(n)))
    return xs[len(xs) // 2]


def _noop(*_args) -> None:
    return None


def burst(fn, args, k: int, device: str) -> None:
    """`k` back-to-back calls and one sync (timed from outside by the trusted side)."""
    warm(fn, args, k, device)


def time_forward(fn, args, warmup: int, trials: int, budget_s: float, device: str = "cuda"):
    """Per-trial event and wall times (µs) of `fn(*args)` on fixed inputs, L2 flushed before
    each trial (the baselines; candidates are timed trial by trial on fresh inputs)."""
    flush = flush_buffer(device)
    warm(fn, args, warmup, device)
    ev, wall, spent = [], [], 0.0
    for _ in range(trials):
        e, w = time_once(fn, args, flush, device)
        ev.append(e)
        wall.append(w)
        spent += w / 1e6  # w in µs
        if spent > budget_s and len(ev) >= 5:
            break
    return ev, wall


def kernel_names(code: str) -> set[str]:
    """The `__global__` function names in the CUDA sources embedded in a candidate."""
    srcs = [_LAUNCH_BOUNDS.sub("", s) for s in cuda_sources_in_python(code)]
    return {m.group(1) for s in srcs for m in _KERNEL_NAME.finditer(s)}


_kernel_names = kernel_names  # the name the tests and older callers use


def profile_share(fn, args, names: set[str], device: str = "cuda"):
    """(share, note, launched): the share of one forward's GPU kernel time spent in kernels
    named in `names`, and which of `names` the profiler saw launching (sorted). On the CPU,
    or when the profiler records no kernels: (None, note, None) — nothing was observed."""
    if device != "cuda":
        return None, "no GPU profiler on the CPU (check skipped)", None
    from torch.profiler import ProfilerActivity, profile

    with torch.no_grad(), profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn(*args)
        torch.cuda.synchronize()
    mine = total = 0.0
    seen: set[str] = set()
    for evt in prof.events():
        if str(evt.device_type).endswith("CUDA") and not evt.name.startswith(("Memcpy", "Memset")):
            dur = (
                evt.device_time_total if hasattr(evt, "device_time_total") else evt.cuda_time_total
            )
            total += dur
            base = evt.name.split("(")[0]
            hit = [n for n in names if re.search(rf"\b{re.escape(n)}\b", base)]
            if hit:
                mine += dur
                seen.update(hit)
    if total == 0:
        return None, "the profiler recorded no GPU kernels (check skipped)", None
    return mine / total, "", sorted(seen)


# In-process checks of *trusted* code (the bulk dataset measurement in execute.bulk, whose
# implementations are the project's own): no process split, same trials as before it.
# Candidates are never checked with these; see torch_trusted.
_CUDA_ERROR = ("CUDA error", "cudaError", "illegal memory access", "device-side assert", "CUBLAS")
_pin_precision = pin_precision
_timers_intact = timers_intact
_as_list = as_list


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


def _check_trials(task, cfg, ref_mod, ref, new, salt: int, req: dict):
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


def _classify(e: Exception) -> tuple[Status, bool]:
    text = f"{type(e).__name__}: {e}"
    if any(k in text for k in _CUDA_ERROR) or isinstance(e, torch.cuda.OutOfMemoryError):
        return Status.RUNTIME_ERROR, True  # the context may be broken: restart the worker
    return Status.RUNTIME_ERROR, False


# The real timers, captured at import, before any candidate code runs in this process (here,
# at the end, so that this module's own functions are among them).
_ORIGINAL_TIMERS = _timers()
