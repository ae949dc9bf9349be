"""Config features for the ranker: what a feature row knows about the config being timed.

The measured order of two implementations changes with the problem size: a small config is
launch- and latency-bound (one thread per row that leaves the GPU nearly idle can lose to a
block per row, or win because it does less per launch), a large one bandwidth- or
compute-bound. The implementation features (`features.py`) read the code only, so a model on
them alone predicts one order for every config. This module adds, per (task, config):

- `s.log_bytes`: ln of the bytes of the task's arrays at that config (C→CUDA: every array
  parameter's length × element size; PyTorch→CUDA: 4 × the product of the positive integer
  module constants, a rough element count, as `analyze.drivers.largest_config` uses);
- `s.rel`: `s.log_bytes` minus its mean over the task's configs (small < 0 < large, whatever
  the task's absolute scale);

and per (implementation, config), from the host code's launches (`<<<grid, block>>>`) with the
config's sizes substituted for the host function's parameters (C→CUDA only: a PyTorch→CUDA
host function's arguments come from tensor shapes, so these stay unknown = NaN there):

- `l.log_threads`: ln of the threads launched, summed over the launches;
- `l.threads_per_byte`: `l.log_threads - s.log_bytes` (work per thread, as a log);
- `l.fill`: threads launched / threads an H200 holds at once (132 SMs × 2048), capped at 1;
- `l.waves`: ln(blocks launched / 132 SMs).

NaN whenever a grid or block expression does not fold to a number (a ternary, a helper's
return value, a loop-dependent launch). Launch expressions are parsed once per code (LRU).
Static and cheap (~1 ms per implementation); the feature cache of `features.py` is untouched.

`row(impl_feats, task, config, code)` is the dict a config-aware model reads: the
implementation's features plus the above. Models name the columns they use, so a model
trained without config features ignores them (and old weights keep working).
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections import OrderedDict

import numpy as np

from cudaperf.tasks.model import InputConfig, Role, Task, eval_length

__all__ = [
    "CONFIG_NAMES",
    "GPU_SMS",
    "LAUNCH_NAMES",
    "column",
    "config_bytes",
    "config_features",
    "launch_features",
    "matrix",
    "needs_config",
    "row",
]

log = logging.getLogger(__name__)

CONFIG_NAMES = ("s.log_bytes", "s.rel")
LAUNCH_NAMES = ("l.log_threads", "l.threads_per_byte", "l.fill", "l.waves")
GPU_SMS = 132  # SMs of the dataset's GPU (H200 SXM); `l.fill` and `l.waves` are relative to it
THREADS_PER_SM = 2048  # resident threads per SM (sm_80 / sm_90)
_ITEMSIZE = {
    "float32": 4,
    "float64": 8,
    "int32": 4,
    "uint32": 4,
    "int64": 8,
    "uint64": 8,
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "uint16": 2,
}


def needs_config(name: str) -> bool:
    """Whether a model column depends on the config (a config or launch feature, a product)."""
    return name.startswith(("s.", "l.")) or "*" in name


def config_bytes(task: Task, config: InputConfig) -> float:
    """Bytes of the task's arrays at `config` (PyTorch→CUDA: 4 × product of the int sizes)."""
    if task.signature:
        total = 0.0
        for p in task.signature:
            if p.role is Role.SCALAR:
                continue
            try:
                total += max(0, eval_length(p.length or "0", config.sizes)) * _ITEMSIZE.get(
                    p.dtype, 4
                )
            except (ValueError, ZeroDivisionError, TypeError):
                continue
        return total
    ints = [v for v in config.sizes.values() if isinstance(v, int) and v > 0]
    return 4.0 * math.prod(ints) if ints else 0.0


def config_features(task: Task, config: InputConfig) -> dict[str, float]:
    """`s.log_bytes` and `s.rel` of `config` (see the module docstring)."""
    logs = {c.name: math.log(max(1.0, config_bytes(task, c))) for c in task.configs}
    mine = logs.get(config.name, math.log(max(1.0, config_bytes(task, config))))
    return {"s.log_bytes": mine, "s.rel": mine - sum(logs.values()) / len(logs)}


# ---- launch expressions -----------------------------------------------------------------

_LAUNCHES: OrderedDict[str, list | None] = OrderedDict()
_LAUNCH_CACHE_SIZE = 32768


class _Unknown(Exception):
    pass


