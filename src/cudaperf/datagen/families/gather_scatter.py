"""Indexed data movement with index arrays drawn in range: gathering rows of a table
(out[i, :] = scale * src[idx[i], :]) and scatter-adding rows into a zeroed table
(out[idx[i], :] += scale * vals[i, :], duplicates accumulate)."""

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

_GATHER_REF = """
/* out[i, k] = $scale * src[idx[i], k] for i < n, k < $d (rows of width $d; 0 <= idx[i] < m). */
void $entry(int n, int m, const int* idx, const $t* src, $t* out) {
    (void)m;
    for (int i = 0; i < n; ++i)
        for (int k = 0; k < $d; ++k)
            out[(long long)i * $d + k] = $scale * src[(long long)idx[i] * $d + k];
}
"""

_GATHER_FLAT = """
// One thread per output element (i, k): consecutive threads write consecutive addresses and
// read consecutive elements of one source row (coalesced within a row).
__global__ void gather_flat(long long total, const int* __restrict__ idx,
                            const $t* __restrict__ src, $t* __restrict__ out) {
    long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= total) return;
    long long i = e / $d, k = e - i * $d;
    out[e] = $scale * src[(long long)idx[i] * $d + k];
}

$proto {
    long long total = (long long)n * $d;
    unsigned grid = (unsigned)((total + $block - 1) / $block);
    if (total > 0) gather_flat<<<grid, $block>>>(total, idx, src, out);
}
"""

_GATHER_ROW = """
// One thread per output row copies the whole row: the lanes of a warp are rows apart, so
// neither reads nor writes are coalesced (deliberately weak).
__global__ void gather_rows(int n, const int* idx, const $t* src, $t* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const $t* s = src + (long long)idx[i] * $d;
    $t* o = out + (long long)i * $d;
    for (int k = 0; k < $d; ++k) o[k] = $scale * s[k];
}

$proto {
    if (n > 0) gather_rows<<<(n + $block - 1) / $block, $block>>>(n, idx, src, out);
}
"""

_GATHER_WARP = """
// One warp per output row, grid-stride over rows: lane 0 reads the index once and broadcasts
// it with a shuffle, then the lanes copy the row with coalesced accesses.
__global__ void __launch_bounds__($wpb * 32)
gather_warp(int n, const int* __restrict__ idx, const $t* __restrict__ src,
            $t* __restrict__ out) {
    int lane = threadIdx.x & 31;
    for (int i = blockIdx.x * $wpb + (threadIdx.x >> 5); i < n; i += gridDim.x * $wpb) {
        int row = 0;
        if (lane == 0) row = idx[i];
        row = __shfl_sync(0xffffffffu, row, 0);
        const $t* s = src + (long long)row * $d;
        $t* o = out + (long long)i * $d;
        for (int k = lane; k < $d; k += 32) o[k] = $scale * s[k];
    }
}

$proto {
    long long want = ((long long)n + $wpb - 1) / $wpb;
    int grid = (int)(want < 65535 ? want : 65535);
    if (grid > 0) gather_warp<<<grid, $wpb * 32>>>(n, idx, src, out);
}
"""

_SCATTER_REF = """
/* out (m rows of width $d) = 0; then out[idx[i], k] += $scale * vals[i, k] for i < n, k < $d. */
void $entry(int n, int m, const int* idx, const $t* vals, $t* out) {
    for (long long e = 0; e < (long long)m * $d; ++e) out[e] = 0;
    for (int i = 0; i < n; ++i)
        for (int k = 0; k < $d; ++k)
            out[(long long)idx[i] * $d + k] += $scale * vals[(long long)i * $d + k];
}
"""

_SCATTER_FLAT = """
// Zero the table, then one thread per input element (i, k) adds it with an atomicAdd:
// consecutive threads hit consecutive addresses of one destination row.
__global__ void scatter_flat(long long total, const int* __restrict__ idx,
                             const $t* __restrict__ vals, $t* out) {
    long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= total) return;
    long long i = e / $d, k = e - i * $d;
    atomicAdd(&out[(long long)idx[i] * $d + k], $scale * vals[e]);
}

$proto {
    cudaMemsetAsync(out, 0, (size_t)m * $d * sizeof($t));
    long long total = (long long)n * $d;
    unsigned grid = (unsigned)((total + $block - 1) / $block);
    if (total > 0) scatter_flat<<<grid, $block>>>(total, idx, vals, out);
}
"""

_SCATTER_ROW = """
// Zero the table, then one thread per input row adds its $d values with atomics: lanes are
// rows apart, so nothing is coalesced (deliberately weak).
__global__ void scatter_rows(int n, const int* idx, const $t* vals, $t* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    $t* o = out + (long long)idx[i] * $d;
    const $t* v = vals + (long long)i * $d;
    for (int k = 0; k < $d; ++k) atomicAdd(&o[k], $scale * v[k]);
}

$proto {
    cudaMemsetAsync(out, 0, (size_t)m * $d * sizeof($t));
    if (n > 0) scatter_rows<<<(n + $block - 1) / $block, $block>>>(n, idx, vals, out);
}
"""

