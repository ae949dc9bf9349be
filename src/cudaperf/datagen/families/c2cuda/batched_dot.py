"""Batched pairwise reductions of two batch x len row-major arrays: out[b] = the dot product,
the squared Euclidean distance, the L1 distance or the cosine similarity of row b of x and
row b of y. Shapes range from many short rows to a few long ones."""

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
from cudaperf.tasks.model import Distribution, TaskKind

# op -> (per-element term over a, b; final from s (and sx, sy for cosine); what)
_OPS = {
    "dot": ("a * b", "s", "the dot product of x[b] and y[b]"),
    "sqdist": ("(a - b) * (a - b)", "s", "the squared Euclidean distance of x[b] and y[b]"),
    "l1": ("$fabs(a - b)", "s", "the L1 distance (sum of |x - y|) of x[b] and y[b]"),
    "cosine": (
        "a * b",
        "s / $sqrt(sx * sy)",
        "the cosine similarity dot / sqrt(|x|^2 |y|^2) of x[b] and y[b]",
    ),
}

_REF = """
#include <math.h>

/* out[b] = $scale_d * $what, for rows of length len. */
void $entry(int batch, int len, const $t* x, const $t* y, $t* out) {
    for (int b = 0; b < batch; ++b) {
        double s = 0, sx = 0, sy = 0;
        for (int k = 0; k < len; ++k) {
            double a = x[(long long)b * len + k], c = y[(long long)b * len + k];
            s += $dterm;
            sx += a * a;
            sy += c * c;
        }
        (void)sx;
        (void)sy;
        out[b] = ($t)($scale_d * ($dfinal));
    }
}
"""

_HEAD = """
#include <math.h>
#define T $t
struct Acc { T s, sx, sy; };
__device__ __forceinline__ void add(Acc& p, T a, T b) {
    p.s += $term;
    if ($cos) { p.sx += a * a; p.sy += b * b; }
}
__device__ __forceinline__ T finish(Acc p) {
    T s = p.s;$decl
    return $scale_t * ($final);
}
__device__ __forceinline__ Acc warp_sum(Acc p) {
    for (int o = 16; o > 0; o >>= 1) {
        p.s += __shfl_xor_sync(0xffffffffu, p.s, o);
        p.sx += __shfl_xor_sync(0xffffffffu, p.sx, o);
        p.sy += __shfl_xor_sync(0xffffffffu, p.sy, o);
    }
    return p;
}
"""

_THREAD = """
// One thread per pair of rows walks both rows: lanes are a row apart (uncoalesced).
__global__ void bdot_thread(int batch, int len, const T* x, const T* y, T* out) {
    int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= batch) return;
    Acc p = {0, 0, 0};
    for (int k = 0; k < len; ++k) add(p, x[(long long)b * len + k], y[(long long)b * len + k]);
    out[b] = finish(p);
}

$proto {
    if (batch > 0) bdot_thread<<<(batch + $block - 1) / $block, $block>>>(batch, len, x, y, out);
}
"""

_WARP = """
// One warp per pair: lanes read consecutive elements (coalesced), shuffles sum the lanes.
__global__ void __launch_bounds__($wpb * 32) bdot_warp(int batch, int len, const T* __restrict__ x,
                                                      const T* __restrict__ y, T* out) {
    int b = blockIdx.x * $wpb + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (b >= batch) return;  // uniform per warp
    const T* xr = x + (long long)b * len;
    const T* yr = y + (long long)b * len;
    Acc p = {0, 0, 0};
    for (int k = lane; k < len; k += 32) add(p, xr[k], yr[k]);
    p = warp_sum(p);
    if (lane == 0) out[b] = finish(p);
}

$proto {
    if (batch > 0) bdot_warp<<<(batch + $wpb - 1) / $wpb, $wpb * 32>>>(batch, len, x, y, out);
}
"""

