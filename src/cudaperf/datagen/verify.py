"""Checks of generated tasks that need no GPU: C references compile and run, CUDA compiles.

- `check_reference(task)`: gcc -O2 builds the C reference, which then runs on the smallest
  config with inputs drawn from its distributions; every output must be finite and not all
  (near) zero.
- `cuda_units(task)`: the CUDA translation units of every implementation (C→CUDA: CUDA
  runtime header + the task's prototype + the code, as the evaluator's harness compiles it;
  PyTorch→CUDA: each embedded CUDA source string).
- `nvcc_compile(units, jobs)`: `nvcc -arch=sm_90 -cubin` on each unit, in a thread pool.

Not checked here: that implementations compute the right values (that needs a GPU:
`cudaperf eval --implementations`), and PyTorch modules (the CLI and tests run those).
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cudaperf.tasks.candidate import cuda_sources_in_python
from cudaperf.tasks.model import Distribution, InputConfig, Role, Task, TaskKind, eval_length

__all__ = ["CheckResult", "check_reference", "cuda_units", "nvcc_compile", "smallest_config"]

_CT = {
    "float32": ctypes.c_float,
    "float64": ctypes.c_double,
    "int32": ctypes.c_int32,
    "uint32": ctypes.c_uint32,
    "int64": ctypes.c_int64,
    "uint64": ctypes.c_uint64,
}


@dataclass(frozen=True)
class CheckResult:
    """One check of one task or unit."""

    name: str  # task id, or "task id:implementation id[:k]"
    ok: bool
    message: str = ""  # first problem (compiler output is cut to 2000 characters)


def smallest_config(task: Task) -> InputConfig:
    """The config with the fewest total array elements (or sizes product for torch)."""

    def weight(c: InputConfig) -> float:
        if task.kind is TaskKind.TORCH2CUDA:
            return float(np.prod([abs(v) or 1 for v in c.sizes.values()]))
        return sum(eval_length(p.length, c.sizes) for p in task.signature if p.length)

    return min(task.configs, key=weight)


def _draw(rng: np.random.Generator, d: Distribution, n: int, dtype: np.dtype) -> np.ndarray:
    if d.kind == "row_ptr":
        return d.row_ptr(rng, n).astype(dtype)
    if d.kind == "constant":
        return np.full(n, d.value, dtype=dtype)
    if d.kind == "normal":
        v = rng.normal(d.mean, d.std, n)
        return (np.rint(v) if np.issubdtype(dtype, np.integer) else v).astype(dtype)
    if d.kind == "randint" or np.issubdtype(dtype, np.integer):
        return rng.integers(int(d.low), int(d.high), n).astype(dtype)
    return rng.uniform(d.low, d.high, n).astype(dtype)


def _gcc(src: str, folder: Path) -> tuple[Path | None, str]:
    (folder / "ref.c").write_text(src)
    so = folder / "ref.so"
    p = subprocess.run(
        ["gcc", "-O2", "-shared", "-fPIC", "-Wall", "-o", str(so), "ref.c", "-lm"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return (so if p.returncode == 0 else None), (p.stdout + p.stderr)[:2000]


def check_reference(task: Task, config: InputConfig | None = None) -> CheckResult:
    """Compile the C reference and run it on `config` (default: the smallest)."""
    if task.kind is not TaskKind.C2CUDA:
        return CheckResult(task.id, False, "not a C→CUDA task")
    cfg = config or smallest_config(task)
    with tempfile.TemporaryDirectory(prefix="cudaperf-ref-") as tmp:
        so, log = _gcc(task.source, Path(tmp))
        if so is None:
            return CheckResult(task.id, False, f"gcc failed: {log}")
        if "warning" in log:
            return CheckResult(task.id, False, f"gcc warning: {log}")
        lib = ctypes.CDLL(str(so))
        rng = np.random.default_rng(cfg.seed)
        arrays, args = [], []
        for p in task.signature:
            if p.role is Role.SCALAR:
                args.append(_CT[p.dtype](cfg.sizes[p.name]))
                continue
            n = eval_length(p.length, cfg.sizes)
            d = cfg.param_distributions.get(p.name, cfg.distribution)
            a = np.zeros(n, p.dtype) if p.role is Role.OUT else _draw(rng, d, n, np.dtype(p.dtype))
            arrays.append((p, a))
            args.append(ctypes.c_void_p(a.ctypes.data))
        fn = getattr(lib, task.entry)
        fn.restype = None
        fn(*args)
    return _outputs_ok(task.id, arrays)


def _outputs_ok(name: str, arrays: list) -> CheckResult:
    for p, a in arrays:
        if p.role not in (Role.OUT, Role.INOUT) or a.size == 0:
            continue
        if not np.all(np.isfinite(a.astype(np.float64))):
            return CheckResult(name, False, f"output {p.name} has non-finite values")
        if np.all(np.abs(a.astype(np.float64)) < 1e-6):
            return CheckResult(name, False, f"output {p.name} is all (near) zero")
    return CheckResult(name, True)


_PRELUDE = "#include <cuda_runtime.h>\n"


def cuda_units(task: Task) -> list[tuple[str, str]]:
    """(name, CUDA source) for every implementation of `task`, ready for nvcc."""
    units = []
    for i in task.implementations:
        if task.kind is TaskKind.C2CUDA:
            units.append((f"{task.id}:{i.id}", f"{_PRELUDE}{task.c_prototype()};\n{i.code}"))
        else:
            for k, src in enumerate(cuda_sources_in_python(i.code)):
                units.append((f"{task.id}:{i.id}:{k}", _PRELUDE + src))
    return units


def _nvcc_one(unit: tuple[str, str], nvcc: str, arch: str) -> CheckResult:
    name, src = unit
    with tempfile.TemporaryDirectory(prefix="cudaperf-nvcc-") as tmp:
        (Path(tmp) / "k.cu").write_text(src)
        p = subprocess.run(
            [nvcc, f"-arch={arch}", "-cubin", "-o", "k.cubin", "k.cu"],
            cwd=tmp,
            capture_output=True,
            text=True,
            timeout=300,
        )
    log = (p.stdout + p.stderr).strip()
    return CheckResult(name, p.returncode == 0, log[:2000])


def nvcc_compile(
    units: list[tuple[str, str]], jobs: int = 2, arch: str = "sm_90", nvcc: str | None = None
) -> list[CheckResult]:
    """Compile each unit to a cubin; results in the order of `units`."""
    exe = nvcc or shutil.which("nvcc")
    if exe is None:
        raise FileNotFoundError("nvcc not found on PATH; install the CUDA toolkit")
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(lambda u: _nvcc_one(u, exe, arch), units))