_SCATTER_WARP = """
// Zero the table, then one warp per input row (grid-stride): the index is read once and
// broadcast by a shuffle, the lanes add the row with coalesced atomics.
__global__ void __launch_bounds__($wpb * 32)
scatter_warp(int n, const int* __restrict__ idx, const $t* __restrict__ vals, $t* out) {
    int lane = threadIdx.x & 31;
    for (int i = blockIdx.x * $wpb + (threadIdx.x >> 5); i < n; i += gridDim.x * $wpb) {
        int row = 0;
        if (lane == 0) row = idx[i];
        row = __shfl_sync(0xffffffffu, row, 0);
        $t* o = out + (long long)row * $d;
        const $t* v = vals + (long long)i * $d;
        for (int k = lane; k < $d; k += 32) atomicAdd(&o[k], $scale * v[k]);
    }
}

$proto {
    cudaMemsetAsync(out, 0, (size_t)m * $d * sizeof($t));
    long long want = ((long long)n + $wpb - 1) / $wpb;
    int grid = (int)(want < 65535 ? want : 65535);
    if (grid > 0) scatter_warp<<<grid, $wpb * 32>>>(n, idx, vals, out);
}
"""


def _sizes(rng: random.Random, d: int, esize: int, scatter: bool) -> dict[str, dict[str, int]]:
    """n rows moved, m table rows; the large config moves about 256 MB of rows."""
    big = max(4096, (1 << 28) // (d * esize))
    out = {
        "small": {"n": rng.randrange(50, 400), "m": rng.randrange(20, 300)},
        "medium": {"n": max(2048, (1 << 22) // d), "m": rng.choice([1000, 5000, 65536])},
        "large": {"n": big, "m": rng.choice([4096, 100_000, big // 2])},
        "heldout": {"n": max(1001, (3 << 20) // d + 7), "m": rng.randrange(999, 50_000)},
    }
    if scatter:  # keep every table row hit a few times on average in the small config
        out["small"]["m"] = max(5, out["small"]["n"] // rng.choice([2, 4, 8]))
    return out


def _task(rng: random.Random, index: int, scatter: bool):
    fam = "scatter_add" if scatter else "gather_rows"
    t = rng.choice(["float", "float", "double"])
    d = rng.choice([1, 4, 8, 16, 33, 64, 100, 128, 256])
    scale = rng.choice([1.0, 0.5, 2.0, -1.5, 0.25, 3.0])
    entry = rng.choice(
        ["scatter_add_rows", "index_add", "scatter_rows_add", "segment_add"]
        if scatter
        else ["gather_rows", "embedding_lookup", "take_rows", "index_select_rows"]
    )
    data = "vals" if scatter else "src"
    sig = c_signature(
        ("n", "int", "scalar"),
        ("m", "int", "scalar"),
        ("idx", "int", "in", "n"),
        (data, t, "in", f"{'n' if scatter else 'm'}*{d}"),
        ("out", t, "out", f"{'m' if scatter else 'n'}*{d}"),
    )
    common = dict(t=t, d=d, scale=lit(scale, t), proto=prototype(entry, sig))
    ref = fill(_SCATTER_REF if scatter else _GATHER_REF, entry=entry, **common)
    flat, row, warp = (
        (_SCATTER_FLAT, _SCATTER_ROW, _SCATTER_WARP)
        if scatter
        else (_GATHER_FLAT, _GATHER_ROW, _GATHER_WARP)
    )
    extra = ["atomics"] if scatter else []
    impls = [
        impl(
            "flat_elementwise",
            fill(flat, block=rng.choice([128, 256, 512]), **common),
            ["coalesced", *extra],
        ),
        impl(
            "thread_per_row",
            fill(row, block=rng.choice([64, 128, 256]), **common),
            ["naive", "uncoalesced", *extra],
        ),
        impl(
            "warp_per_row",
            fill(warp, wpb=rng.choice([4, 8]), **common),
            ["warp_per_row", "grid_stride", "coalesced", *extra],
        ),
    ]
    esize = 8 if t == "double" else 4
    sizes = _sizes(rng, d, esize, scatter)
    # idx is drawn per config in [0, m)
    pdists = {
        k: {"idx": Distribution(kind="randint", low=0, high=v["m"])} for k, v in sizes.items()
    }
    if scatter:
        hits = max(v["n"] / v["m"] for v in sizes.values())
        base = tolerance_for(t, int(4 * hits) + 1)
        tol = Tolerance(atol=base.atol * 4, rtol=base.rtol)
        what = (
            f"Scatter-add of n rows of width {d} ({t}) into a table of m rows: out is zeroed, "
            f"then out[idx[i], :] += {scale} * vals[i, :]. Indices repeat, so additions to one "
            "row must not be lost; the order of floating-point additions may differ (tolerance "
            "grows with the number of hits per row)."
        )
    else:
        tol = Tolerance(atol=0.0, rtol=0.0)
        what = (
            f"Gather of n rows of width {d} ({t}) from a table of m rows: out[i, :] = {scale} * "
            "src[idx[i], :]. Indices are random in [0, m), so rows are read in random order."
        )
    return c_task(
        fam,
        index,
        entry,
        ref,
        sig,
        four_configs(sizes, param_dists=pdists),
        tol,
        impls,
        what,
    )


@family("gather_rows", TaskKind.C2CUDA, "gather_scatter")
def gather_rows(rng: random.Random, index: int):
    return _task(rng, index, scatter=False)


@family("scatter_add", TaskKind.C2CUDA, "gather_scatter")
def scatter_add(rng: random.Random, index: int):
    return _task(rng, index, scatter=True)
