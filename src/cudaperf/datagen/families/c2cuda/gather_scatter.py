"""Indexed data movement with index arrays drawn in range.

gather_rows: out[i, :] = scale * sum_j w_j * f(src[row(i, j), :]) for J >= 1 gathered rows
per output row, where row(i, j) = idx[i * J + j] or, with a two-level index, perm[idx[...]];
f is a transform drawn from an expression vocabulary (float/double) or an integer one (int).

scatter_add: out (m rows) starts at the operator's identity, then every input row i is
combined into out[idx[i], :] with add (float/double/int; optionally weighted by w[i]) or
max / min (int, atomicMax / atomicMin); the value combined is f(vals[i, :]).

Every index array is drawn in range ([0, m)), so every input is valid.
"""

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
from cudaperf.datagen.exprs import expr_tree
from cudaperf.tasks.model import Distribution, TaskKind, Tolerance

_INT_FORMS = [
    "v",
    "v * $a + $b",
    "(v < 0 ? -v : v)",
    "(v > $b ? v : $b)",
    "(v ^ $a)",
    "(v & $mask) - $b",
    "v * v - $b",
    "(v >> 1) + $a",
]


def _xform(rng: random.Random, t: str) -> str:
    """f(v) as a C expression of `v` (bounded: int forms stay small, float forms finite)."""
    if t == "int":
        form = rng.choice(_INT_FORMS)
        return fill(form, a=rng.randint(2, 3), b=rng.randint(1, 9), mask=rng.choice([7, 15, 63]))
    return expr_tree(rng, ["v"], rng.choice([0, 1, 1, 2]), t)


_XF = """
$qual $t $fname($t v) { return $expr; }
"""

# ---- gather -------------------------------------------------------------------------------

_GATHER_REF = """
/* $what */
#include <math.h>
$xf
void $entry(int n, int m, const int* idx, $permp const $t* src, $t* out) {
    (void)m;
    for (int i = 0; i < n; ++i) {
$rows
        for (int k = 0; k < $d; ++k)
            out[(long long)i * $d + k] = $combine;
    }
}
"""

_GATHER_FLAT = """
// One thread per output element (i, k): consecutive threads write consecutive addresses and
// read consecutive elements of each gathered row (coalesced within a row).
$xf
__global__ void gather_flat(long long total, const int* __restrict__ idx, $permk
                            const $t* __restrict__ src, $t* __restrict__ out) {
    long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= total) return;
    long long i = e / $d;
    int k = (int)(e - i * $d);
$rows
    out[e] = $combine;
}

$proto {
    long long total = (long long)n * $d;
    unsigned grid = (unsigned)((total + $block - 1) / $block);
    if (total > 0) gather_flat<<<grid, $block>>>(total, idx, $perma src, out);
}
"""

_GATHER_ROW = """
// One thread per output row computes the whole row: the lanes of a warp are rows apart, so
// neither reads nor writes are coalesced (deliberately weak).
$xf
__global__ void gather_thread_rows(int n, const int* idx, $permk const $t* src, $t* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
$rows
    for (int k = 0; k < $d; ++k) out[(long long)i * $d + k] = $combine;
}

$proto {
    if (n > 0) gather_thread_rows<<<(n + $block - 1) / $block, $block>>>(n, idx, $perma src, out);
}
"""

_GATHER_WARP = """
// One warp per output row, grid-stride over rows: lane 0 resolves the row indices once and
// broadcasts them with shuffles, then the lanes walk the row with coalesced accesses.
$xf
__global__ void __launch_bounds__($wpb * 32)
gather_warp(int n, const int* __restrict__ idx, $permk const $t* __restrict__ src,
            $t* __restrict__ out) {
    int lane = threadIdx.x & 31;
    long long stride = (long long)gridDim.x * $wpb;
    for (long long i = blockIdx.x * $wpb + (threadIdx.x >> 5); i < n; i += stride) {
$wrows
        for (int k = lane; k < $d; k += 32) out[i * $d + k] = $combine;
    }
}

$proto {
    long long want = ((long long)n + $wpb - 1) / $wpb;
    int grid = (int)(want < 65535 ? want : 65535);
    if (grid > 0) gather_warp<<<grid, $wpb * 32>>>(n, idx, $perma src, out);
}
"""


