"""Building PyTorch→CUDA candidates ahead of the GPU queue, on the CPU build pool.

Two candidate forms, two build paths:
- **native** (`cudaperf.execute.native.load_cuda`): every embedded CUDA source with an
  `extern "C"` launcher is built with nvcc into the content-addressed native cache (~1 s, no
  torch headers), in a confined child (`native_prebuild`: loading the library runs its
  constructors, candidate code). The worker's `load_cuda` call then finds it and only loads it.
- **load_inline** (KernelBench's form): the candidate module is executed once in a CPU-only
  subprocess (`CUDA_VISIBLE_DEVICES=""`) with `TORCH_EXTENSIONS_DIR` pointing at a per-hash
  folder, which builds the extension (15–50 s against the torch headers); the worker imports
  the module with the same folder and torch finds the build up to date.
Both run in parallel over CPU cores (the evaluator's build pool), never on a GPU worker.
The load_inline subprocess runs the candidate's module-level code, so it is confined
(`confine`): private /tmp and /dev/shm, the evaluator's cache dir hidden except this
candidate's extension folder, the rest read-only, no network. Its `TORCH_CUDA_ARCH_LIST` is
`torch_arch_list`, the same value the GPU worker gets (`supervise.gpu_env`): a different one
changes the nvcc flags in build.ninja and torch rebuilds the extension inside the worker.
"""

from __future__ import annotations

import ast
import hashlib
import json
import logging
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from cudaperf.execute.build import ToolchainError, torch_arch_list
from cudaperf.execute.isolation import confine
from cudaperf.execute.native import parse_prototypes
from cudaperf.execute.pytorch.native_prebuild import prebuild
from cudaperf.tasks.candidate import cuda_sources_in_python

