"""The C reference and output comparison (numpy + ctypes; no GPU needed).

Inputs are drawn by `cudaperf.tasks.inputs.make_inputs` (the config's distributions, a seed
mixed from the config's public seed, the task and config names, the input-set index and a
secret salt the candidate never sees; out arrays poisoned). The reference is the task's C
source compiled by gcc and called through ctypes on numpy arrays, with out arrays poisoned as
the candidate's are; out elements the reference never writes (strided or partial writes) are
undefined and not compared.

Inputs that separate functions (`make_inputs(..., separating=True)`, the rule in
`cudaperf.tasks.inputs`) are used only where the reference's outputs on them are all finite
(`reference_finite`): a log or a square root of negative numbers is not the candidate's
problem. On them an output is compared with `compare(..., signed=True)`: the bound relative to
each expected value, `rtol * |expected|`, becomes `rtol * max(|expected|, S)` with S the RMS of
that output array (`output_scale`). A task's tolerance bounds the rounding of a sum of
same-sign terms relative to the sum; on signed inputs sums cancel, an output near zero carries
the rounding error of partial sums of size S, and a correct float kernel failed there
(`bench/tolerance_signed.py` measures how often). A wrong function still errs by about S.
"""

from __future__ import annotations

import ctypes
import math
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from cudaperf.tasks.model import Param, Role, Task

__all__ = [
    "Comparison",
    "compare",
    "output_scale",
    "reference_finite",
    "run_reference",
    "scalar_ctype",
    "time_reference",
]

_CTYPES = {
    "float32": ctypes.c_float,
    "float64": ctypes.c_double,
    "int8": ctypes.c_int8,
    "uint8": ctypes.c_uint8,
    "int16": ctypes.c_int16,
    "uint16": ctypes.c_uint16,
    "int32": ctypes.c_int32,
    "uint32": ctypes.c_uint32,
    "int64": ctypes.c_int64,
    "uint64": ctypes.c_uint64,
}


def scalar_ctype(p: Param):
    """The ctypes type of a scalar parameter."""
    return _CTYPES[p.dtype]


def reference_finite(task: Task, want: list[np.ndarray]) -> bool:
    """True when every floating out/inout value of the reference's outputs is finite."""
    for p, w in zip(task.signature, want, strict=True):
        if p.role in (Role.OUT, Role.INOUT) and np.issubdtype(w.dtype, np.floating):
            data = w.compressed() if np.ma.isMaskedArray(w) else w
            if not np.isfinite(data).all():
                return False
    return True


def _call_args(task: Task, arrays: list[np.ndarray]) -> list:
    args = []
    for p, a in zip(task.signature, arrays, strict=True):
        if p.role is Role.SCALAR:
            args.append(scalar_ctype(p)(a.item()))
        else:
            args.append(ctypes.c_void_p(a.ctypes.data))
    return args