def _gather_parts(rng: random.Random, t: str, d: int, nrows: int, two_level: bool, fname: str):
    def look(j: int) -> str:
        inner = f"idx[i * {nrows} + {j}]" if nrows > 1 else "idx[i]"
        return f"perm[{inner}]" if two_level else inner

    rows = "\n".join(f"        long long r{j} = (long long){look(j)} * {d};" for j in range(nrows))
    wrows = "\n".join(
        f"        int q{j} = 0;\n        if (lane == 0) q{j} = {look(j)};\n"
        f"        long long r{j} = (long long)__shfl_sync(0xffffffffu, q{j}, 0) * {d};"
        for j in range(nrows)
    )
    if t == "int":
        ws = [rng.randint(1, 3) for _ in range(nrows)]
        wlit = [str(w) for w in ws]
    else:
        ws = [round(rng.uniform(0.2, 1.5), 2) for _ in range(nrows)]
        wlit = [lit(w, t) for w in ws]
    terms = [f"{fname}(src[r{j} + k])" for j in range(nrows)]
    terms = [f"{w} * {x}" for w, x in zip(wlit, terms, strict=True)]
    combine = " + ".join(terms)
    return rows, wrows, combine, ws


def _gather(rng: random.Random, index: int):
    t = rng.choice(["float", "float", "double", "int"])
    d = rng.choice([1, 4, 8, 16, 33, 64, 100, 128, 256])
    nrows = rng.choice([1, 1, 2, 3, 4])
    two_level = rng.random() < 0.3
    expr = _xform(rng, t)
    fname = rng.choice(["xf", "transform", "tr", "fv", "op"])
    entry = rng.choice(
        ["gather_rows", "embedding_lookup", "take_rows", "index_select_rows", "gather_combine"]
    )
    sig = c_signature(
        ("n", "int", "scalar"),
        ("m", "int", "scalar"),
        ("idx", "int", "in", f"n*{nrows}" if nrows > 1 else "n"),
        *([("perm", "int", "in", "m", "partial")] if two_level else []),
        ("src", t, "in", f"m*{d}", "partial"),  # only the rows idx names are read
        ("out", t, "out", f"n*{d}"),
    )
    rows, wrows, combine, ws = _gather_parts(rng, t, d, nrows, two_level, fname)
    pk = "const int* __restrict__ perm," if two_level else ""
    common = dict(
        t=t,
        d=d,
        rows=rows,
        wrows=wrows,
        combine=combine,
        permk=pk,
        perma="perm," if two_level else "",
        proto=prototype(entry, sig),
    )
    dev = fill(_XF, qual="__device__ __forceinline__", t=t, fname=fname, expr=expr).strip()
    host = fill(_XF, qual="static", t=t, fname=fname, expr=expr).strip()
    look = "perm[idx[...]]" if two_level else "idx[...]"
    what = (
        f"Gather ({t}) of rows of width {d}: out[i, :] = "
        + " + ".join(f"w{j} * f(src[r{j}, :])" for j in range(nrows))
        + f" with weights w = {ws}, r{{j}} = {look} at position i * {nrows} + j; "
        f"f(v) = {expr}. Indices are random in [0, m)."
    )
    ref = fill(
        _GATHER_REF,
        what=what,
        xf=host,
        entry=entry,
        permp="const int* perm," if two_level else "",
        **common,
    )
    impls = [
        impl(
            "flat_elementwise",
            fill(_GATHER_FLAT, xf=dev, block=rng.choice([128, 256, 512]), **common),
            ["coalesced", "grid_1d"],
        ),
        impl(
            "thread_per_row",
            fill(_GATHER_ROW, xf=dev, block=rng.choice([64, 128, 256]), **common),
            ["naive", "uncoalesced"],
        ),
        impl(
            "warp_per_row",
            fill(_GATHER_WARP, xf=dev, wpb=rng.choice([4, 8]), **common),
            ["warp_per_row", "grid_stride", "coalesced", "warp_shuffle"],
        ),
    ]
    esize = 8 if t == "double" else 4
    sizes = _sizes(rng, d, esize * nrows, scatter=False, heavy=expr != "v")
    pdists = {}
    for k, v in sizes.items():
        p = {"idx": Distribution(kind="randint", low=0, high=v["m"])}
        if two_level:
            p["perm"] = Distribution(kind="randint", low=0, high=v["m"])
        if t == "int":
            p["src"] = Distribution(kind="randint", low=-100, high=101)
        pdists[k] = p
    tol = (
        Tolerance(atol=0.0, rtol=0.0)
        if t == "int"
        else tolerance_for(t, 4 * nrows if expr != "v" else nrows)
    )
    return c_task(
        "gather_rows",
        index,
        entry,
        ref,
        sig,
        four_configs(sizes, param_dists=pdists),
        tol,
        impls,
        what,
    )


# ---- scatter ------------------------------------------------------------------------------

_SCATTER_REF = """
/* $what */
#include <math.h>
#include <limits.h>
$xf
void $entry(int n, int m, const int* idx, $wp const $t* vals, $t* out) {
    for (long long e = 0; e < (long long)m * $d; ++e) out[e] = $init;
    for (int i = 0; i < n; ++i)
        for (int k = 0; k < $d; ++k) {
            $t v = $val;
            $t* o = &out[(long long)idx[i] * $d + k];
            $hostop
        }
}
"""

