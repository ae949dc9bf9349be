"""Matrix-vector products with a row-major rows x cols matrix A: y = alpha * A x (+ bias)
or the transposed product y = alpha * A^T x (+ bias), with alpha and the sizes drawn. Both
layouts are read from the same row-major storage, so the coalesced mapping differs."""

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
from cudaperf.tasks.model import TaskKind

_REF = """
/* $what */
void $entry($params) {
    for (int o = 0; o < $nout; ++o) {
        double acc = 0.0;
        for (int k = 0; k < $nin; ++k) acc += (double)A[$aidx] * (double)x[k];
        $t v = ($t)($alpha * acc)$bias;
        y[o] = $act;
    }
}
"""

_HEAD = """
#define T $t
__device__ __forceinline__ T epilogue(T acc, int o$bparam) {
    T v = $alpha * acc$bias;
    return $act;
}
"""

# Non-transposed: y[r] = dot(A[r, :], x); the reduction runs along a contiguous row.
_N_THREAD = """
// One thread per row walks its row: lanes are a whole row apart (uncoalesced, weak).
__global__ void gemv_rows(int rows, int cols, const T* A, const T* x, T* y$bparam) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const T* a = A + (long long)r * cols;
    T acc = 0;
    for (int k = 0; k < cols; ++k) acc += a[k] * x[k];
    y[r] = epilogue(acc, r$barg);
}

$proto {
    if (rows > 0) gemv_rows<<<(rows + $block - 1) / $block, $block>>>(rows, cols, A, x, y$barg);
}
"""

_N_WARP = """
// One warp per row: lanes read consecutive elements of the row (coalesced) and of x (cached),
// then a butterfly of shuffles sums the 32 partial dot products.
__global__ void __launch_bounds__($wpb * 32)
gemv_warp(int rows, int cols, const T* __restrict__ A, const T* __restrict__ x, T* y$bparam) {
    int r = blockIdx.x * $wpb + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (r >= rows) return;  // uniform per warp
    const T* a = A + (long long)r * cols;
    T acc = 0;
    for (int k = lane; k < cols; k += 32) acc += a[k] * __ldg(&x[k]);
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (lane == 0) y[r] = epilogue(acc, r$barg);
}

$proto {
    if (rows > 0) gemv_warp<<<(rows + $wpb - 1) / $wpb, $wpb * 32>>>(rows, cols, A, x, y$barg);
}
"""

_N_BLOCK = """
// One block per row: block-strided coalesced loads, warp shuffles, per-warp sums combined in
// shared memory (for long rows; with short rows most threads idle).
__global__ void __launch_bounds__($block)
gemv_block(int cols, const T* __restrict__ A, const T* __restrict__ x, T* y$bparam) {
    __shared__ T part[$block / 32];
    const T* a = A + (long long)blockIdx.x * cols;
    T acc = 0;
    for (int k = threadIdx.x; k < cols; k += $block) acc += a[k] * x[k];
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x < 32) {
        acc = threadIdx.x < $block / 32 ? part[threadIdx.x] : (T)0;
        for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
        if (threadIdx.x == 0) y[blockIdx.x] = epilogue(acc, blockIdx.x$barg);
    }
}

$proto {
    if (rows > 0) gemv_block<<<rows, $block>>>(cols, A, x, y$barg);
}
"""

# Transposed: y[c] = sum_r A[r, c] * x[r]; consecutive outputs are consecutive addresses.
_T_THREAD = """
// One thread per output column walks down the column: at every step a warp reads 32
// consecutive elements of one row (coalesced), but each thread does a whole column serially.
__global__ void gemv_t_cols(int rows, int cols, const T* __restrict__ A, const T* __restrict__ x,
                            T* y$bparam) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    T acc = 0;
    for (int r = 0; r < rows; ++r) acc += A[(long long)r * cols + c] * x[r];
    y[c] = epilogue(acc, c$barg);
}

$proto {
    if (cols > 0) gemv_t_cols<<<(cols + $block - 1) / $block, $block>>>(rows, cols, A, x, y$barg);
}
"""

_T_WARP = """
// One warp per output column: lanes take different rows of the same column, so the 32 loads
// of a warp are a row apart (uncoalesced, deliberately weak), then shuffles sum them.
__global__ void gemv_t_warp(int rows, int cols, const T* A, const T* x, T* y$bparam) {
    int c = blockIdx.x * $wpb + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (c >= cols) return;
    T acc = 0;
    for (int r = lane; r < rows; r += 32) acc += A[(long long)r * cols + c] * x[r];
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (lane == 0) y[c] = epilogue(acc, c$barg);
}

$proto {
    if (cols > 0) gemv_t_warp<<<(cols + $wpb - 1) / $wpb, $wpb * 32>>>(rows, cols, A, x, y$barg);
}
"""