_BLOCK = """
// One block per pair: block-strided coalesced loads with $u independent steps in flight,
// warp shuffles, then the per-warp sums combined through shared memory.
__global__ void __launch_bounds__($block) bdot_block(int len, const T* __restrict__ x,
                                                   const T* __restrict__ y, T* out) {
    __shared__ Acc part[$block / 32];
    const T* xr = x + (long long)blockIdx.x * len;
    const T* yr = y + (long long)blockIdx.x * len;
    Acc p = {0, 0, 0};
    int k = threadIdx.x;
    for (; k + ($u - 1) * $block < len; k += $u * $block) {
        T a[$u], c[$u];
#pragma unroll
        for (int q = 0; q < $u; ++q) { a[q] = xr[k + q * $block]; c[q] = yr[k + q * $block]; }
#pragma unroll
        for (int q = 0; q < $u; ++q) add(p, a[q], c[q]);
    }
    for (; k < len; k += $block) add(p, xr[k], yr[k]);
    p = warp_sum(p);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = p;
    __syncthreads();
    if (threadIdx.x < 32) {
        Acc q = {0, 0, 0};
        if (threadIdx.x < $block / 32) q = part[threadIdx.x];
        q = warp_sum(q);
        if (threadIdx.x == 0) out[blockIdx.x] = finish(q);
    }
}

$proto {
    if (batch > 0) bdot_block<<<batch, $block>>>(len, x, y, out);
}
"""


@family("batched_dot", TaskKind.C2CUDA, "reduction")
def batched_dot(rng: random.Random, index: int):
    t = rng.choice(["float", "float", "double"])
    op = rng.choice(list(_OPS))
    term, final, what = _OPS[op]
    sfx = "f" if t == "float" else ""
    scale = rng.choice([1.0, 1.0, 0.5, 2.0, 0.25, -1.0, round(rng.uniform(0.1, 4.0), 3)])
    fns = dict(fabs=f"fabs{sfx}", sqrt=f"sqrt{sfx}")
    entry = rng.choice([f"batched_{op}", f"pairwise_{op}", f"rows_{op}", f"{op}_batch"])
    sig = c_signature(
        ("batch", "int", "scalar"),
        ("len", "int", "scalar"),
        ("x", t, "in", "batch*len"),
        ("y", t, "in", "batch*len"),
        ("out", t, "out", "batch"),
    )
    ref = fill(
        _REF,
        what=what,
        entry=entry,
        t=t,
        dterm=fill(term.replace(" b", " c").replace("(b", "(c"), fabs="fabs"),
        dfinal=fill(final, sqrt="sqrt"),
        scale_d=lit(scale, "double"),
    )
    head = fill(
        _HEAD,
        t=t,
        term=fill(term, **fns),
        final=fill(final, **fns),
        cos=int(op == "cosine"),
        scale_t=lit(scale, t),
        decl="\n    T sx = p.sx, sy = p.sy;" if op == "cosine" else "",
    )
    proto = prototype(entry, sig)
    impls = [
        impl(
            "thread_per_pair",
            head + fill(_THREAD, block=rng.choice([64, 128, 256]), proto=proto),
            ["naive", "uncoalesced"],
        ),
        impl(
            "warp_per_pair",
            head + fill(_WARP, wpb=rng.choice([2, 4, 8]), proto=proto),
            ["warp_shuffle", "coalesced"],
        ),
        impl(
            "block_per_pair",
            head
            + fill(_BLOCK, block=rng.choice([128, 256, 512]), u=rng.choice([2, 4]), proto=proto),
            ["warp_shuffle", "smem_reduction", "unrolled", "coalesced"],
        ),
    ]
    esize = 8 if t == "double" else 4
    lb, ll = rng.choice([(1 << 20, 32), (1 << 17, 256), (1 << 14, 2048), (256, 1 << 17)])
    lb = int(lb * (2.6e8 / (2 * lb * ll * esize)) + 0.5) or 1
    sizes = {
        "small": {"batch": rng.randrange(5, 60), "len": rng.randrange(10, 500)},
        "medium": {"batch": rng.choice([1024, 4096]), "len": rng.choice([64, 256, 1000])},
        "large": {"batch": lb, "len": ll},
        "heldout": {"batch": rng.randrange(1001, 5000), "len": rng.randrange(100, 3000)},
    }
    dist = Distribution(kind="uniform", low=0.1, high=1.1)
    k_max = max(s["len"] for s in sizes.values())
    tol = tolerance_for(t, 4 * k_max)
    if op in ("sqdist", "l1"):  # differences of close values: bound the error by the magnitudes
        tol = tol.model_copy(update={"atol": tol.atol * 4 * k_max**0.5})
    desc = (
        f"For each of batch pairs of {t} rows of length len (row-major x and y): out[b] = "
        f"{scale} * {what}. "
        "Memory-bound; a shape-aware mapping (threads, warps or blocks per pair) matters."
    )
    return c_task(
        "batched_dot", index, entry, ref, sig, four_configs(sizes, dist), tol, impls, desc
    )