_INIT = """
#include <limits.h>
$xf
__global__ void init_table(long long total, $t* out) {
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (long long)gridDim.x * blockDim.x)
        out[e] = $init;
}
"""

_INIT_CALL = """    init_table<<<1024, 256>>>((long long)m * $d, out);"""
_MEMSET_CALL = """    cudaMemsetAsync(out, 0, (size_t)m * $d * sizeof($t));"""

_SCATTER_FLAT = """
// Initialise the table, then one thread per input element (i, k) combines it atomically:
// consecutive threads hit consecutive addresses of one destination row.
$init_kernel
__global__ void scatter_flat(long long total, const int* __restrict__ idx, $wk
                             const $t* __restrict__ vals, $t* out) {
    long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= total) return;
    long long i = e / $d, k = e - i * $d;
    $t v = $val_e;
    $atomic(&out[(long long)idx[i] * $d + k], v);
}

$proto {
$init_call
    long long total = (long long)n * $d;
    unsigned grid = (unsigned)((total + $block - 1) / $block);
    if (total > 0) scatter_flat<<<grid, $block>>>(total, idx, $wa vals, out);
}
"""

_SCATTER_ROW = """
// Initialise the table, then one thread per input row combines its $d values atomically:
// lanes are rows apart, so nothing is coalesced (deliberately weak).
$init_kernel
__global__ void scatter_thread_rows(int n, const int* idx, $wk const $t* vals, $t* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    $t* o = out + (long long)idx[i] * $d;
    for (int k = 0; k < $d; ++k) {
        long long e = (long long)i * $d + k;
        $t v = $val_e;
        $atomic(&o[k], v);
    }
}

$proto {
$init_call
    if (n > 0) scatter_thread_rows<<<(n + $block - 1) / $block, $block>>>(n, idx, $wa vals, out);
}
"""

_SCATTER_WARP = """
// Initialise the table, then one warp per input row (grid-stride): the index is read once
// and broadcast by a shuffle, the lanes combine the row with coalesced atomics.
$init_kernel
__global__ void __launch_bounds__($wpb * 32)
scatter_warp(int n, const int* __restrict__ idx, $wk const $t* __restrict__ vals, $t* out) {
    int lane = threadIdx.x & 31;
    long long stride = (long long)gridDim.x * $wpb;
    for (long long i = blockIdx.x * $wpb + (threadIdx.x >> 5); i < n; i += stride) {
        int row = 0;
        if (lane == 0) row = idx[i];
        row = __shfl_sync(0xffffffffu, row, 0);
        $t* o = out + (long long)row * $d;
        for (int k = lane; k < $d; k += 32) {
            long long e = i * $d + k;
            $t v = $val_e;
            $atomic(&o[k], v);
        }
    }
}

$proto {
$init_call
    long long want = ((long long)n + $wpb - 1) / $wpb;
    int grid = (int)(want < 65535 ? want : 65535);
    if (grid > 0) scatter_warp<<<grid, $wpb * 32>>>(n, idx, $wa vals, out);
}
"""

_OPS = {  # op -> (identity, host update of *o with v, device atomic)
    "add": ("0", "*o += v;", "atomicAdd"),
    "max": ("INT_MIN", "if (v > *o) *o = v;", "atomicMax"),
    "min": ("INT_MAX", "if (v < *o) *o = v;", "atomicMin"),
}


