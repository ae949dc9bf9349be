"""The generated PyTorch→CUDA implementations compute the reference's values, checked on the
CPU: each CUDA source is compiled by g++ against a small emulation of the CUDA execution
model (each CUDA thread a ucontext fiber, blocks one after another, `__syncthreads` and warp
shuffles as barriers, `__shared__` as block-wide statics, a shuffle that reads a lane which
has exited aborts) and ModelNew runs on CPU tensors with poisoned (NaN) output buffers.

Slow (minutes): runs only with CUDAPERF_EMULATE=1. Not covered: timing, races the emulator's
schedule does not provoke, and any behaviour specific to the GPU's memory model.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import re
import shutil
import subprocess
import types
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from cudaperf.datagen import FAMILIES, generate_one  # noqa: E402
from cudaperf.execute.native import _SCALARS, parse_prototypes  # noqa: E402
from cudaperf.execute.torch_runtime import compare_outputs  # noqa: E402
from cudaperf.tasks.pymodule import exec_with_sizes  # noqa: E402

pytestmark = [
    pytest.mark.skipif(os.environ.get("CUDAPERF_EMULATE") != "1", reason="CUDAPERF_EMULATE=1"),
    pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not installed"),
]

PRELUDE = r"""
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <ucontext.h>
#include <vector>
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __ldg(p) (*(p))
struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(8) float2 { float x, y; };
inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
inline float rsqrtf(float v) { return 1.0f / sqrtf(v); }
inline float __expf(float v) { return expf(v); }
inline float __logf(float v) { return logf(v); }
inline float __fdividef(float a, float b) { return a / b; }
template <class A, class B> inline auto min(A a, B b) { return a < b ? a : b; }
template <class A, class B> inline auto max(A a, B b) { return a > b ? a : b; }
inline float atomicAdd(float* p, float v) { float o = *p; *p = o + v; return o; }
static dim3 threadIdx, blockIdx, blockDim, gridDim;
// Fibers: every CUDA thread of a block is a ucontext; barriers switch back to the scheduler.
enum { READY, AT_BLOCK, AT_WARP, DONE };
static ucontext_t emu_main;
static std::vector<ucontext_t> emu_ctx;
static std::vector<int> emu_state;
static std::vector<char> emu_stacks;
static const size_t EMU_STACK = 1 << 16;
static int emu_cur, emu_nt;
static void (*emu_body)(void*);
static void* emu_arg;
static unsigned long long emu_buf[32][32];
static void emu_fail(const char* m) { std::fprintf(stderr, "emulator: %s\n", m); std::abort(); }
static void emu_wait(int kind) {
    emu_state[emu_cur] = kind;
    swapcontext(&emu_ctx[emu_cur], &emu_main);
}
static inline void __syncthreads() { emu_wait(AT_BLOCK); }
static inline void __syncwarp(unsigned = 0xffffffffu) { emu_wait(AT_WARP); }
template <class T> static T emu_exchange(T v, int src) {
    int w = emu_cur >> 5, lane = emu_cur & 31;
    std::memcpy(&emu_buf[w][lane], &v, sizeof(T));
    emu_wait(AT_WARP);
    int s = w * 32 + src;
    if (s >= emu_nt || emu_state[s] == DONE) emu_fail("shuffle reads an exited lane");
    T out;
    std::memcpy(&out, &emu_buf[w][src], sizeof(T));
    emu_wait(AT_WARP);
    return out;
}
template <class T> T __shfl_xor_sync(unsigned, T v, int o) {
    return emu_exchange(v, (emu_cur & 31) ^ o);
}
template <class T> T __shfl_down_sync(unsigned, T v, int d) {
    int l = emu_cur & 31;
    return emu_exchange(v, l + d < 32 ? l + d : l);
}
template <class T> T __shfl_up_sync(unsigned, T v, int d) {
    int l = emu_cur & 31;
    return emu_exchange(v, l >= d ? l - d : l);
}
template <class T> T __shfl_sync(unsigned, T v, int s) { return emu_exchange(v, s & 31); }
static void emu_set(int t) {
    emu_cur = t;
    threadIdx = dim3(t % blockDim.x, (t / blockDim.x) % blockDim.y, t / (blockDim.x * blockDim.y));
}
static void emu_entry(int t) {
    emu_body(emu_arg);
    emu_state[t] = DONE;
}
static void emu_run_block(bool fibers) {
    int nt = emu_nt;
    if (!fibers) {
        for (int t = 0; t < nt; ++t) { emu_set(t); emu_body(emu_arg); }
        return;
    }
    emu_ctx.assign(nt, ucontext_t());
    emu_state.assign(nt, READY);
    if (emu_stacks.size() < nt * EMU_STACK) emu_stacks.resize(nt * EMU_STACK);
    for (int t = 0; t < nt; ++t) {
        getcontext(&emu_ctx[t]);
        emu_ctx[t].uc_stack.ss_sp = emu_stacks.data() + t * EMU_STACK;
        emu_ctx[t].uc_stack.ss_size = EMU_STACK;
        emu_ctx[t].uc_link = &emu_main;
        makecontext(&emu_ctx[t], (void (*)())emu_entry, 1, t);
    }
    for (;;) {
        bool ran = false;
        for (int t = 0; t < nt; ++t) {
            if (emu_state[t] != READY) continue;
            emu_set(t);
            swapcontext(&emu_main, &emu_ctx[t]);
            ran = true;
        }
        if (ran) continue;
        bool left = false, released = false;
        for (int w = 0; w * 32 < nt; ++w) {  // a warp whose live lanes all wait: release it
            int lo = w * 32, hi = lo + 32 < nt ? lo + 32 : nt, live = 0, waiting = 0;
            for (int t = lo; t < hi; ++t) {
                live += emu_state[t] != DONE;
                waiting += emu_state[t] == AT_WARP;
            }
            if (live && waiting == live) {
                for (int t = lo; t < hi; ++t) if (emu_state[t] == AT_WARP) emu_state[t] = READY;
                released = true;
            }
        }
        if (released) continue;
        int live = 0, at_block = 0;
        for (int t = 0; t < nt; ++t) {
            live += emu_state[t] != DONE;
            at_block += emu_state[t] == AT_BLOCK;
        }
        if (!live) return;
        if (at_block != live) emu_fail("deadlock: threads wait at different barriers");
        for (int t = 0; t < nt; ++t) if (emu_state[t] == AT_BLOCK) emu_state[t] = READY;
        (void)left;
    }
}
template <class F> static void emu_call(void* f) { (*(F*)f)(); }
template <class F> void emu_launch(dim3 g, dim3 b, F&& body, bool fibers) {
    gridDim = g;
    blockDim = b;
    emu_nt = b.x * b.y * b.z;
    if (emu_nt <= 0 || emu_nt > 1024 || g.y > 65535 || g.z > 65535) emu_fail("bad launch");
    emu_body = emu_call<std::remove_reference_t<F>>;
    emu_arg = (void*)&body;
    for (unsigned bz = 0; bz < g.z; ++bz)
        for (unsigned by = 0; by < g.y; ++by)
            for (unsigned bx = 0; bx < g.x; ++bx) {
                blockIdx = dim3(bx, by, bz);
                emu_run_block(fibers);
            }
}
"""


def _split_top(text: str, sep: str = ",") -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in text:
        depth += ch in "([{"
        depth -= ch in ")]}"
        if ch == sep and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    return [*out, cur]


def _rewrite_launches(src: str, threaded: bool) -> str:
    """`k<<<g, b>>>(args);` -> `emu_launch(dim3(g), dim3(b), [&] { k(args); }, threaded);`"""
    out, pos = "", 0
    for m in re.finditer(r"([A-Za-z_]\w*(?:<[^<>;]*>)?)\s*<<<", src):
        if m.start() < pos:
            continue
        end = src.index(">>>", m.end())
        cfg = _split_top(src[m.end() : end])
        i = src.index("(", end)
        depth, j = 0, i
        while True:
            depth += src[j] == "("
            depth -= src[j] == ")"
            if depth == 0:
                break
            j += 1
        args = src[i + 1 : j]
        flag = "true" if threaded else "false"
        out += src[pos : m.start()]
        out += (
            f"emu_launch(dim3({cfg[0]}), dim3({cfg[1]}), [&] {{ {m.group(1)}({args}); }}, {flag})"
        )
        pos = j + 1
    return out + src[pos:]


_BUILD = Path(os.environ.get("TMPDIR", "/tmp")) / "cudaperf-emu"


class _Lib:
    def __init__(self, src: str) -> None:
        threaded = any(k in src for k in ("__syncthreads", "__shfl", "__syncwarp"))
        code = PRELUDE + _rewrite_launches(src, threaded)
        key = hashlib.sha256(code.encode()).hexdigest()[:20]
        so = _BUILD / f"{key}.so"
        if not so.is_file():
            _BUILD.mkdir(parents=True, exist_ok=True)
            cpp = _BUILD / f"{key}.cpp"
            cpp.write_text(code)
            p = subprocess.run(
                ["g++", "-std=c++17", "-O1", "-shared", "-fPIC", "-w", "-o", so, cpp],
                capture_output=True,
                text=True,
            )
            assert p.returncode == 0, p.stderr[-3000:]
        self._cdll = ctypes.CDLL(str(so))
        self._protos = parse_prototypes(src)

    def __getattr__(self, name: str):
        proto = self._protos[name]
        fn = getattr(self._cdll, name)
        fn.restype = None

        def call(*args):
            conv = []
            for p, a in zip(proto.params, args, strict=True):
                if p.pointer:
                    assert a.is_contiguous(), f"{name}: {p.name} not contiguous"
                    conv.append(ctypes.c_void_p(a.data_ptr()))
                else:
                    conv.append(_SCALARS[p.ctype](a))
            fn(*conv)

        return call


class _PoisonTorch(types.ModuleType):
    """`torch` for the candidate, except that fresh float buffers start as NaN."""

    def __init__(self) -> None:
        super().__init__("torch")

    def __getattr__(self, name: str):
        real = getattr(torch, name)
        if name in ("empty", "empty_like"):

            def poisoned(*a, **k):
                t = real(*a, **k)
                return t.fill_(float("nan")) if t.is_floating_point() else t.fill_(-7)

            return poisoned
        return real


def _candidate(code: str):
    code = code.replace("from cudaperf.execute.native import load_cuda", "")
    ns = {"__name__": "cudaperf_emu_cand", "load_cuda": _Lib}
    exec(compile(code, "<candidate>", "exec"), ns)
    ns["torch"] = _PoisonTorch()
    return ns["ModelNew"]


def check_task(task, config) -> list[str]:
    """Problems of `task`'s implementations on `config` (empty when all match)."""
    ref_mod = exec_with_sizes(task.source, config.sizes, "cudaperf_emu_ref")
    init = ref_mod.get_init_inputs()
    torch.manual_seed(11)
    ref = ref_mod.Model(*init).eval()
    problems = []
    for im in task.implementations:
        torch.manual_seed(11)
        new = _candidate(im.code)(*init).eval()
        torch.manual_seed(config.seed + 100)
        inputs = ref_mod.get_inputs()
        before = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
        with torch.no_grad():
            want = ref(*before)
            got = new(*inputs)
        for a, b in zip(inputs, before, strict=True):
            if isinstance(a, torch.Tensor) and not torch.equal(a, b):
                problems.append(f"{im.id}: mutated an input")
        tol = task.tolerance
        ok, mabs, _, msg = compare_outputs(want, got, tol.atol, tol.rtol, 1e-2)
        if not ok:
            problems.append(f"{im.id} on {config.name} {dict(config.sizes)}: {msg}")
    return problems


TORCH_FAMS = sorted(
    n for n in FAMILIES if n.startswith("torch_") and FAMILIES[n].kind.value == "torch2cuda"
)


@pytest.mark.parametrize("name", TORCH_FAMS)
def test_implementations_match_reference_on_small_config(name):
    for index in range(int(os.environ.get("CUDAPERF_EMULATE_TASKS", "3"))):
        t = generate_one(FAMILIES[name], 0, index)
        small = next(c for c in t.configs if c.name == "small")
        problems = check_task(t, small) + check_task(t, aligned(small))
        assert not problems, "\n".join(problems)


def aligned(config):
    """`config` with every size rounded up to a multiple of 8 (exercises vectorised paths)."""
    sizes = {
        k: (v + 7) // 8 * 8 if isinstance(v, int) and v > 1 else v for k, v in config.sizes.items()
    }
    return config.model_copy(update={"sizes": sizes, "name": config.name + "_aligned"})
