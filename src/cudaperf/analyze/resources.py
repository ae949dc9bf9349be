"""Per-kernel resource usage from `nvcc -Xptxas -v`, and theoretical occupancy.

`ptxas_resources` compiles the CUDA text to a cubin only (no host compilation, no linking) for
one architecture and parses ptxas's report per entry function. Results are cached by the
hash of (source, arch, nvcc version) in memory and, when a cache directory is given, on disk.

`occupancy` follows the CUDA occupancy calculator (`cuda_occupancy.h`, default carveout,
no partitioned global caching, no opt-in dynamic shared memory above 48 KB), so it agrees with
`cudaOccupancyMaxActiveBlocksPerMultiprocessor` for the limits tabulated in `ARCHS`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import shutil
import subprocess
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from cudaperf.toolchain import tool_version

__all__ = [
    "ARCHS",
    "ArchLimits",
    "Occupancy",
    "PtxasError",
    "Resources",
    "demangle_base",
    "occupancy",
    "parse_ptxas",
    "ptxas_resources",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ArchLimits:
    """Per-SM limits of one architecture (from the CUDA programming guide's tables)."""

    max_warps: int  # resident warps per SM
    max_blocks: int  # resident blocks per SM
    smem_per_sm: int  # bytes of shared memory per SM (largest carveout)
    smem_per_block: int = 49152  # bytes per block without opt-in
    reserved_smem: int = 1024  # bytes the driver reserves per block (sm_80+)
    smem_granularity: int = 128  # shared-memory allocation unit, bytes
    regs_per_sm: int = 65536  # 32-bit registers per SM
    regs_per_block: int = 65536  # registers one block may use
    reg_unit: int = 256  # registers are allocated per warp in units of this many
    max_regs_per_thread: int = 255  # hardware limit per thread
    subpartitions: int = 4  # SM sub-partitions (warp schedulers)


ARCHS: dict[str, ArchLimits] = {
    "sm_70": ArchLimits(64, 32, 98304, reserved_smem=0, smem_granularity=256),
    "sm_75": ArchLimits(32, 16, 65536, reserved_smem=0, smem_granularity=256),
    "sm_80": ArchLimits(64, 32, 167936),
    "sm_86": ArchLimits(48, 16, 102400),
    "sm_87": ArchLimits(48, 16, 167936),
    "sm_89": ArchLimits(48, 24, 102400),
    "sm_90": ArchLimits(64, 32, 233472),
    "sm_90a": ArchLimits(64, 32, 233472),
    "sm_100": ArchLimits(64, 32, 233472),
    "sm_120": ArchLimits(48, 24, 102400),
}


@dataclass(frozen=True)
class Resources:
    """ptxas's report for one entry function."""

    registers: int  # registers per thread
    smem_bytes: int  # static shared memory per block
    stack_bytes: int  # stack frame per thread
    spill_store_bytes: int  # bytes spilled to local memory (stores)
    spill_load_bytes: int  # bytes reloaded from spills (loads)
    cmem_bytes: int = 0  # constant bank 0 bytes (kernel parameters)


@dataclass(frozen=True)
class Occupancy:
    """Theoretical occupancy of one kernel at one block size."""

    blocks_per_sm: int  # resident blocks per SM
    occupancy: float  # resident warps / max warps, 0..1
    limiter: str  # "warps", "blocks", "registers" or "shared memory"


class PtxasError(RuntimeError):
    """nvcc could not compile the source (the message holds its first errors)."""


def _ceil_to(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def occupancy(
    arch: str, block_size: int, registers: int, smem_bytes: int, dynamic_smem: int = 0
) -> Occupancy:
    """Resident blocks and warps per SM, as cudaOccupancyMaxActiveBlocksPerMultiprocessor."""
    lim = ARCHS[arch]
    warps = -(-block_size // 32)
    limits = {"warps": lim.max_warps // warps, "blocks": lim.max_blocks}
    regs_warp = _ceil_to(registers * 32, lim.reg_unit)
    if (
        registers > lim.max_regs_per_thread
        or regs_warp * _ceil_to(warps, lim.subpartitions) > lim.regs_per_block
    ):
        limits["registers"] = 0
    elif regs_warp:
        per_part = (lim.regs_per_sm // lim.subpartitions) // regs_warp
        limits["registers"] = per_part * lim.subpartitions // warps
    smem = _ceil_to(smem_bytes + lim.reserved_smem + dynamic_smem, lim.smem_granularity)
    if smem > lim.smem_per_block + lim.reserved_smem:
        limits["shared memory"] = 0
    elif smem:
        limits["shared memory"] = lim.smem_per_sm // smem
    limiter = min(limits, key=lambda k: limits[k])
    blocks = limits[limiter]
    return Occupancy(blocks, blocks * warps / lim.max_warps, limiter)


_ENTRY = re.compile(r"Compiling entry function '(\S+)' for '(\S+)'")
_PROPS = re.compile(r"Function properties for (\S+)")
_STACK = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")
_CMEM = re.compile(r"(\d+) bytes cmem\[0\]")


def parse_ptxas(text: str) -> dict[str, Resources]:
    """Parse `ptxas -v` output into resources per mangled entry name."""
    out: dict[str, Resources] = {}
    current: str | None = None
    fields: dict[str, int] = {}
    for line in text.splitlines():
        m = _ENTRY.search(line)
        if m:
            current, fields = m.group(1), {}
            continue
        m = _PROPS.search(line)
        if m and current is None:
            current = m.group(1)
        m = _STACK.search(line)
        if m and current:
            fields.update(stack=int(m[1]), st=int(m[2]), ld=int(m[3]))
        m = _USED.search(line)
        if m and current:
            smem, cmem = _SMEM.search(line), _CMEM.search(line)
            out[current] = Resources(
                registers=int(m[1]),
                smem_bytes=int(smem[1]) if smem else 0,
                stack_bytes=fields.get("stack", 0),
                spill_store_bytes=fields.get("st", 0),
                spill_load_bytes=fields.get("ld", 0),
                cmem_bytes=int(cmem[1]) if cmem else 0,
            )
            current = None
    return out


def demangle_base(name: str) -> str:
    """The unqualified source name of an Itanium-mangled function (`_Z6kernelPfi` → kernel)."""
    if not name.startswith("_Z"):
        return name
    i, last = 2, name
    nested = name[i : i + 1] == "N"
    i += nested
    while i < len(name):
        while i < len(name) and name[i] in "KVrL":
            i += 1
        m = re.match(r"\d+", name[i:])
        if not m:
            break
        n = int(m.group(0))
        i += len(m.group(0))
        last = name[i : i + n]
        i += n
        if not nested or name[i : i + 1] in ("E", "I"):
            break
    return last


_MEMO: dict[str, dict[str, Resources]] = {}


def ptxas_resources(
    code: str, arch: str, nvcc: str = "nvcc", cache_dir: str | None = None, timeout_s: float = 60
) -> dict[str, list[Resources]]:
    """Resources per kernel source name (one entry per instantiation) for `arch`.

    Raises FileNotFoundError when nvcc is missing and PtxasError when compilation fails.
    """
    if shutil.which(nvcc) is None:
        raise FileNotFoundError(f"{nvcc} not found on PATH")
    key = hashlib.sha256(f"{arch}\0{tool_version(nvcc)}\0{code}".encode()).hexdigest()
    raw = _MEMO.get(key) or _disk_get(cache_dir, key)
    if raw is None:
        raw = _compile(code, arch, nvcc, timeout_s)
        _disk_put(cache_dir, key, raw)
    _MEMO[key] = raw
    out: dict[str, list[Resources]] = {}
    for mangled, res in raw.items():
        out.setdefault(demangle_base(mangled), []).append(res)
    return out


def _compile(code: str, arch: str, nvcc: str, timeout_s: float) -> dict[str, Resources]:
    gpu = arch.replace("sm_", "compute_")
    with tempfile.TemporaryDirectory(prefix="cudaperf-ptxas-") as tmp:
        src = Path(tmp) / "k.cu"
        src.write_text(code)
        cmd = [
            nvcc,
            "--cubin",
            f"-gencode=arch={gpu},code={arch}",
            "-Xptxas",
            "-v",
            "-std=c++17",
            "-o",
            str(Path(tmp) / "k.cubin"),
            str(src),
        ]
        log.debug("running %s", " ".join(cmd))
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, cwd=tmp)
    if p.returncode != 0:
        errors = [ln for ln in p.stderr.splitlines() if "error" in ln][:3] or [p.stderr[-300:]]
        raise PtxasError("; ".join(e.replace(str(src), "k.cu") for e in errors))
    return parse_ptxas(p.stderr + p.stdout)


def _disk_get(cache_dir: str | None, key: str) -> dict[str, Resources] | None:
    if cache_dir is None:
        return None
    path = Path(cache_dir) / "ptxas" / f"{key}.json"
    try:
        return {k: Resources(**v) for k, v in json.loads(path.read_text()).items()}
    except (OSError, ValueError, TypeError):
        return None


def _disk_put(cache_dir: str | None, key: str, raw: dict[str, Resources]) -> None:
    if cache_dir is None:
        return
    path = Path(cache_dir) / "ptxas" / f"{key}.json"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({k: asdict(v) for k, v in raw.items()}))
    except OSError as e:
        log.warning("could not write ptxas cache %s: %s", path, e)