def _scatter(rng: random.Random, index: int):
    t = rng.choice(["float", "float", "double", "int", "int"])
    op = rng.choice(["add", "max", "min"]) if t == "int" else "add"
    weighted = op == "add" and rng.random() < 0.4
    d = rng.choice([1, 4, 8, 16, 33, 64, 100, 128, 256])
    expr = _xform(rng, t)
    fname = rng.choice(["xf", "transform", "tr", "fv", "op"])
    scale = rng.choice([1, 2, 3]) if t == "int" else rng.choice([1.0, 0.5, 2.0, -1.5, 0.25, 3.0])
    sl = str(scale) if t == "int" else lit(scale, t)
    entry = rng.choice(
        {
            "add": ["scatter_add_rows", "index_add", "scatter_rows_add", "segment_add"],
            "max": ["scatter_max_rows", "index_reduce_max", "segment_max"],
            "min": ["scatter_min_rows", "index_reduce_min", "segment_min"],
        }[op]
    )
    sig = c_signature(
        ("n", "int", "scalar"),
        ("m", "int", "scalar"),
        ("idx", "int", "in", "n"),
        *([("w", t, "in", "n")] if weighted else []),
        ("vals", t, "in", f"n*{d}"),
        ("out", t, "out", f"m*{d}"),
    )
    init, hostop, atomic = _OPS[op]
    wmul = "w[i] * " if weighted else ""
    val = f"{sl} * {wmul}{fname}(vals[(long long)i * {d} + k])"
    val_e = f"{sl} * {wmul}{fname}(vals[e])"
    dev = fill(_XF, qual="__device__ __forceinline__", t=t, fname=fname, expr=expr).strip()
    host = fill(_XF, qual="static", t=t, fname=fname, expr=expr).strip()
    what = (
        f"Scatter-{op} of n rows of width {d} ({t}) into a table of m rows: out starts at "
        f"{init if op != 'add' else 0}, then out[idx[i], :] = {op}(out[idx[i], :], "
        f"{scale} * {'w[i] * ' if weighted else ''}f(vals[i, :])) with f(v) = {expr}. "
        "Indices repeat, so updates to one row must not be lost"
        + ("; the order of floating-point additions may differ." if t != "int" else ".")
    )
    common = dict(
        t=t,
        d=d,
        val_e=val_e,
        atomic=atomic,
        wk=f"const {t}* __restrict__ w," if weighted else "",
        wa="w," if weighted else "",
        proto=prototype(entry, sig),
        init_kernel=fill(_INIT, xf=dev, t=t, init=init).strip() if op != "add" else dev,
        init_call=fill(_INIT_CALL if op != "add" else _MEMSET_CALL, t=t, d=d),
    )
    ref = fill(
        _SCATTER_REF,
        what=what,
        entry=entry,
        xf=host,
        wp=f"const {t}* w," if weighted else "",
        t=t,
        d=d,
        init=init,
        val=val,
        hostop=hostop,
    )
    extra = ["atomics"]
    impls = [
        impl(
            "flat_elementwise",
            fill(_SCATTER_FLAT, block=rng.choice([128, 256, 512]), **common),
            ["coalesced", *extra],
        ),
        impl(
            "thread_per_row",
            fill(_SCATTER_ROW, block=rng.choice([64, 128, 256]), **common),
            ["naive", "uncoalesced", *extra],
        ),
        impl(
            "warp_per_row",
            fill(_SCATTER_WARP, wpb=rng.choice([4, 8]), **common),
            ["warp_per_row", "grid_stride", "coalesced", "warp_shuffle", *extra],
        ),
    ]
    esize = 8 if t == "double" else 4
    sizes = _sizes(rng, d, esize, scatter=True, heavy=expr != "v")
    pdists = {}
    for k, v in sizes.items():
        p = {"idx": Distribution(kind="randint", low=0, high=v["m"])}
        if t == "int":
            p["vals"] = Distribution(kind="randint", low=-100, high=101)
            if weighted:
                p["w"] = Distribution(kind="randint", low=1, high=4)
        pdists[k] = p
    if t == "int":
        tol = Tolerance(atol=0.0, rtol=0.0)
    else:
        hits = max(v["n"] / v["m"] for v in sizes.values())
        base = tolerance_for(t, int(4 * hits) + 1)
        tol = Tolerance(atol=base.atol * 4, rtol=base.rtol)
    return c_task(
        "scatter_add",
        index,
        entry,
        ref,
        sig,
        four_configs(sizes, param_dists=pdists),
        tol,
        impls,
        what,
    )


def _sizes(
    rng: random.Random, d: int, esize: int, scatter: bool, heavy: bool
) -> dict[str, dict[str, int]]:
    """n rows moved, m table rows; the large config moves about 256 MB of rows (128 MB of
    output when every element goes through a transform, so the C reference stays near 1 s)."""
    big = max(4096, ((1 << 27) if heavy else (1 << 28)) // (d * esize))
    out = {
        "small": {"n": rng.randrange(50, 400), "m": rng.randrange(20, 300)},
        "medium": {"n": max(2048, (1 << 22) // d), "m": rng.choice([1000, 5000, 65536])},
        "large": {"n": big, "m": rng.choice([4096, 100_000, max(4096, big // 2)])},
        "heldout": {"n": max(1001, (3 << 20) // d + 7), "m": rng.randrange(999, 50_000)},
    }
    if scatter:  # keep every table row hit a few times on average in the small config
        out["small"]["m"] = max(5, out["small"]["n"] // rng.choice([2, 4, 8]))
    return out


@family("gather_rows", TaskKind.C2CUDA, "gather_scatter")
def gather_rows(rng: random.Random, index: int):
    return _gather(rng, index)


@family("scatter_add", TaskKind.C2CUDA, "gather_scatter")
def scatter_add(rng: random.Random, index: int):
    return _scatter(rng, index)
