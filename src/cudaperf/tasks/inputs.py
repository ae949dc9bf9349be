"""Input drawing for C→CUDA tasks: one array per signature entry from a config's distributions.

Inputs are drawn with a seed mixed from the config's public seed, the task and config names,
the input-set index and a salt (the evaluator's secret one; a public one where nothing is
judged, e.g. importers and the analyzer's profiling drivers). Out arrays are poisoned with NaN
(floats) or the all-ones bit pattern (integers). Guaranteed: the same (task, config, set
index, salt) gives bit-identical arrays; another salt gives other values.

Inputs that separate functions: a config's own distribution can make a wrong function right
(a copy is a ReLU on non-negative inputs). So the evaluator also checks correctness on a
second input set with the same shapes and dtypes, `make_inputs(..., separating=True)`. The
rule (`separating_distribution`): every floating-point input array is drawn signed and wider,
uniform over [-2R, 2R] with R the largest magnitude the config's distribution reaches
(`separating_range`); integer arrays (indices, CSR row pointers, counts) and constant arrays
keep the config's distribution, so they stay valid; scalars (sizes) are unchanged.
"""

from __future__ import annotations

import math
import zlib

import numpy as np

from cudaperf.tasks.model import Distribution, InputConfig, Role, Task, eval_length

__all__ = ["make_inputs", "poison", "separating_distribution", "separating_range"]


def _rng(task: Task, cfg: InputConfig, set_index: int, salt: int) -> np.random.Generator:
    name_hash = zlib.crc32(f"{task.id}\0{cfg.name}".encode())
    return np.random.default_rng([salt & (2**63 - 1), cfg.seed, set_index, name_hash])


def _draw(rng: np.random.Generator, d: Distribution, n: int, dtype: np.dtype) -> np.ndarray:
    if d.kind == "row_ptr":  # a valid CSR row-pointer array (0 ... nnz, non-decreasing)
        return d.row_ptr(rng, n).astype(dtype)
    if np.issubdtype(dtype, np.integer):
        if d.kind == "constant":
            return np.full(n, int(d.value), dtype=dtype)
        if d.kind == "normal":
            return np.rint(rng.normal(d.mean, d.std, n)).astype(dtype)
        lo = math.ceil(d.low) if d.kind == "uniform" else int(d.low)
        hi = math.floor(d.high) + 1 if d.kind == "uniform" else int(d.high)
        return rng.integers(lo, max(hi, lo + 1), n, dtype=dtype)
    if d.kind == "constant":
        return np.full(n, d.value, dtype=dtype)
    if d.kind == "normal":
        return rng.normal(d.mean, d.std, n).astype(dtype)
    if d.kind == "randint":
        return rng.integers(int(d.low), int(d.high), n).astype(dtype)
    return rng.uniform(d.low, d.high, n).astype(dtype)


def poison(arr: np.ndarray) -> None:
    """Fill an output buffer with NaN (floats) or all-ones bits (integers), in place."""
    arr.view(np.uint8).fill(0xFF)


def separating_range(low: float, high: float) -> tuple[float, float]:
    """The signed, wider range for values a task's own inputs draw from [low, high]:
    [-2R, 2R] with R = max(|low|, |high|, 1e-3). Reusable for any dtype's observed range (the
    PyTorch path applies it to the range of a task's own `get_inputs()` tensors)."""
    r = max(abs(low), abs(high), 1e-3)
    return -2.0 * r, 2.0 * r


def separating_distribution(d: Distribution, dtype: str) -> Distribution | None:
    """The second distribution for one array (see the module docstring); None: keep `d`."""
    if not np.issubdtype(np.dtype(dtype), np.floating) or d.kind in ("constant", "row_ptr"):
        return None
    if d.kind == "normal":
        low, high = d.mean - 3 * d.std, d.mean + 3 * d.std
    else:
        low, high = d.low, d.high
    lo, hi = separating_range(low, high)
    return Distribution(kind="uniform", low=lo, high=hi)


def make_inputs(
    task: Task, cfg: InputConfig, set_index: int, salt: int, separating: bool = False
) -> list[np.ndarray]:
    """One array per signature entry (0-d arrays for scalars), outputs poisoned. With
    `separating`, floating input arrays come from `separating_distribution` instead."""
    rng = _rng(task, cfg, set_index, salt)
    out: list[np.ndarray] = []
    for p in task.signature:
        dtype = np.dtype(p.dtype)
        if p.role is Role.SCALAR:
            out.append(np.array(cfg.sizes[p.name], dtype=dtype))
            continue
        n = eval_length(p.length or "0", cfg.sizes)
        if n < 0:
            raise ValueError(f"config {cfg.name}: length of {p.name} is negative ({n})")
        if p.role is Role.OUT:
            arr = np.empty(n, dtype=dtype)
            poison(arr)
        else:
            d = cfg.param_distributions.get(p.name, cfg.distribution)
            sep = separating_distribution(d, p.dtype) if separating else None
            arr = _draw(rng, sep or d, n, dtype)
        out.append(arr)
    return out