def _reference_buffers(task: Task, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """Copies of `inputs` (out arrays arrive poisoned, as the candidate's do)."""
    return [a.copy() for a in inputs]


def _elements(a: np.ndarray) -> np.ndarray:
    """The array's bytes, one row per element."""
    return a.reshape(-1).view(np.uint8).reshape(a.size, a.itemsize)


def run_reference(task: Task, lib: ctypes.CDLL, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """Run the C reference on copies of `inputs`; returns the arrays after the call.

    An `out` array that still holds poisoned elements afterwards is checked with a second run
    on zero-filled copies: elements that are poison after the first run and zero after the
    second were never written (a strided or partial write), their contents are undefined, and
    they come back masked (`numpy.ma`) so that `compare` skips them. Fully written outputs
    cost nothing extra."""
    fn = getattr(lib, task.entry)
    fn.restype = None
    bufs = _reference_buffers(task, inputs)
    fn(*_call_args(task, bufs))
    outs = [
        i
        for i, p in enumerate(task.signature)
        if p.role is Role.OUT and bufs[i].size and (_elements(bufs[i]) == 0xFF).all(1).any()
    ]
    if not outs:
        return bufs
    again = _reference_buffers(task, inputs)
    for i in outs:
        again[i].fill(0)
    fn(*_call_args(task, again))
    for i in outs:
        # poison in the first run and zeros in the second: never touched (an element the
        # reference reads and updates, an out array that should be inout, stays compared)
        unwritten = (_elements(bufs[i]) == 0xFF).all(1) & (_elements(again[i]) == 0).all(1)
        unwritten = unwritten.reshape(bufs[i].shape)
        if unwritten.any():
            bufs[i] = np.ma.MaskedArray(bufs[i], mask=unwritten)
    return bufs


def time_reference(
    task: Task, lib: ctypes.CDLL, inputs: list[np.ndarray], trials: int, budget_s: float
) -> list[float]:
    """Wall times (µs) of the serial C reference; at least one run, then until trials or budget."""
    fn = getattr(lib, task.entry)
    fn.restype = None
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < trials and (not times or time.perf_counter() - start < budget_s):
        bufs = _reference_buffers(task, inputs)
        args = _call_args(task, bufs)
        t0 = time.perf_counter()
        fn(*args)
        times.append((time.perf_counter() - t0) * 1e6)
    return times


@dataclass(frozen=True)
class Comparison:
    """Outcome of comparing candidate outputs with the reference on one input set."""

    correct: bool  # all outputs within tolerance and inputs unmodified
    max_abs_err: float  # max |got - want| over out/inout arrays (inf when non-finite)
    max_rel_err: float  # max |got - want| / |want| over elements with |want| > atol
    message: str  # first problem, model-readable ("" when correct)
    inputs_modified: bool = False  # an `in` array differs after the call


def output_scale(w: np.ndarray) -> float:
    """The RMS of an output array's finite values that the reference wrote (0 when none)."""
    data = w.compressed() if np.ma.isMaskedArray(w) else np.ravel(w)
    if not np.issubdtype(data.dtype, np.floating):
        return 0.0
    data = data[np.isfinite(data)].astype(np.float64)
    return float(np.sqrt(np.mean(data * data))) if data.size else 0.0


def compare(
    task: Task,
    inputs: list[np.ndarray],
    got: list[np.ndarray],
    want: list[np.ndarray],
    held_out: bool = False,
    signed: bool = False,
) -> Comparison:
    """Compare every out/inout array (tolerance; equal values, infinities included, pass; NaN
    passes only where the reference has NaN too) and check `in` arrays. With `held_out` the
    message carries no element count, index or value (they would give the config's size away).
    `signed`: the inputs separate functions; the relative bound has the output's RMS as its
    floor (module docstring)."""
    tol = task.tolerance
    worst_abs, worst_rel, first = 0.0, 0.0, ""
    for p, x, g, w in zip(task.signature, inputs, got, want, strict=True):
        if (
            p.role is Role.IN
            and g is not x
            and not np.array_equal(x.view(np.uint8), g.view(np.uint8))
        ):
            idx = int(np.flatnonzero(x != g)[0]) if np.any(x != g) else 0
            at = "" if held_out else f" (first at index {idx})"
            msg = f"input array {p.name} was modified{at}; inputs are read-only"
            return Comparison(False, math.inf, math.inf, msg, inputs_modified=True)
        if p.role not in (Role.OUT, Role.INOUT) or g.size == 0:
            continue
        floor = output_scale(w) if signed else 0.0
        a, r, bad = _errors(g, w, tol.atol, tol.rtol, floor)
        worst_abs, worst_rel = max(worst_abs, a), max(worst_rel, r)
        rel = f"max(|expected|, {floor:.3g})" if signed else "|expected|"
        if bad is not None and not first and held_out:
            first = (
                f"some elements of {p.name} are wrong (max abs err {a:.3g}, allowed "
                f"{tol.atol:g} + {tol.rtol:g}*{rel})"
            )
        elif bad is not None and not first:
            i = int(np.flatnonzero(bad)[0])
            first = (
                f"{int(bad.sum())} of {g.size} elements of {p.name} are wrong; first at index "
                f"{i}: got {g[i].item()!r}, expected {w[i].item()!r} (max abs err {a:.3g}, "
                f"allowed {tol.atol:g} + {tol.rtol:g}*{rel})"
            )
    return Comparison(not first, worst_abs, worst_rel, first)


_CHUNK = 1 << 20  # elements compared at once: the temporaries stay small (no page faults)
_THREADS = min(8, os.cpu_count() or 1)  # slices compared side by side (numpy frees the GIL)
_POOL: ThreadPoolExecutor | None = None


def _pool() -> ThreadPoolExecutor:
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(_THREADS, thread_name_prefix="compare")
    return _POOL


def _forget_pool() -> None:
    """In a forked child: the parent's pool threads do not exist there; make a new one."""
    global _POOL
    _POOL = None


os.register_at_fork(after_in_child=_forget_pool)


def _errors(g: np.ndarray, w: np.ndarray, atol: float, rtol: float, floor: float = 0.0):
    """(max abs err, max rel err, mask of bad elements or None); allowed per element:
    atol + rtol * max(|w|, floor). Every step is per element or a max, so a large output is
    compared in slices of `_CHUNK`, up to `_THREADS` at a time (a correct 16 M-element float32
    output: 2.4-2.7x faster than whole on this project's 2-core CPU machine in one thread,
    `bench/compare_speed.py`); the mask that a failure's message needs comes from the whole
    array, computed only when a slice fails (masked outputs: whole, as before)."""
    if g.size <= _CHUNK or np.ma.isMaskedArray(w) or g.shape != w.shape:
        return _errors_whole(g, w, atol, rtol, floor)
    gf, wf = g.reshape(-1), w.reshape(-1)

    def part(s: int):
        return _errors_whole(gf[s : s + _CHUNK], wf[s : s + _CHUNK], atol, rtol, floor)

    starts = range(0, gf.size, _CHUNK)
    parts = list(_pool().map(part, starts)) if _THREADS > 1 else [part(s) for s in starts]
    if any(bad is not None for _, _, bad in parts):
        return _errors_whole(g, w, atol, rtol, floor)
    return max(p[0] for p in parts), max(p[1] for p in parts), None


def _errors_whole(g: np.ndarray, w: np.ndarray, atol: float, rtol: float, floor: float = 0.0):
    """`_errors` over the whole arrays at once. Float math in the array's own precision
    (float32 stays float32)."""
    skip = np.ma.getmaskarray(w) if np.ma.isMaskedArray(w) else None  # unwritten by the reference
    w = np.ma.getdata(w)
    if not np.issubdtype(g.dtype, np.floating):
        g, w = g.astype(np.float64), w.astype(np.float64)
    err = np.abs(g - w)
    aw = np.abs(w)
    ok = err <= atol + rtol * (np.maximum(aw, floor) if floor > 0 else aw)  # NaN: not ok
    if skip is not None or not ok.all() or np.isinf(aw).any():  # the rare, slower path
        same = g == w  # equal infinities too (inf - inf is NaN)
        if skip is not None:
            same |= skip
        if np.issubdtype(g.dtype, np.floating):
            same |= np.isnan(g) & np.isnan(w)  # both NaN: the reference made it
        ok = same | (ok & np.isfinite(aw))  # an infinite expected value needs the same infinity
        err[same] = 0
    finite = bool(np.isfinite(err).all())
    a = float(err.max()) if finite else math.inf
    big = aw > atol
    r = float(np.divide(err, aw, out=np.zeros_like(err), where=big).max()) if finite else math.inf
    return a, r, (None if ok.all() else ~ok)
