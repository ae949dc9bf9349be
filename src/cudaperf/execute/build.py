"""Compilation: candidates with nvcc (per-content-hash build directories), references with gcc.

A build directory `<cache_dir>/build/<key>/` holds `src.cu` (or `ref.c`), the library and
`build.json` ({"ok", "log", "seconds"}); the key hashes the source, the flags and the compiler
version, so identical code compiles once and a failed build is not retried. Writes are atomic
(temp name + rename), so parallel builders of the same key cannot see half a library.
With `EvalConfig.isolate_files` the compilers run confined (`build_confine`: only their build
folder writable, the evaluator's files and every non-system folder hidden, no network); what
applied is in `BuildResult.protections`.
Guaranteed: `BuildResult.ok` implies `lib` exists and links with no undefined symbols.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from cudaperf import __version__
from cudaperf.execute.c.harness import CANDIDATE_FILE, HARNESS_FILE, harness_source
from cudaperf.execute.config import EvalConfig
from cudaperf.execute.isolation.build_confine import run_compiler
from cudaperf.tasks.model import Task
from cudaperf.toolchain import tool_version

__all__ = [
    "BuildResult",
    "ToolchainError",
    "GpuInfo",
    "build_candidate",
    "build_reference",
    "cache_key",
    "compile_cached",
    "detect_gpus",
    "first_error",
    "toolchain_versions",
    "torch_arch_list",
]


class ToolchainError(RuntimeError):
    """The compiler is missing or was killed by a signal: the machine's fault, never the
    candidate's (an INFRA_ERROR, not a COMPILE_ERROR), and nothing is cached for it."""


@dataclass(frozen=True)
class BuildResult:
    """Outcome of one compilation."""

    ok: bool  # the library exists and links
    lib: str  # path of the shared library ("" when not ok)
    log: str  # compiler output (full; callers truncate)
    seconds: float  # compile wall time (0 when served from the build cache)
    cached: bool  # served from an earlier build
    timed_out: bool = False  # the compiler hit compile_timeout_s
    protections: dict = field(default_factory=dict)  # confine.Protections (as a dict) the
    # compiler that made this build ran under ({}: unconfined); kept in build.json for hits


@dataclass(frozen=True)
class GpuInfo:
    """One GPU as nvidia-smi reports it."""

    index: int  # nvidia-smi index (what CUDA_VISIBLE_DEVICES takes)
    name: str  # e.g. "NVIDIA H200"
    arch: str  # e.g. "sm_90"
    driver: str  # driver version


def detect_gpus() -> list[GpuInfo]:
    """GPUs visible through nvidia-smi; [] when there is none or nvidia-smi is missing."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return []
    q = "--query-gpu=index,name,compute_cap,driver_version"
    try:
        out = subprocess.run(
            [exe, q, "--format=csv,noheader"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    gpus = []
    for line in out.stdout.strip().splitlines() if out.returncode == 0 else []:
        idx, name, cap, driver = (s.strip() for s in line.split(","))
        gpus.append(GpuInfo(int(idx), name, "sm_" + cap.replace(".", ""), driver))
    return gpus


@functools.cache
def evaluator_fingerprint() -> str:
    """Hash of the evaluator's own source files, so a changed evaluator never reuses old results."""
    return source_hash(Path(__file__).parent)


def source_hash(root: Path) -> str:
    """12 hex digits over every .py under `root`, subfolders included (c/, pytorch/,
    isolation/, bulk/), each with its path: a moved or edited module changes it."""
    h = hashlib.sha256()
    for f in sorted(root.rglob("*.py")):
        h.update(f.relative_to(root).as_posix().encode() + b"\0")
        h.update(f.read_bytes())
    return h.hexdigest()[:12]


def toolchain_versions(config: EvalConfig, driver: str = "") -> dict[str, str]:
    """Versions that change a result: nvcc, gcc, driver, cudaperf (and its evaluator code)."""
    v = {
        "nvcc": tool_version(config.nvcc),
        "gcc": tool_version(config.gcc),
        "cudaperf": f"{__version__}+{evaluator_fingerprint()}",
    }
    if driver:
        v["driver"] = driver
    return v


def torch_arch_list(arch: str, environ: Mapping[str, str]) -> str:
    """TORCH_CUDA_ARCH_LIST for both the prebuild and the worker: the environment's value when
    it has one (what torch in the worker would read), else the one for `arch` ("sm_90a" ->
    "9.0a")."""
    if environ.get("TORCH_CUDA_ARCH_LIST"):
        return environ["TORCH_CUDA_ARCH_LIST"]
    m = re.fullmatch(r"sm_(\d+)(\d)([a-z]?)", arch)
    return f"{m.group(1)}.{m.group(2)}{m.group(3)}" if m else "9.0"


def cache_key(*parts: str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode())
        h.update(b"\0")
    return h.hexdigest()[:20]


def compile_cached(
    cmd: list[str],
    src_name: str,
    src: str,
    out_dir: Path,
    lib_name: str,
    timeout: float,
    config: EvalConfig | None = None,
) -> BuildResult:
    """Run `cmd` (its last item goes after the source) in a scratch dir; move the result.
    Confined per `config.isolate_files` (`build_confine`); unconfined without a `config` (the
    dataset's own, trusted sources: execute.bulk)."""
    with _LOCKS_GUARD:
        lock = _LOCKS.setdefault(str(out_dir), threading.Lock())
    with lock:  # threads building the same key wait for the first instead of racing it
        return _compile_locked(cmd, src_name, src, out_dir, lib_name, timeout, config)