__all__ = [
    "TorchBuild",
    "candidate_form",
    "extensions_dir",
    "native_sources",
    "prebuild_torch_candidate",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TorchBuild:
    """Outcome of building one PyTorch→CUDA candidate."""

    ok: bool  # every kernel source built
    form: str  # "native", "load_inline" or "unknown"
    log: str  # compiler output (truncated by the caller)
    timed_out: bool = False  # the build exceeded its time limit
    ext_dir: str = ""  # TORCH_EXTENSIONS_DIR for load_inline candidates
    protections: dict = field(default_factory=dict)  # confine.Protections (as a dict) the
    # build ran under, as the confined process reported them ({}: unconfined)


def candidate_form(code: str) -> str:
    """'native' when it calls load_cuda, 'load_inline' when it calls load_inline, else 'unknown'."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return "unknown"
    called = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            called.add(f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", ""))
    if "load_cuda" in called:
        return "native"
    if "load_inline" in called or "load" in called:
        return "load_inline"
    return "unknown"


def extensions_dir(cache_dir: Path, code: str) -> Path:
    """The per-candidate TORCH_EXTENSIONS_DIR (shared by the build and the worker)."""
    digest = hashlib.sha256(code.encode()).hexdigest()[:16]
    return Path(cache_dir).expanduser() / "torch_ext" / digest


def native_sources(code: str) -> list[str]:
    """The CUDA sources a native-form candidate passes to `load_cuda`.

    The first argument of each `load_cuda(...)` call, when it is a string literal or a name
    bound to one at module level; when an argument cannot be resolved statically, every string
    that defines a kernel and an `extern "C"` function is taken instead (docstrings that merely
    mention `extern "C"` are never built).
    """
    tree = ast.parse(code)
    strings = {
        t.id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
        for t in node.targets
        if isinstance(t, ast.Name)
    }
    found, unresolved = [], False
    for node in ast.walk(tree):
        f = getattr(node, "func", None)
        name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
        if not isinstance(node, ast.Call) or name != "load_cuda" or not node.args:
            continue
        arg = node.args[0]
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            found.append(arg.value)
        elif isinstance(arg, ast.Name) and arg.id in strings:
            found.append(strings[arg.id])
        else:
            unresolved = True
    if unresolved or not found:
        found += [
            s for s in cuda_sources_in_python(code) if "__global__" in s and parse_prototypes(s)
        ]
    return list(dict.fromkeys(found))


def _build_native(
    code: str,
    arch: str,
    native_cache: Path | None,
    cache_dir: Path,
    timeout_s: float,
    isolate: bool,
) -> TorchBuild:
    if shutil.which("nvcc") is None:  # the machine's fault, not the candidate's
        raise ToolchainError("nvcc not found; install the CUDA toolkit or put it on PATH")
    sources = native_sources(code)
    if not sources:
        return TorchBuild(False, "native", 'no CUDA source with an extern "C" launcher found')
    home = Path.home() / ".cache" / "cudaperf"
    root = Path(native_cache) if native_cache else home / "native"
    hide = [str(Path(cache_dir).expanduser()), str(home)]
    b = prebuild(sources, arch, root, hide, timeout_s, isolate)
    return TorchBuild(b.ok, "native", b.log, b.timed_out, protections=b.protections)


def build_policy(tmp: str, ext_dir: Path, cache_dir: Path) -> confine.Policy:
    """The load_inline build's confinement: its own temp dir and extension folder writable,
    the evaluator's cache dir (other candidates, results) and the host's /tmp hidden."""
    private = tuple(dict.fromkeys(("/tmp", "/dev/shm", tempfile.gettempdir(), str(cache_dir))))
    return confine.Policy(private=private, writable=(tmp, str(ext_dir)), chdir=tmp)


def _build_inline(
    code: str, ext_dir: Path, timeout_s: float, arch: str, cache_dir: Path, isolate: bool
) -> TorchBuild:
    ext_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="cudaperf-build-") as tmp:
        path = Path(tmp) / "candidate.py"
        path.write_text(code, encoding="utf-8")
        env = dict(os.environ)
        env.update(
            TORCH_EXTENSIONS_DIR=str(ext_dir),
            CUDA_VISIBLE_DEVICES="",
            TORCH_CUDA_ARCH_LIST=torch_arch_list(arch, os.environ),
            MAX_JOBS="1",
        )
        rr, rw = os.pipe()
        policy = build_policy(tmp, ext_dir, Path(cache_dir).expanduser())
        cmd = confine.command(policy if isolate else None, [str(path)], rw)
        prot: dict = {}
        try:
            res = subprocess.run(
                cmd,
                cwd=tmp,
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout_s,
                pass_fds=(rw,),
            )
        except subprocess.TimeoutExpired:
            return TorchBuild(False, "load_inline", "", True, str(ext_dir), prot)
        finally:
            os.close(rw)
            prot.update(_read_report(rr))
    text = (res.stdout + res.stderr).strip()
    return TorchBuild(res.returncode == 0, "load_inline", text, False, str(ext_dir), prot)


def _read_report(fd: int) -> dict:
    """The confined process's `Protections` (logged once); {} when it reported none."""
    with os.fdopen(fd) as f:
        line = f.read().strip()
    report = json.loads(line) if line else {}
    if report:
        confine.log_once("load_inline build", report)
    return report


def prebuild_torch_candidate(
    code: str,
    arch: str,
    cache_dir: Path,
    timeout_s: float,
    native_cache: Path | None = None,
    isolate: bool = True,
) -> TorchBuild:
    """Build a candidate's kernels so that the GPU worker only loads them (a load_inline
    candidate's module code runs confined unless `isolate` is False)."""
    form = candidate_form(code)
    if form == "native":
        return _build_native(code, arch, native_cache, cache_dir, timeout_s, isolate)
    if form == "load_inline":
        ext = extensions_dir(cache_dir, code)
        return _build_inline(code, ext, timeout_s, arch, cache_dir, isolate)
    return TorchBuild(False, "unknown", "no kernel loader call (load_cuda or load_inline) found")
