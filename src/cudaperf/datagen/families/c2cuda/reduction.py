"""Reduction families: a whole array to one value (sum, norms, max/min, mean) and a matrix to
one value per row or per column (sums, maxima, argmax/argmin)."""

from __future__ import annotations

import random

from cudaperf.datagen.base import c_signature, c_task, family, fill, four_configs, impl, prototype
from cudaperf.tasks.model import Distribution, TaskKind, Tolerance

# op -> (per-element transform, combine, identity, final, output description)
_FULL_OPS = {
    "sum": ("v", "a + b", "0", "acc", "the sum"),
    "sumsq": ("v * v", "a + b", "0", "acc", "the sum of squares"),
    "l2norm": ("v * v", "a + b", "0", "SQRT(acc)", "the Euclidean norm"),
    "l1norm": ("ABS(v)", "a + b", "0", "acc", "the sum of absolute values"),
    "mean": ("v", "a + b", "0", "acc / (ACC)n", "the mean"),
    "max": ("v", "(a > b ? a : b)", "-BIG", "acc", "the maximum"),
    "min": ("v", "(a < b ? a : b)", "BIG", "acc", "the minimum"),
}

_FULL_REF = """
#include <math.h>
#include <stdlib.h>
#define SQRT $sqrt
#define ABS $abs
#define BIG $big
#define ACC $acc

/* $what of the n values of x, written to out[0]. */
void $entry(int n, const $t* x, $tout* out) {
    $acc acc = $ident;
    for (int i = 0; i < n; ++i) {
        $acc v = ($acc)x[i];
        $acc e = $pre;
        $acc a = acc, b = e;
        acc = $comb;
    }
    out[0] = ($tout)($final);
}
"""

_HEAD = """#include <cstdint>
#define SQRT $sqrt
#define ABS $abs
#define BIG $big
#define ACC $gacc
#define MAX_BLOCKS $maxb
__device__ ACC g_partials[MAX_BLOCKS];
__device__ __forceinline__ ACC comb(ACC a, ACC b) { return $comb; }
__device__ __forceinline__ ACC pre(ACC v) { return $pre; }
"""

_FINAL = """
// One block combines the per-block partials and applies the final step.
__global__ void finish(int nparts, int n, $tout* out) {
    __shared__ ACC buf[1024];
    ACC acc = $ident;
    for (int i = threadIdx.x; i < nparts; i += blockDim.x) acc = comb(acc, g_partials[i]);
    buf[threadIdx.x] = acc;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) buf[threadIdx.x] = comb(buf[threadIdx.x], buf[threadIdx.x + s]);
        __syncthreads();
    }
    if (threadIdx.x == 0) { ACC acc = buf[0]; out[0] = ($tout)($final); }
}
"""

_SINGLE = """
// Weak on purpose: one block of $block threads walks the whole array (only one SM busy),
// then a shared-memory tree combines the threads' partial results.
__global__ void reduce_one_block(int n, const $t* x) {
    __shared__ ACC buf[$block];
    ACC acc = $ident;
    for (int i = threadIdx.x; i < n; i += $block) acc = comb(acc, pre((ACC)x[i]));
    buf[threadIdx.x] = acc;
    __syncthreads();
    for (int s = $block / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) buf[threadIdx.x] = comb(buf[threadIdx.x], buf[threadIdx.x + s]);
        __syncthreads();
    }
    if (threadIdx.x == 0) g_partials[0] = buf[0];
}

$proto {
    reduce_one_block<<<1, $block>>>(n, x);
    finish<<<1, 32>>>(1, n, out);
}
"""

_TREE = """
// Each block loads its share (a block-strided loop) into shared memory and reduces it with an
// interleaved tree whose `tid % (2*s)` test leaves most lanes of every warp idle (divergent);
// a second kernel combines the block results.
__global__ void block_tree(int n, const $t* x) {
    __shared__ ACC buf[$block];
    int tid = threadIdx.x;
    ACC acc = $ident;
    for (int i = blockIdx.x * $block + tid; i < n; i += gridDim.x * $block)
        acc = comb(acc, pre((ACC)x[i]));
    buf[tid] = acc;
    __syncthreads();
    for (int s = 1; s < $block; s *= 2) {
        if (tid % (2 * s) == 0) buf[tid] = comb(buf[tid], buf[tid + s]);
        __syncthreads();
    }
    if (tid == 0) g_partials[blockIdx.x] = buf[0];
}

$proto {
    int grid = (n + $block - 1) / $block;
    if (grid > MAX_BLOCKS) grid = MAX_BLOCKS;
    if (grid < 1) grid = 1;
    block_tree<<<grid, $block>>>(n, x);
    finish<<<1, 1024>>>(grid, n, out);
}
"""