_T_TILED = """
// Blocks of 32 x $ty threads own 32 columns; the $ty thread rows split the rows of A (each
// warp reads 32 consecutive elements: coalesced, and $ty times more loads in flight per
// column), and the partial sums are added through shared memory (padded: no bank conflicts).
#define TY $ty
__global__ void __launch_bounds__(32 * TY)
gemv_t_tiled(int rows, int cols, const T* __restrict__ A, const T* __restrict__ x, T* y$bparam) {
    __shared__ T part[TY][33];
    int c = blockIdx.x * 32 + threadIdx.x;
    T acc = 0;
    if (c < cols)
        for (int r = threadIdx.y; r < rows; r += TY) acc += A[(long long)r * cols + c] * x[r];
    part[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && c < cols) {
        T s = 0;
#pragma unroll
        for (int k = 0; k < TY; ++k) s += part[k][threadIdx.x];
        y[c] = epilogue(s, c$barg);
    }
}

$proto {
    if (cols > 0) gemv_t_tiled<<<(cols + 31) / 32, dim3(32, TY)>>>(rows, cols, A, x, y$barg);
}
"""


@family("gemv", TaskKind.C2CUDA, "gemv")
def gemv(rng: random.Random, index: int):
    t = rng.choice(["float", "float", "double"])
    trans = rng.random() < 0.5
    has_bias = rng.random() < 0.6
    relu = False  # a ReLU would zero most outputs of these positive sums (or need mixed signs)
    alpha = rng.choice([1.0, 0.5, 2.0, 0.125, 1.5, -1.0])
    nout, nin = ("cols", "rows") if trans else ("rows", "cols")
    items = [
        ("rows", "int", "scalar"),
        ("cols", "int", "scalar"),
        ("A", t, "in", "rows*cols"),
        ("x", t, "in", nin),
        ("y", t, "out", nout),
    ]
    if has_bias:
        items.append(("bias", t, "in", nout))
    sig = c_signature(*items)
    params = ", ".join(p.c_decl() for p in sig)
    op = "A^T x" if trans else "A x"
    act_what = "ReLU of " if relu else ""
    bias_what = " + bias" if has_bias else ""
    what = f"y = {act_what}({lit(alpha, 'double')} * {op}{bias_what}), A row-major rows x cols."
    entry = rng.choice(["gemv_t" if trans else "gemv_n", "matvec", "mat_vec_product", "gemv"])
    act = f"(v > ({t})0 ? v : ({t})0)" if relu else "v"
    ref = fill(
        _REF,
        what=what,
        entry=entry,
        params=params,
        nout=nout,
        nin=nin,
        aidx="(long long)k * cols + o" if trans else "(long long)o * cols + k",
        t=t,
        alpha=lit(alpha, "double"),
        bias=" + bias[o]" if has_bias else "",
        act=act,
    )
    common = dict(
        t=t,
        alpha=lit(alpha, t),
        bias=" + bias[o]" if has_bias else "",
        bparam=", const T* __restrict__ bias" if has_bias else "",
        barg=", bias" if has_bias else "",
        act=act,
        proto=prototype(entry, sig),
    )
    head = fill(_HEAD, **common)
    if trans:
        variants = [
            ("thread_per_column", _T_THREAD, ["naive", "coalesced"], {"block": 128}),
            ("warp_per_column", _T_WARP, ["warp_shuffle", "uncoalesced"], {"wpb": 4}),
            ("tiled_columns", _T_TILED, ["smem_reduction", "coalesced"], {"ty": 8}),
        ]
    else:
        variants = [
            ("thread_per_row", _N_THREAD, ["naive", "uncoalesced"], {"block": 128}),
            ("warp_per_row", _N_WARP, ["warp_shuffle", "coalesced"], {"wpb": 8}),
            ("block_per_row", _N_BLOCK, ["warp_shuffle", "smem_reduction", "coalesced"], {}),
        ]
    impls = []
    for vid, tmpl, tags, extra in variants:
        extra = {
            k: rng.choice({"block": [64, 128, 256], "wpb": [4, 8], "ty": [4, 8, 16]}[k])
            for k in extra
        }
        extra.setdefault("block", rng.choice([128, 256]))
        impls.append(impl(vid, head + fill(tmpl, **extra, **common), tags))
    esize = 8 if t == "double" else 4
    lr, lc = rng.choice([(8192, 8192), (32768, 2048), (2048, 32768), (16384, 4096)])
    if esize == 8:
        lc //= 2
    sizes = {
        "small": {"rows": rng.randrange(20, 120), "cols": rng.randrange(20, 150)},
        "medium": {"rows": rng.choice([2048, 4096]), "cols": rng.choice([1024, 2048, 3000])},
        "large": {"rows": lr, "cols": lc},
        "heldout": {"rows": rng.randrange(1001, 5000), "cols": rng.randrange(999, 5000)},
    }
    k_max = max(s[nin] for s in sizes.values())
    tol = tolerance_for(t, 4 * k_max)
    desc = (
        f"Matrix-vector product on {t} data: {what} Memory-bound: A is read once; "
        + (
            "the reduction runs down the columns, so threads should own columns."
            if trans
            else "each output is a dot product along a contiguous row."
        )
        + (" Negative pre-activations become 0." if relu else "")
    )
    return c_task("gemv", index, entry, ref, sig, four_configs(sizes), tol, impls, desc)
