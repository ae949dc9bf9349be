"""Row-wise softmax in C: out[r][j] = exp((x[r][j] - max_r) / T) / sum_j exp(...), or its
log-softmax, for a rows x cols row-major matrix, with a temperature T drawn per task. Three
passes over each row (max, sum, normalise) in the reference; fused or online on the GPU."""

from __future__ import annotations

import random

from cudaperf.datagen.base import (
    c_signature,
    c_task,
    family,
    fill,
    four_configs,
    impl,
    lit,
    prototype,
    tolerance_for,
)
from cudaperf.tasks.model import Distribution, TaskKind, Tolerance

_REF = """
#include <math.h>

/* $what */
void $entry(int rows, int cols, const $t* x, $t* out) {
    for (int r = 0; r < rows; ++r) {
        const $t* xr = x + (long long)r * cols;
        $t* orow = out + (long long)r * cols;
        double m = xr[0];
        for (int j = 1; j < cols; ++j) m = xr[j] > m ? xr[j] : m;
        double s = 0;
        for (int j = 0; j < cols; ++j) s += exp((xr[j] - m) * $invt);
        for (int j = 0; j < cols; ++j) orow[j] = ($t)($rout);
    }
}
"""

_HEAD = """
#include <math.h>
#include <float.h>
#define T $t
#define INVT $invt_t
__device__ __forceinline__ T warp_max(T v) {
    for (int o = 16; o > 0; o >>= 1) v = $fmax(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
__device__ __forceinline__ T warp_sum(T v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ T finish(T v, T m, T s) { return $gout; }
"""

_THREAD = """
// One thread per row, three serial passes: lanes are a row apart (uncoalesced, weak).
__global__ void softmax_thread(int rows, int cols, const T* x, T* out) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const T* xr = x + (long long)r * cols;
    T* orow = out + (long long)r * cols;
    T m = -$big;
    for (int j = 0; j < cols; ++j) m = $fmax(m, xr[j]);
    T s = 0;
    for (int j = 0; j < cols; ++j) s += $exp((xr[j] - m) * INVT);
    for (int j = 0; j < cols; ++j) orow[j] = finish(xr[j], m, s);
}

$proto {
    if (rows > 0) softmax_thread<<<(rows + $block - 1) / $block, $block>>>(rows, cols, x, out);
}
"""

_WARP = """
// One warp per row, online softmax: each lane keeps a running max and a sum rescaled when
// the max grows (one pass over the row), the lanes are merged with shuffles, then a second
// coalesced pass writes the outputs.
__global__ void __launch_bounds__($wpb * 32) softmax_warp(int rows, int cols,
                                                        const T* __restrict__ x, T* out) {
    int r = blockIdx.x * $wpb + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (r >= rows) return;  // uniform per warp
    const T* xr = x + (long long)r * cols;
    T m = -$big, s = 0;
    for (int j = lane; j < cols; j += 32) {
        T v = xr[j];
        if (v > m) { s = s * $exp((m - v) * INVT); m = v; }
        s += $exp((v - m) * INVT);
    }
    T gm = warp_max(m);
    s = (m == -$big) ? (T)0 : s * $exp((m - gm) * INVT);
    s = warp_sum(s);
    T* orow = out + (long long)r * cols;
    for (int j = lane; j < cols; j += 32) orow[j] = finish(xr[j], gm, s);
}

$proto {
    if (rows > 0) softmax_warp<<<(rows + $wpb - 1) / $wpb, $wpb * 32>>>(rows, cols, x, out);
}
"""

_BLOCK = """
// One block per row: block-wide max and sum through warp shuffles and shared memory (two
// reads of the row, then the write pass; the row mostly stays in L1/L2 between passes).
__device__ __forceinline__ T block_reduce(T v, bool is_max, T* red) {
    v = is_max ? warp_max(v) : warp_sum(v);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
    __syncthreads();
    T w = threadIdx.x < $block / 32 ? red[threadIdx.x] : (is_max ? -$big : (T)0);
    if (threadIdx.x < 32) w = is_max ? warp_max(w) : warp_sum(w);
    if (threadIdx.x == 0) red[0] = w;
    __syncthreads();
    T out = red[0];
    __syncthreads();
    return out;
}

__global__ void __launch_bounds__($block) softmax_block(int cols, const T* __restrict__ x,
                                                      T* out) {
    __shared__ T red[32];
    const T* xr = x + (long long)blockIdx.x * cols;
    T m = -$big;
    for (int j = threadIdx.x; j < cols; j += $block) m = $fmax(m, xr[j]);
    m = block_reduce(m, true, red);
    T s = 0;
    for (int j = threadIdx.x; j < cols; j += $block) s += $exp((xr[j] - m) * INVT);
    s = block_reduce(s, false, red);
    T* orow = out + (long long)blockIdx.x * cols;
    for (int j = threadIdx.x; j < cols; j += $block) orow[j] = finish(xr[j], m, s);
}

$proto {
    if (rows > 0) softmax_block<<<rows, $block>>>(cols, x, out);
}
"""


