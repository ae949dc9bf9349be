"""The generated PyTorch→CUDA implementations compute the reference's values, checked on the
CPU: each CUDA source is compiled by g++ against a small emulation of the CUDA execution
model (one OS thread per CUDA thread, blocks one after another, `__syncthreads` and warp
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
#include <barrier>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <type_traits>
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
static thread_local dim3 threadIdx, blockIdx;
static dim3 blockDim, gridDim;
static std::barrier<>* emu_block;
static std::barrier<>* emu_warp[32];
static unsigned long long emu_buf[32][32];
static bool emu_gone[32][32];
static inline int emu_tid() {
    return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}
static inline void __syncthreads() { emu_block->arrive_and_wait(); }
static inline void __syncwarp(unsigned = 0xffffffffu) { emu_warp[emu_tid() >> 5]->arrive_and_wait(); }
template <class T> static T emu_exchange(T v, int src) {
    int t = emu_tid(), w = t >> 5, lane = t & 31;
    std::memcpy(&emu_buf[w][lane], &v, sizeof(T));
    emu_warp[w]->arrive_and_wait();
    if (emu_gone[w][src]) { std::fprintf(stderr, "shuffle reads an exited lane\n"); std::abort(); }
    T out;
    std::memcpy(&out, &emu_buf[w][src], sizeof(T));
    emu_warp[w]->arrive_and_wait();
    return out;
}
template <class T> T __shfl_xor_sync(unsigned, T v, int o) { return emu_exchange(v, (emu_tid() & 31) ^ o); }
template <class T> T __shfl_down_sync(unsigned, T v, int d) {
    int l = emu_tid() & 31; return emu_exchange(v, l + d < 32 ? l + d : l);
}
template <class T> T __shfl_up_sync(unsigned, T v, int d) {
    int l = emu_tid() & 31; return emu_exchange(v, l >= d ? l - d : l);
}
template <class T> T __shfl_sync(unsigned, T v, int s) { return emu_exchange(v, s & 31); }
inline float atomicAdd(float* p, float v) { return std::atomic_ref<float>(*p).fetch_add(v); }
template <class F> void emu_launch(dim3 g, dim3 b, F&& body, bool threaded) {
    gridDim = g; blockDim = b;
    int nt = b.x * b.y * b.z;
    if (nt <= 0 || nt > 1024 || g.y > 65535 || g.z > 65535) { std::fprintf(stderr, "bad launch\n"); std::abort(); }
    for (unsigned bz = 0; bz < g.z; ++bz)
    for (unsigned by = 0; by < g.y; ++by)
    for (unsigned bx = 0; bx < g.x; ++bx) {
        auto run = [&](int t) {
            blockIdx = dim3(bx, by, bz);
            threadIdx = dim3(t % b.x, (t / b.x) % b.y, t / (b.x * b.y));
            body();
        };
        if (!threaded) { for (int t = 0; t < nt; ++t) run(t); continue; }
        std::barrier<> block(nt);
        std::vector<std::unique_ptr<std::barrier<>>> warps;
        emu_block = &block;
        for (int w = 0; w * 32 < nt; ++w) {
            warps.emplace_back(new std::barrier<>(nt - w * 32 < 32 ? nt - w * 32 : 32));
            emu_warp[w] = warps.back().get();
            for (int l = 0; l < 32; ++l) emu_gone[w][l] = false;
        }
        std::vector<std::thread> ts;
        for (int t = 0; t < nt; ++t) ts.emplace_back([&, t] {
            run(t);
            int tt = emu_tid();
            emu_gone[tt >> 5][tt & 31] = true;
            emu_warp[tt >> 5]->arrive_and_drop();
            emu_block->arrive_and_drop();
        });
        for (auto& th : ts) th.join();
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
                ["g++", "-std=c++20", "-O1", "-shared", "-fPIC", "-pthread", "-w", "-o", so, cpp],
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
