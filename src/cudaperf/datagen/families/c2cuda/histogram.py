"""Histograms of integer data: bin b counts the values v with lo + b*width <= v <
lo + (b+1)*width, for b < nbins; values outside [lo, lo + nbins*width) are ignored. The bin
count, width and offset vary, and so does how much of the data falls outside."""

from __future__ import annotations

import random

from cudaperf.datagen.base import c_signature, c_task, family, fill, four_configs, impl, prototype
from cudaperf.tasks.model import Distribution, TaskKind, Tolerance

_REF = """
/* Histogram of the n values of x into $nbins bins of width $width starting at $lo; values
   outside [$lo, $hi) are ignored. */
void $entry(int n, const int* x, unsigned int* hist) {
    for (int b = 0; b < $nbins; ++b) hist[b] = 0;
    for (int i = 0; i < n; ++i) {
        int v = x[i];
        if (v >= $lo && v < $hi) hist[(v - ($lo)) / $width]++;
    }
}
"""

_HEAD = """
#define NBINS $nbins
#define LO ($lo)
#define HI ($hi)
#define WIDTH $width
// The bin of v, or -1 when v is outside [LO, HI).
__device__ __forceinline__ int bin_of(int v) { return (v >= LO && v < HI) ? (v - LO) / WIDTH : -1; }
"""

_GLOBAL = """
// One thread per value, one atomicAdd on the global histogram each: with few bins, thousands
// of threads contend for the same addresses (deliberately weak).
__global__ void hist_global(int n, const int* __restrict__ x, unsigned int* hist) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int b = bin_of(x[i]);
    if (b >= 0) atomicAdd(&hist[b], 1u);
}

$proto {
    cudaMemsetAsync(hist, 0, NBINS * sizeof(unsigned int));
    unsigned grid = (unsigned)(((long long)n + $block - 1) / $block);
    if (n > 0) hist_global<<<grid, $block>>>(n, x, hist);
}
"""

_SHARED = """
// Privatised: each block counts into its own histogram in shared memory (fast shared atomics)
// over a grid-stride loop, then adds its non-zero bins to the global histogram.
__global__ void __launch_bounds__($block) hist_shared(int n, const int* __restrict__ x,
                                                      unsigned int* hist) {
    __shared__ unsigned int h[NBINS];
    for (int b = threadIdx.x; b < NBINS; b += $block) h[b] = 0;
    __syncthreads();
    for (long long i = (long long)blockIdx.x * $block + threadIdx.x; i < n;
         i += (long long)gridDim.x * $block) {
        int b = bin_of(x[i]);
        if (b >= 0) atomicAdd(&h[b], 1u);
    }
    __syncthreads();
    for (int b = threadIdx.x; b < NBINS; b += $block)
        if (h[b]) atomicAdd(&hist[b], h[b]);
}

$proto {
    cudaMemsetAsync(hist, 0, NBINS * sizeof(unsigned int));
    long long want = ((long long)n + $block - 1) / $block;
    int grid = (int)(want < $maxgrid ? want : $maxgrid);
    if (grid > 0) hist_shared<<<grid, $block>>>(n, x, hist);
}
"""

