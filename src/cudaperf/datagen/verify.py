"""Checks of generated tasks that need no GPU: C references compile and run, CUDA compiles.

- `check_reference(task)`: gcc -O2 builds the C reference, which then runs on the smallest
  config with inputs drawn from its distributions, in a child process (a crash or a hang, at
  most `REFERENCE_TIMEOUT_S`, fails the task); every output must be finite and not all (near)
  zero.
- `cuda_units(task)`: the CUDA translation units of every implementation (C→CUDA: CUDA
  runtime header + the task's prototype + the code, as the evaluator's harness compiles it;
  PyTorch→CUDA: each embedded CUDA source string).
- `nvcc_compile(units, jobs)`: `nvcc -arch=sm_90 -cubin` on each unit, in a thread pool.

Not checked here: that implementations compute the right values (that needs a GPU:
`cudaperf eval --implementations`), and PyTorch modules (the CLI and tests run those).
"""

from __future__ import annotations

import ctypes
import faulthandler
import multiprocessing
import shutil
import signal
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cudaperf.tasks.candidate import cuda_sources_in_python
from cudaperf.tasks.model import Distribution, InputConfig, Role, Task, TaskKind, eval_length

__all__ = ["CheckResult", "check_reference", "cuda_units", "nvcc_compile", "smallest_config"]


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


REFERENCE_TIMEOUT_S = 60.0  # the reference's run on the smallest config, at most


def check_reference(
    task: Task, config: InputConfig | None = None, timeout_s: float = REFERENCE_TIMEOUT_S
) -> CheckResult:
    """Compile the C reference and run it on `config` (default: the smallest) in a child
    process, so a reference that crashes or never returns fails its task, not the caller."""
    if task.kind is not TaskKind.C2CUDA:
        return CheckResult(task.id, False, "not a C→CUDA task")
    cfg = config or smallest_config(task)
    with tempfile.TemporaryDirectory(prefix="cudaperf-ref-") as tmp:
        so, log = _gcc(task.source, Path(tmp))
        if so is None:
            return CheckResult(task.id, False, f"gcc failed: {log}")
        if "warning" in log:
            return CheckResult(task.id, False, f"gcc warning: {log}")
        ctx = multiprocessing.get_context("fork")
        recv, send = ctx.Pipe(duplex=False)
        child = ctx.Process(target=_run_child, args=(task, cfg, str(so), send), daemon=True)
        child.start()
        send.close()
        try:
            if recv.poll(timeout_s):
                try:
                    ok, message = recv.recv()
                    return CheckResult(task.id, ok, message)
                except EOFError:  # it died before replying
                    pass
            else:
                child.kill()
                return CheckResult(
                    task.id, False, f"the reference did not return within {timeout_s:g} s"
                )
        finally:
            recv.close()
            child.join(5)
            if child.is_alive():
                child.kill()
                child.join()
        return CheckResult(task.id, False, f"the reference crashed ({_death(child.exitcode)})")


def _death(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit status {code}"


def _run_child(task: Task, cfg: InputConfig, so: str, send) -> None:
    faulthandler.disable()  # a crash is the parent's to report, in one line
    try:
        r = _run_reference(task, cfg, so)
        send.send((r.ok, r.message))
    except Exception as e:  # noqa: BLE001 - the task's problem, told to the parent
        send.send((False, f"the reference could not run: {e}"))
    finally:
        send.close()


def _run_reference(task: Task, cfg: InputConfig, so: str) -> CheckResult:
    lib = ctypes.CDLL(so)
    try:
        fn = getattr(lib, task.entry)
    except AttributeError:
        return CheckResult(task.id, False, f"the C source defines no function {task.entry!r}")
    rng = np.random.default_rng(cfg.seed)
    arrays, args = [], []
    for p in task.signature:
        if p.role is Role.SCALAR:
            dt, v = np.dtype(p.dtype), cfg.sizes[p.name]
            args.append(np.ctypeslib.as_ctypes_type(dt)(int(v) if dt.kind in "iu" else v))
            continue
        n = eval_length(p.length, cfg.sizes)
        d = cfg.param_distributions.get(p.name, cfg.distribution)
        a = np.zeros(n, p.dtype) if p.role is Role.OUT else _draw(rng, d, n, np.dtype(p.dtype))
        arrays.append((p, a))
        args.append(ctypes.c_void_p(a.ctypes.data))
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