def _parse_launches(code: str) -> list | None:
    """[(grid expression, block expression)] per `<<<>>>` launch (sympy, in the host
    function's parameters); None when there is no launch or the code does not parse."""
    import sympy as sp

    from cudaperf.analyze.parse import (
        dim_values,
        extract_cuda,
        launch_calls,
        parse,
        read_constants,
    )

    root = parse(extract_cuda(code).code).root_node
    out = [
        (sp.Mul(*dim_values(args[0], scope, body)), sp.Mul(*dim_values(args[1], scope, body)))
        for _, args, scope, body in launch_calls(root, read_constants(root))
        if len(args) >= 2
    ]
    return out or None


def _launches(code: str) -> list | None:
    key = hashlib.sha256(code.encode()).hexdigest()
    if key in _LAUNCHES:
        _LAUNCHES.move_to_end(key)
        return _LAUNCHES[key]
    try:
        found = _parse_launches(code)
    except Exception:  # noqa: BLE001 - a parser corner case leaves the launch features unknown
        log.debug("launch expressions unavailable", exc_info=True)
        found = None
    _LAUNCHES[key] = found
    while len(_LAUNCHES) > _LAUNCH_CACHE_SIZE:
        _LAUNCHES.popitem(last=False)
    return found


_MIN = ("Min", "call_min", "call_fminf", "call_fmin", "call_umin", "call_std::min")
_MAX = ("Max", "call_max", "call_fmaxf", "call_fmax", "call_umax", "call_std::max")


def _eval(e, env: dict) -> float:
    """A launch expression at concrete sizes (`analyze.index.fold`: `div` = C integer
    division); min/max calls folded too; a size missing from `env` or another node: _Unknown."""
    from cudaperf.analyze.index import fold

    def value(s) -> float:
        if s.name in env:
            return float(env[s.name])
        raise _Unknown(s.name)

    def other(e) -> float:
        name = getattr(e.func, "__name__", "")
        if name in _MIN:
            return min(_eval(a, env) for a in e.args)
        if name in _MAX:
            return max(_eval(a, env) for a in e.args)
        raise _Unknown(name or str(e))

    return fold(e, value, other)


_NAN_LAUNCH = dict.fromkeys(LAUNCH_NAMES, math.nan)


def launch_features(code: str, task: Task, config: InputConfig) -> dict[str, float]:
    """The `l.*` features of `code` at `config` (NaN unless every launch folds to numbers)."""
    if not task.signature:  # PyTorch→CUDA: host arguments come from tensor shapes
        return dict(_NAN_LAUNCH)
    found = _launches(code)
    if not found:
        return dict(_NAN_LAUNCH)
    threads = blocks = 0.0
    try:
        for grid, block in found:
            g, b = _eval(grid, config.sizes), _eval(block, config.sizes)
            threads += g * b
            blocks += g
    except (_Unknown, ZeroDivisionError, OverflowError, ValueError, TypeError):
        return dict(_NAN_LAUNCH)
    if not (threads > 0 and blocks > 0 and math.isfinite(threads)):
        return dict(_NAN_LAUNCH)
    lt = math.log(threads)
    return {
        "l.log_threads": lt,
        "l.threads_per_byte": lt - math.log(max(1.0, config_bytes(task, config))),
        "l.fill": min(1.0, threads / (GPU_SMS * THREADS_PER_SM)),
        "l.waves": math.log(blocks / GPU_SMS),
    }


def row(feats: dict[str, float], task: Task, config: InputConfig, code: str) -> dict[str, float]:
    """The implementation's feature dict plus the config and launch features at `config`."""
    return {**feats, **config_features(task, config), **launch_features(code, task, config)}


def column(r: dict[str, float], name: str) -> float:
    """A model column of a feature row: a feature, or `a*b` the product of two (NaN if unknown)."""
    if "*" not in name:
        v = r.get(name)
        return math.nan if v is None else float(v)
    out = 1.0
    for part in name.split("*"):
        v = r.get(part)
        if v is None:
            return math.nan
        out *= float(v)
    return out


def matrix(rows: list[dict[str, float]], names: list[str]) -> np.ndarray:
    """The columns `names` (`column`) of feature rows: one matrix row per row, unknown = NaN.
    Every feature model builds its inputs here, for training and for scoring alike."""
    x = np.array([[column(r, n) for n in names] for r in rows], dtype=float)
    return x.reshape(len(rows), len(names))
