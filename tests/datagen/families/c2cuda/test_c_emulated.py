"""The generated C→CUDA implementations compute the C reference's values, checked on the CPU.

Each implementation (an `extern "C"` host function with the task's prototype that launches
kernels on device pointers) is compiled by g++ against the CUDA emulator of
`tests/datagen/emulator.py` and called, in a forked child, with host arrays standing in for
device memory: the task's SMALL config, inputs from `make_inputs` (outputs poisoned with
0xFF bytes), compared with the gcc-built reference by `compare` (the task's tolerance).
An implementation that uses CUDA API the emulator lacks is skipped with g++'s message.

Each runs twice: blocks and threads first to last, then last to first; on the SMALL config
and on it with sizes rounded up to multiples of 8 (CUDAPERF_EMULATE_VARIANTS=small,aligned;
other config names, such as medium, work too, slowly).
Arrays end against a guard page (reads and writes past the end fault) with a canary in the
alignment slack (writes just past the end are caught after the call).

Slow: runs only with CUDAPERF_EMULATE=1; CUDAPERF_EMULATE_TASKS tasks per family (default 2),
CUDAPERF_EMULATE_FAMILIES (comma-separated) to pick families, CUDAPERF_EMULATE_TIMEOUT
seconds per implementation (default 120; a run that takes longer is skipped, not failed).
"""

from __future__ import annotations

import ctypes
import functools
import mmap
import os
import re
import select
import shutil
import signal
import tempfile
from pathlib import Path

import numpy as np
import pytest

from cudaperf.datagen import FAMILIES, generate_one
from cudaperf.execute.build import build_reference
from cudaperf.execute.c.reference import _call_args, compare, run_reference
from cudaperf.execute.config import EvalConfig
from cudaperf.tasks.inputs import make_inputs
from tests.datagen import emulator

ENABLED = os.environ.get("CUDAPERF_EMULATE") == "1"
pytestmark = [
    pytest.mark.skipif(not ENABLED, reason=emulator.SKIP_REASON),
    pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not installed"),
    pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed"),
]

C_FAMS = sorted(n for n in FAMILIES if FAMILIES[n].kind.value != "torch2cuda")
TASKS = int(os.environ.get("CUDAPERF_EMULATE_TASKS", "2"))
TIMEOUT = float(os.environ.get("CUDAPERF_EMULATE_TIMEOUT", "120"))
SALT = 20240611
VARIANTS = os.environ.get("CUDAPERF_EMULATE_VARIANTS", "small,aligned").split(",")


@functools.cache
def _task(name: str, index: int):
    return generate_one(FAMILIES[name], 0, index)


def aligned(config):
    """`config` with every size rounded up to a multiple of 8 (exercises vectorised paths),
    except a size that a CSR row-pointer distribution pins (its nnz)."""
    pinned = {d.nnz for d in config.param_distributions.values() if d.kind == "row_ptr"}
    sizes = {
        k: (v + 7) // 8 * 8 if isinstance(v, int) and v > 1 and v not in pinned else v
        for k, v in config.sizes.items()
    }
    return config.model_copy(update={"sizes": sizes, "name": config.name + "_aligned"})


@functools.cache
def _reference(name: str, index: int, variant: str = "small"):
    """(task, config, inputs with poisoned outputs, reference outputs); `variant` is "aligned"
    (the SMALL config with sizes rounded up to multiples of 8) or a config's name."""
    task = _task(name, index)
    base = "small" if variant == "aligned" else variant
    small = next(c for c in task.configs if c.name == base)
    if variant == "aligned":
        small = aligned(small)
    cache = Path(os.environ.get("TMPDIR", "/tmp")) / "cudaperf-emu-ref"
    built = build_reference(task, EvalConfig(cache_dir=cache))
    assert built.ok, f"reference does not build: {built.log[-2000:]}"
    inputs = make_inputs(task, small, 0, SALT)
    want = run_reference(task, ctypes.CDLL(built.lib), inputs)
    return task, small, inputs, want


def _cases():
    if not ENABLED:
        return [pytest.param(n, 0, "", "small", id=n) for n in C_FAMS]
    pick = os.environ.get("CUDAPERF_EMULATE_FAMILIES")
    names = [n for n in C_FAMS if not pick or n in pick.split(",")]
    return [
        pytest.param(n, i, im.id, v, id=f"{n}-{i}-{im.id}-{v}")
        for n in names
        for i in range(TASKS)
        for im in _task(n, i).implementations
        for v in VARIANTS
    ]