_WARPS = """
// Per-warp sub-histograms: each of the $wpb warps of a block counts into its own copy in
// shared memory (contention only within a warp), reading $vec values per thread per step;
// the copies are summed per bin and added to the global histogram.
#define WPB $wpb
__global__ void __launch_bounds__(WPB * 32) hist_warps(int n, const int* __restrict__ x,
                                                       unsigned int* hist) {
    __shared__ unsigned int h[WPB][NBINS];
    for (int k = threadIdx.x; k < WPB * NBINS; k += WPB * 32) (&h[0][0])[k] = 0;
    __syncthreads();
    unsigned int* mine = h[threadIdx.x >> 5];
    long long stride = (long long)gridDim.x * WPB * 32;
    long long i = (long long)blockIdx.x * WPB * 32 + threadIdx.x;
    for (; i + $vecm1 * stride < n; i += $vec * stride) {
        int v[$vec];
#pragma unroll
        for (int k = 0; k < $vec; ++k) v[k] = x[i + k * stride];
#pragma unroll
        for (int k = 0; k < $vec; ++k) {
            int b = bin_of(v[k]);
            if (b >= 0) atomicAdd(&mine[b], 1u);
        }
    }
    for (; i < n; i += stride) {
        int b = bin_of(x[i]);
        if (b >= 0) atomicAdd(&mine[b], 1u);
    }
    __syncthreads();
    for (int b = threadIdx.x; b < NBINS; b += WPB * 32) {
        unsigned int s = 0;
#pragma unroll
        for (int w = 0; w < WPB; ++w) s += h[w][b];
        if (s) atomicAdd(&hist[b], s);
    }
}

$proto {
    cudaMemsetAsync(hist, 0, NBINS * sizeof(unsigned int));
    long long want = ((long long)n + WPB * 32 * $vec - 1) / (WPB * 32 * $vec);
    int grid = (int)(want < $maxgrid ? want : $maxgrid);
    if (grid > 0) hist_warps<<<grid, WPB * 32>>>(n, x, hist);
}
"""


@family("histogram", TaskKind.C2CUDA, "histogram")
def histogram(rng: random.Random, index: int):
    nbins = rng.choice([8, 16, 32, 64, 100, 256, 500, 1024, 2048])
    width = rng.choice([1, 1, 2, 3, 4, 7, 16])
    lo = rng.choice([0, 0, -50, 17, 1000, -4096])
    hi = lo + nbins * width
    span = nbins * width
    outside = rng.choice([0.0, 0.05, 0.25, 0.5])  # share of the drawn range outside the bins
    pad = max(1, int(span * outside / 2))
    dist = Distribution(kind="randint", low=lo - pad if outside else lo, high=hi + pad)
    entry = rng.choice(["histogram", f"histogram{nbins}", "bin_counts", "count_bins"])
    sig = c_signature(
        ("n", "int", "scalar"), ("x", "int", "in", "n"), ("hist", "unsigned int", "out", str(nbins))
    )
    ref = fill(_REF, entry=entry, nbins=nbins, width=width, lo=lo, hi=hi)
    common = dict(
        nbins=nbins,
        width=width,
        lo=lo,
        hi=hi,
        proto=prototype(entry, sig),
        maxgrid=rng.choice([264, 528, 1056]),
    )
    head = fill(_HEAD, **common)
    wpb = max(1, min(8, 8192 // nbins))  # WPB * NBINS * 4 bytes <= 32 KB of shared memory
    vec = rng.choice([2, 4])
    impls = [
        impl(
            "global_atomics",
            head + fill(_GLOBAL, block=rng.choice([128, 256, 512]), **common),
            ["naive", "global_atomics", "coalesced"],
        ),
        impl(
            "smem_privatized",
            head + fill(_SHARED, block=rng.choice([256, 512]), **common),
            ["smem_privatization", "shared_atomics", "grid_stride", "coalesced"],
        ),
        impl(
            "per_warp_subhist",
            head + fill(_WARPS, wpb=wpb, vec=vec, vecm1=vec - 1, **common),
            ["smem_privatization", "per_warp_privatization", "unrolled", "grid_stride"],
        ),
    ]
    sizes = {
        "small": {"n": rng.randrange(3001, 20000)},
        "medium": {"n": (1 << 20) + rng.randrange(1, 999)},
        "large": {"n": (1 << 26) - rng.choice([0, 3, 1000])},
        "heldout": {"n": rng.randrange(3_000_001, 9_000_000)},
    }
    desc = (
        f"Histogram of n int values into {nbins} bins of width {width} starting at {lo} "
        f"(hist is {nbins} unsigned ints, written completely); about {int(outside * 100)}% of "
        "the input range lies outside the bins and is ignored. Counts are exact."
    )
    return c_task(
        "histogram",
        index,
        entry,
        ref,
        sig,
        four_configs(sizes, dist),
        Tolerance(atol=0.0, rtol=0.0),
        impls,
        desc,
    )