_SHFL = """
// Grid-stride loop with $u independent accumulators per thread (several loads in flight),
// warp-shuffle combine, one partial per block, then one block finishes. No atomics, so the
// result is deterministic.
__device__ __forceinline__ ACC warp_comb(ACC v) {
    for (int off = 16; off > 0; off >>= 1) v = comb(v, __shfl_down_sync(0xffffffffu, v, off));
    return v;
}

__global__ void __launch_bounds__($block) partials(int n, const $t* __restrict__ x) {
    __shared__ ACC warps[$block / 32];
    ACC acc[$u];
#pragma unroll
    for (int k = 0; k < $u; ++k) acc[k] = $ident;
    long long stride = (long long)gridDim.x * $block * $u;
    for (long long i = (long long)blockIdx.x * $block * $u + threadIdx.x; i < n; i += stride) {
#pragma unroll
        for (int k = 0; k < $u; ++k) {
            long long j = i + (long long)k * $block;
            if (j < n) acc[k] = comb(acc[k], pre((ACC)x[j]));
        }
    }
#pragma unroll
    for (int k = 1; k < $u; ++k) acc[0] = comb(acc[0], acc[k]);
    ACC v = warp_comb(acc[0]);
    if ((threadIdx.x & 31) == 0) warps[threadIdx.x >> 5] = v;
    __syncthreads();
    if (threadIdx.x < 32) {
        v = threadIdx.x < $block / 32 ? warps[threadIdx.x] : ($ident);
        v = warp_comb(v);
        if (threadIdx.x == 0) g_partials[blockIdx.x] = v;
    }
}

$proto {
    long long want = ((long long)n + $block * $u - 1) / ($block * $u);
    int grid = (int)(want < MAX_BLOCKS ? want : MAX_BLOCKS);
    if (grid < 1) grid = 1;
    partials<<<grid, $block>>>(n, x);
    finish<<<1, 1024>>>(grid, n, out);
}
"""


def _full_params(rng: random.Random, op: str, t: str) -> dict[str, str]:
    pre, comb, ident, final, what = _FULL_OPS[op]
    is_int = t == "int"
    acc = "long long" if is_int else "double"
    gacc = "long long" if is_int else t
    tout = "long long" if is_int and op in ("sum", "sumsq", "l1norm") else t
    if op == "mean" and is_int:
        tout = "double"
    big = {"int": "2147483647LL", "float": "3.0e38f", "double": "1.0e300"}[t]
    return {
        "pre": pre,
        "comb": comb,
        "ident": ident.replace("BIG", big) if is_int else ident,
        "final": final,
        "what": what,
        "acc": acc,
        "gacc": gacc,
        "tout": tout,
        "t": t,
        "sqrt": "sqrt" if t != "float" else "sqrtf",
        "abs": "llabs" if is_int else ("fabsf" if t == "float" else "fabs"),
        "big": big,
    }


@family("reduce_full", TaskKind.C2CUDA, "reduction")
def reduce_full(rng: random.Random, index: int):
    t = rng.choice(["float", "float", "double", "int"])
    ops = [o for o in _FULL_OPS if not (t == "int" and o in ("l2norm", "mean"))]
    op = rng.choice(ops)
    p = _full_params(rng, op, t)
    entry = rng.choice([f"reduce_{op}", f"{op}_all", f"array_{op}"])
    sig = c_signature(("n", "int", "scalar"), ("x", t, "in", "n"), ("out", p["tout"], "out", "1"))
    ref = fill(
        _FULL_REF, entry=entry, **dict(p, abs="llabs" if t == "int" else "fabs", sqrt="sqrt")
    )
    block = rng.choice([128, 256, 512])
    common = dict(p, proto=prototype(entry, sig), block=block, maxb=rng.choice([1024, 2048]))
    head = fill(_HEAD, **common) + fill(_FINAL, **common)
    impls = [
        impl("one_block", head + fill(_SINGLE, **common), ["naive", "single_block"]),
        impl(
            "block_tree_divergent",
            head + fill(_TREE, **common),
            ["smem_tree", "divergent", "coalesced"],
        ),
        impl(
            "grid_stride_shuffle",
            head + fill(_SHFL, u=rng.choice([2, 4]), **common),
            ["grid_stride", "warp_shuffle", "unrolled", "coalesced"],
        ),
    ]
    esize = 8 if t == "double" else 4
    large = (1 << 26) if esize == 4 else (1 << 25)
    sizes = {
        "small": {"n": rng.randrange(1001, 5001, 2)},
        "medium": {"n": (1 << 20) + rng.randrange(1, 999)},
        "large": {"n": large + rng.choice([0, 12345])},
        "heldout": {"n": rng.randrange(5_000_001, 20_000_000, 2)},
    }
    if t == "int":
        dist = Distribution(kind="randint", low=-1000, high=5000)
        tol = Tolerance(atol=0.0, rtol=0.0) if op != "mean" else Tolerance(atol=1e-9, rtol=1e-9)
    else:
        dist = Distribution(kind="uniform", low=-1.0, high=3.0)
        tol = Tolerance(atol=1e-3, rtol=2e-4) if t == "float" else Tolerance(atol=1e-9, rtol=1e-9)
    desc = (
        f"{p['what'].capitalize()} of n {t} values, written to out[0] ({p['tout']}). The output is "
        "poisoned before the run, so it must be written completely. "
        + (
            "The reference accumulates in double; a float tree reduction differs only by "
            "rounding (relative tolerance). "
            if t == "float"
            else ""
        )
    )
    return c_task(
        "reduce_full", index, entry, ref, sig, four_configs(sizes, dist), tol, impls, desc
    )