def _first_error(log: str) -> str:
    for line in log.splitlines():
        if "error" in line:
            return re.sub(r"^\S*\.cpp:", "line ", line.strip())[:300]
    return log.strip()[-300:]


_LIBC = ctypes.CDLL(None, use_errno=True)
_PROT_NONE = 0
_CANARY = 0xA5


def _guarded(
    task, arrays: list[np.ndarray], record: Path, slacks: list, ranges: list
) -> list[np.ndarray]:
    """Copies of the arrays, each 16-byte aligned with its end against an inaccessible page
    (a read or write past the end faults); the pages are written to `record`. The up to 15
    bytes between an array's end and its page (alignment) hold a canary, listed in `slacks`;
    the arrays' pages (address, length) are appended to `ranges`."""
    page, out, lines = mmap.PAGESIZE, [], []
    for p, a in zip(task.signature, arrays, strict=True):
        if a.ndim == 0:
            out.append(a.copy())
            continue
        body = -(-a.nbytes // 16) * 16
        total = -(-body // page) * page + page
        mm = mmap.mmap(-1, total)
        base = ctypes.addressof(ctypes.c_char.from_buffer(mm))
        off = total - page - body
        arr = np.frombuffer(mm, dtype=a.dtype, count=a.size, offset=off)
        arr[...] = a
        slack = np.frombuffer(mm, dtype=np.uint8, count=body - a.nbytes, offset=off + a.nbytes)
        slack[...] = _CANARY
        slacks.append((p.name, slack, a.itemsize))
        assert _LIBC.mprotect(ctypes.c_void_p(base + total - page), page, _PROT_NONE) == 0
        ranges.append((base, total - page))
        lines.append(f"{p.name} {base + off} {base + off + a.nbytes} {base + total} {a.itemsize}")
        out.append(arr)
    record.write_text("\n".join(lines))
    return out


def _explain_fault(msg: str, record: Path) -> str:
    """Name the array whose end a faulting address lies past."""
    m = re.search(r"invalid memory access at address (0x[0-9a-f]+)", msg)
    if not m or not record.exists():
        return msg
    addr = int(m.group(1), 16)
    for line in record.read_text().splitlines():
        name, lo, end, hi, size = line.split()
        lo, end, hi, size = int(lo), int(end), int(hi), int(size)
        if lo <= addr < hi:
            k = (addr - end) // size
            return f"{msg}: element {k} past the end of {name} (it has {(end - lo) // size})"
    return msg


def emulate(task, so: Path, inputs: list[np.ndarray], timeout: float, reverse: bool = False):
    """Call the implementation in `so` on copies of `inputs` in a forked child.

    `reverse`: run the blocks, and the threads of each block, last to first. Returns
    (outputs, "") or (None, why: the emulator's message, a signal, or "timeout")."""
    bufs = [a.copy() for a in inputs]
    with tempfile.TemporaryDirectory(prefix="cudaperf-emu-") as tmp:
        out, err = Path(tmp) / "out.npz", Path(tmp) / "stderr"
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # child: never return into pytest
            code = 1
            try:
                os.close(r)
                fd = os.open(err, os.O_WRONLY | os.O_CREAT, 0o600)
                os.dup2(fd, 2)
                lib = ctypes.CDLL(str(so))
                lib.emu_set_reverse(int(reverse))
                lib.emu_install_segv_handler()
                slacks: list = []
                ranges: list = []
                bufs = _guarded(task, bufs, Path(tmp) / "guards", slacks, ranges)
                for addr, length in ranges:
                    lib.emu_register_device(ctypes.c_void_p(addr), ctypes.c_size_t(length))
                fn = getattr(lib, task.entry)
                fn.restype = None
                args = _call_args(task, bufs)
                lib.emu_protect_device(1)  # host code must not touch device memory
                fn(*args)
                lib.emu_protect_device(0)
                for pname, slack, size in slacks:
                    if (slack != _CANARY).any():
                        k = int(np.flatnonzero(slack != _CANARY)[0]) // size
                        os.write(2, f"emulator: wrote element {k} past the end of {pname}".encode())
                        code = 85
                        os._exit(code)
                np.savez(out, *bufs)
                code = 0
            finally:
                os._exit(code)
        os.close(w)
        ready, _, _ = select.select([r], [], [], timeout)  # EOF when the child exits
        os.close(r)
        if not ready:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return None, f"timeout: still running after {timeout:.0f} s"
        _, status = os.waitpid(pid, 0)
        msg = err.read_text(errors="replace").strip() if err.exists() else ""
        msg = _explain_fault(msg, Path(tmp) / "guards")
        if os.WIFSIGNALED(status):
            sig = signal.Signals(os.WTERMSIG(status)).name
            return None, f"killed by {sig}: {msg[-500:]}" if msg else f"killed by {sig}"
        if os.WEXITSTATUS(status) != 0:
            return None, f"exit status {os.WEXITSTATUS(status)}: {msg[-500:]}"
        with np.load(out) as z:
            return [z[f"arr_{k}"] for k in range(len(bufs))], ""


@pytest.mark.parametrize(("name", "index", "impl", "variant"), _cases())
def test_implementation_matches_reference_on_small_config(name, index, impl, variant):
    task, small, inputs, want = _reference(name, index, variant)
    im = next(x for x in task.implementations if x.id == impl)
    try:
        so = emulator.build(im.code)
    except emulator.EmulatorBuildError as e:
        pytest.skip(f"{name} task {index} {impl}: cannot emulate: {_first_error(str(e))}")
    for reverse in (False, True):  # blocks and threads first to last, then last to first
        got, why = emulate(task, so, inputs, TIMEOUT, reverse)
        if why.startswith("timeout"):
            pytest.skip(f"{name} task {index} {impl} on {variant}: too slow to emulate ({why})")
        order = "blocks and threads last to first" if reverse else "first to last"
        where = f"{name} task {index} ({task.id}) {impl} on {dict(small.sizes)}, {order}"
        assert got is not None, f"{where}: {why}"
        c = compare(task, inputs, got, want)
        assert c.correct, f"{where}: {c.message}"


SELF_CHECK = r"""
__global__ void __launch_bounds__(256) block_sum(int n, const float* __restrict__ x, float* acc) {
    extern __shared__ float part[];
    float v = 0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        v += __ldg(&x[i]);
    part[threadIdx.x] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(acc, part[0]);
}
__global__ void warp_stats(int n, const float4* __restrict__ x4, float* acc, int* positive) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float4 q = i < n / 4 ? x4[i] : make_float4(0, 0, 0, 0);
    float v = q.x + q.y + q.z + q.w;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    unsigned m = __ballot_sync(0xffffffffu, i < n / 4 && q.x > 0);
    if ((threadIdx.x & 31) == 0) { atomicAdd(acc, v); atomicAdd(positive, __popc(m)); }
}
extern "C" void self_check(int n, const float* x, float* out, int* positive) {
    float* tmp;
    cudaMalloc(&tmp, sizeof(float));
    cudaMemset(tmp, 0, sizeof(float));
    block_sum<<<3, 256, 256 * sizeof(float)>>>(n, x, tmp);
    cudaMemcpy(out, tmp, sizeof(float), cudaMemcpyDeviceToDevice);
    cudaFree(tmp);
    cudaMemsetAsync(out + 1, 0, sizeof(float), 0);
    cudaMemset(positive, 0, sizeof(int));
    warp_stats<<<(n / 4 + 127) / 128, 128>>>(n, (const float4*)x, out + 1, positive);
    cudaDeviceSynchronize();
}
"""


def test_emulator_self_check():
    """The prelude builds and a kernel mix (shared memory, barriers, shuffles, ballots,
    atomics, cudaMalloc/Memset/Memcpy) computes the right values: a broken prelude must fail
    here rather than skip every implementation above."""
    lib = ctypes.CDLL(str(emulator.build(SELF_CHECK)))
    x = np.random.default_rng(0).normal(size=1000).astype(np.float32)
    out, pos = np.full(2, np.nan, np.float32), np.full(1, -1, np.int32)
    lib.self_check(ctypes.c_int(x.size), *(ctypes.c_void_p(a.ctypes.data) for a in (x, out, pos)))
    assert abs(out[0] - x.sum()) < 1e-3 and abs(out[1] - x.sum()) < 1e-3, (out, x.sum())
    assert pos[0] == int((x[0::4] > 0).sum())