@family("softmax_rows", TaskKind.C2CUDA, "normalization")
def softmax_rows(rng: random.Random, index: int):
    t = rng.choice(["float", "float", "double"])
    log = rng.random() < 0.35
    temp = rng.choice([1.0, 1.0, 0.5, 2.0, 0.7, 1.5, 4.0])
    sfx = "f" if t == "float" else ""
    invt = 1.0 / temp
    rout = "(xr[j] - m) * $invt - log(s)" if log else "exp((xr[j] - m) * $invt) / s"
    gout = f"(v - m) * INVT - log{sfx}(s)" if log else f"exp{sfx}((v - m) * INVT) / s"
    what = (
        f"{'Log-softmax' if log else 'Softmax'} of every row of a rows x cols row-major {t} "
        f"matrix with temperature T = {temp} (1/T taken as {lit(invt, 'double')}): "
        + (
            "out = (x - max) / T - log(sum over the row of exp((x - max) / T))."
            if log
            else "out = exp((x - max) / T) / sum over the row of exp((x - max) / T)."
        )
    )
    entry = rng.choice(
        ["softmax_rows", "row_softmax", "log_softmax" if log else "softmax", "softmax2d"]
    )
    sig = c_signature(
        ("rows", "int", "scalar"),
        ("cols", "int", "scalar"),
        ("x", t, "in", "rows*cols"),
        ("out", t, "out", "rows*cols"),
    )
    ref = fill(
        _REF,
        what=what,
        entry=entry,
        t=t,
        invt=lit(invt, "double"),
        rout=fill(rout, invt=lit(invt, "double")),
    )
    fns = dict(fmax=f"fmax{sfx}", exp=f"exp{sfx}", big="FLT_MAX" if t == "float" else "DBL_MAX")
    head = fill(_HEAD, t=t, invt_t=lit(invt, t), gout=gout, **fns)
    proto = prototype(entry, sig)
    impls = [
        impl(
            "thread_per_row",
            head + fill(_THREAD, block=rng.choice([64, 128]), proto=proto, **fns),
            ["naive", "uncoalesced"],
        ),
        impl(
            "warp_online",
            head + fill(_WARP, wpb=rng.choice([4, 8]), proto=proto, **fns),
            ["warp_shuffle", "online_softmax", "coalesced"],
        ),
        impl(
            "block_per_row",
            head + fill(_BLOCK, block=rng.choice([128, 256, 512]), proto=proto, **fns),
            ["warp_shuffle", "smem_reduction", "coalesced"],
        ),
    ]
    esize = 8 if t == "double" else 4
    lr, lc = rng.choice([(65536, 512), (16384, 2048), (4096, 8192), (131072, 256)])
    lr = lr // (esize // 4)
    sizes = {
        "small": {"rows": rng.randrange(5, 40), "cols": rng.randrange(30, 600)},
        "medium": {"rows": rng.choice([1024, 4096]), "cols": rng.choice([256, 1000, 1024])},
        "large": {"rows": lr, "cols": lc + rng.choice([0, 1, 7])},
        "heldout": {"rows": rng.randrange(700, 3000), "cols": rng.randrange(200, 5000)},
    }
    dist = Distribution(kind="normal", mean=0.0, std=2.0)
    base = tolerance_for(t, 4 * max(s["cols"] for s in sizes.values()))
    # log-softmax subtracts log(s): the row sum's relative rounding error becomes an absolute
    # error of every output, also of outputs near 0 (a thread-per-row float sum erred by
    # 1.1e-5 there against an atol of 4.5e-6: bench/tolerance_emulated.py), so its atol is the
    # sum's relative bound; softmax divides by s, an error relative to each output
    atol = base.rtol if log else base.atol * 0.1
    tol = Tolerance(atol=atol, rtol=base.rtol + (4e-6 if t == "float" else 1e-13))
    desc = f"{what} Memory-bound; needs a per-row max and sum (a reduction) before the outputs."
    return c_task(
        "softmax_rows", index, entry, ref, sig, four_configs(sizes, dist), tol, impls, desc
    )