_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


def _compile_locked(
    cmd: list[str],
    src_name: str,
    src: str,
    out_dir: Path,
    lib_name: str,
    timeout: float,
    config: EvalConfig | None,
) -> BuildResult:
    meta = out_dir / "build.json"
    if meta.exists():
        m = json.loads(meta.read_text())
        lib = str(out_dir / lib_name) if m["ok"] else ""
        return BuildResult(
            m["ok"], lib, m["log"], 0.0, True, m.get("timed_out", False), m.get("protections", {})
        )
    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    prot: dict = {}
    isolate = config is not None and config.isolate_files
    hide = [str(Path(config.cache_dir).expanduser())] if config is not None else []
    hide.append(str(Path.home() / ".cache" / "cudaperf"))
    with tempfile.TemporaryDirectory(dir=out_dir) as tmp:
        (Path(tmp) / src_name).write_text(src)
        timed_out = False
        try:
            argv = [*cmd[:-1], "-o", lib_name, src_name, *cmd[-1:]]
            p, prot = run_compiler(argv, tmp, timeout, isolate, hide)
            log, ok = (p.stdout + p.stderr).strip(), p.returncode == 0
        except subprocess.TimeoutExpired:
            log, ok, timed_out = f"compiler killed after {timeout:.0f} s", False, True
        except FileNotFoundError:
            raise ToolchainError(f"{cmd[0]} not found; install it or put it on PATH") from None
        if not timed_out and p.returncode < 0:  # killed from outside (Ctrl-C): no verdict
            raise ToolchainError(f"{cmd[0]} was killed by signal {-p.returncode}")
        if ok:
            os.replace(Path(tmp) / lib_name, out_dir / lib_name)
        os.replace(Path(tmp) / src_name, out_dir / src_name)
    dt = time.perf_counter() - t0
    tmp_meta = out_dir / f"build.json.{os.getpid()}.{threading.get_ident()}"
    m = {"ok": ok, "log": log, "seconds": dt, "timed_out": timed_out, "protections": prot}
    tmp_meta.write_text(json.dumps(m))
    os.replace(tmp_meta, meta)
    return BuildResult(ok, str(out_dir / lib_name) if ok else "", log, dt, False, timed_out, prot)


def _confined(config: EvalConfig) -> str:
    """Part of a build key: a library built unconfined (it may embed any host file) is never
    served to a confined evaluator, nor the other way round."""
    return "confined" if config.isolate_files else "unconfined"


def build_candidate(task: Task, code: str, arch: str, config: EvalConfig) -> BuildResult:
    """Compile candidate + harness into one shared library with nvcc."""
    src = harness_source(task, code)
    cmd = [config.nvcc, "-O3", "-shared", "-Xcompiler", "-fPIC", f"-arch={arch}"]
    cmd += ["-Xlinker", "-z,defs", *config.extra_nvcc_flags, "-lineinfo"]
    key = cache_key("cu", src, " ".join(cmd), tool_version(config.nvcc), _confined(config))
    out = config.cache_dir / "build" / key
    return compile_cached(cmd, "src.cu", src, out, "candidate.so", config.compile_timeout_s, config)


def build_reference(task: Task, config: EvalConfig) -> BuildResult:
    """Compile the task's C reference with gcc -O2 into a shared library."""
    cmd = [config.gcc, "-O2", "-shared", "-fPIC", "-Wl,-z,defs", "-lm"]
    key = cache_key("c", task.source, " ".join(cmd), tool_version(config.gcc), _confined(config))
    out = config.cache_dir / "build" / key
    return compile_cached(
        cmd, "ref.c", task.source, out, "ref.so", config.compile_timeout_s, config
    )


# One compiler diagnostic line of nvcc or gcc (`file(12): error: ...`, `file:12:3: error: ...`);
# groups file, l1 or l2 (the line), msg. Public so every reader of compiler logs uses this one.
COMPILER_ERROR = re.compile(
    r"^(?P<file>[\w./-]+)(?:\((?P<l1>\d+)\)|:(?P<l2>\d+)(?::\d+)?):\s*(?:fatal )?error:?\s*"
    r"(?P<msg>.*)$",
    re.M,
)


def first_error(log: str) -> str:
    """The first compiler error as one model-readable line, mentioning its source line."""
    for m in COMPILER_ERROR.finditer(log):
        line = m.group("l1") or m.group("l2")
        msg = m.group("msg").strip()
        if m.group("file").endswith(CANDIDATE_FILE):
            return f"compile error at line {line}: {msg}"
        if m.group("file").endswith(HARNESS_FILE) or m.group("file").endswith("src.cu"):
            return f"compile error: the entry point does not match the required prototype ({msg})"
    m = re.search(r"undefined reference to `([^']+)'", log)
    if m:
        return f"link error: undefined reference to {m.group(1)} (define it in the candidate)"
    lines = [ln for ln in log.splitlines() if "error" in ln.lower()]
    return f"compile error: {(lines or log.splitlines() or ['unknown'])[0].strip()[:300]}"
