"""Prefix scans of a 1-D array: inclusive or exclusive prefix sum, inclusive running maximum.
Three strategies: serial chunks (one thread per chunk, weak), reduce-then-scan (three passes,
block scans in shared memory) and scan-then-propagate (tile scans write their totals, which
are scanned and added back)."""

from __future__ import annotations

import random

from cudaperf.datagen.base import (
    c_signature,
    c_task,
    family,
    fill,
    four_configs,
    impl,
    prototype,
    tolerance_for,
)
from cudaperf.tasks.model import Distribution, TaskKind, Tolerance

_REF = """
/* $what: out[i] = $formula. */
void $entry(int n, const $t* x, $t* out) {
    $racc run = $rident;
    for (int i = 0; i < n; ++i) {
        $racc v = ($racc)x[i];
$rbody
    }
}
"""

_HEAD = """
#include <cfloat>
#include <climits>
#define T $t
#define MAXP (1 << 17)
__device__ T g_parts[MAXP];
__device__ __forceinline__ T op(T a, T b) { return $op; }
__device__ __forceinline__ T ident() { return $ident; }
"""

# Block-wide inclusive scan of one value per thread (blockDim.x == BLOCK, a multiple of 32);
# `total` receives the block's combined value. Ends with a barrier, so it can be called again.
_BLOCK_SCAN = """
#define BLOCK $block
__device__ __forceinline__ T block_incl_scan(T v, T* total) {
    __shared__ T warp_tot[BLOCK / 32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int o = 1; o < 32; o <<= 1) {
        T u = __shfl_up_sync(0xffffffffu, v, o);
        if (lane >= o) v = op(u, v);
    }
    if (lane == 31) warp_tot[warp] = v;
    __syncthreads();
    if (warp == 0) {
        T w = lane < BLOCK / 32 ? warp_tot[lane] : ident();
        for (int o = 1; o < 32; o <<= 1) {
            T u = __shfl_up_sync(0xffffffffu, w, o);
            if (lane >= o) w = op(u, w);
        }
        if (lane < BLOCK / 32) warp_tot[lane] = w;
    }
    __syncthreads();
    if (warp > 0) v = op(warp_tot[warp - 1], v);
    *total = warp_tot[BLOCK / 32 - 1];
    __syncthreads();
    return v;
}

// Exclusive scan of the nparts partials in g_parts, in place, by one block (running carry).
__global__ void __launch_bounds__(BLOCK) scan_parts(int nparts) {
    T carry = ident();
    for (int base = 0; base < nparts; base += BLOCK) {
        int i = base + threadIdx.x;
        T v = i < nparts ? g_parts[i] : ident();
        T tot;
        T inc = block_incl_scan(v, &tot);
        T exc = __shfl_up_sync(0xffffffffu, inc, 1);
        __shared__ T last_of_warp[BLOCK / 32];
        if ((threadIdx.x & 31) == 31) last_of_warp[threadIdx.x >> 5] = inc;
        __syncthreads();
        if ((threadIdx.x & 31) == 0)
            exc = threadIdx.x ? last_of_warp[(threadIdx.x >> 5) - 1] : ident();
        if (i < nparts) g_parts[i] = op(carry, exc);
        carry = op(carry, tot);
        __syncthreads();
    }
}
"""

_SERIAL = """
// Weak on purpose: one thread per chunk of $chunk elements walks it serially, three times
// (chunk totals, a single-thread scan of the totals, then the chunk's outputs). Lanes of a
// warp are a chunk apart, so no access is coalesced, and few threads run.
__global__ void chunk_totals(int n, int chunk, int nparts, const T* x) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= nparts) return;
    long long lo = (long long)c * chunk, hi = lo + chunk < n ? lo + chunk : n;
    T acc = ident();
    for (long long i = lo; i < hi; ++i) acc = op(acc, x[i]);
    g_parts[c] = acc;
}

__global__ void scan_totals_serial(int nparts) {
    T run = ident();
    for (int c = 0; c < nparts; ++c) { T v = g_parts[c]; g_parts[c] = run; run = op(run, v); }
}

__global__ void chunk_outputs(int n, int chunk, int nparts, const T* x, T* out) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= nparts) return;
    long long lo = (long long)c * chunk, hi = lo + chunk < n ? lo + chunk : n;
    T run = g_parts[c];
    for (long long i = lo; i < hi; ++i) {
        T v = x[i];
$gbody
    }
}

$proto {
    if (n <= 0) return;
    int chunk = $chunk;
    while (((long long)n + chunk - 1) / chunk > MAXP) chunk *= 2;
    int nparts = (int)(((long long)n + chunk - 1) / chunk);
    chunk_totals<<<(nparts + 127) / 128, 128>>>(n, chunk, nparts, x);
    scan_totals_serial<<<1, 1>>>(nparts);
    chunk_outputs<<<(nparts + 127) / 128, 128>>>(n, chunk, nparts, x, out);
}
"""

# Scan of one tile of BLOCK * IPT elements: coalesced loads into shared memory, every thread
# scans IPT consecutive elements, a block scan of the thread totals, then coalesced stores.
_TILE = """
#define IPT $ipt
#define TILE (BLOCK * IPT)
__device__ __forceinline__ T scan_tile(const T* x, T* out, int n, long long base, T offset) {
    __shared__ T s[TILE + TILE / 32];  // one pad word per 32 to spread the IPT-strided reads
    for (int k = threadIdx.x; k < TILE; k += BLOCK) {
        long long i = base + k;
        s[k + k / 32] = i < n ? x[i] : ident();
    }
    __syncthreads();
    T acc = ident();
    for (int k = threadIdx.x * IPT; k < threadIdx.x * IPT + IPT; ++k)
        acc = op(acc, s[k + k / 32]);
    T tot;
    T inc = block_incl_scan(acc, &tot);
    T run = op(offset, __shfl_up_sync(0xffffffffu, inc, 1));
    __shared__ T last_of_warp[BLOCK / 32];
    if ((threadIdx.x & 31) == 31) last_of_warp[threadIdx.x >> 5] = inc;
    __syncthreads();
    if ((threadIdx.x & 31) == 0)
        run = op(offset, threadIdx.x ? last_of_warp[(threadIdx.x >> 5) - 1] : ident());
    for (int k = threadIdx.x * IPT; k < threadIdx.x * IPT + IPT; ++k) {
        T v = s[k + k / 32];
$gbody
        s[k + k / 32] = o;
    }
    __syncthreads();
    for (int k = threadIdx.x; k < TILE; k += BLOCK) {
        long long i = base + k;
        if (i < n) out[i] = s[k + k / 32];
    }
    __syncthreads();
    return tot;
}
"""

_RTS = """
// Reduce-then-scan: (1) every block reduces its tile to one partial (coalesced, shuffles),
// (2) one block scans the partials, (3) every block rescans its tile from its offset.
__global__ void __launch_bounds__(BLOCK) tile_reduce(int n, const T* __restrict__ x) {
    long long base = (long long)blockIdx.x * TILE;
    T acc = ident();
    for (int k = threadIdx.x; k < TILE; k += BLOCK) {
        long long i = base + k;
        if (i < n) acc = op(acc, x[i]);
    }
    T tot;
    block_incl_scan(acc, &tot);
    if (threadIdx.x == 0) g_parts[blockIdx.x] = tot;
}

__global__ void __launch_bounds__(BLOCK) tile_scan(int n, const T* __restrict__ x, T* out) {
    scan_tile(x, out, n, (long long)blockIdx.x * TILE, g_parts[blockIdx.x]);
}

$proto {
    if (n <= 0) return;
    int tiles = (int)(((long long)n + TILE - 1) / TILE);
    tile_reduce<<<tiles, BLOCK>>>(n, x);
    scan_parts<<<1, BLOCK>>>(tiles);
    tile_scan<<<tiles, BLOCK>>>(n, x, out);
}
"""

_STP = """
// Scan-then-propagate: (1) every block scans its tile with no offset, writes it, and keeps its
// total, (2) one block scans the totals, (3) every element of tile b > 0 is combined with the
// scanned total of the tiles before it (a second read and write of the output).
__global__ void __launch_bounds__(BLOCK) tile_scan_local(int n, const T* __restrict__ x, T* out) {
    T tot = scan_tile(x, out, n, (long long)blockIdx.x * TILE, ident());
    if (threadIdx.x == 0) g_parts[blockIdx.x] = tot;
}

__global__ void add_offsets(int n, T* out) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    long long tile = i / TILE;
    if (tile > 0) out[i] = op(g_parts[tile], out[i]);
}

$proto {
    if (n <= 0) return;
    int tiles = (int)(((long long)n + TILE - 1) / TILE);
    tile_scan_local<<<tiles, BLOCK>>>(n, x, out);
    scan_parts<<<1, BLOCK>>>(tiles);
    add_offsets<<<(unsigned)(((long long)n + 255) / 256), 256>>>(n, out);
}
"""

# kind -> (description, formula, reference body, kernel body (v, run -> out, o))
_KINDS = {
    "inclusive_sum": (
        "Inclusive prefix sum",
        "x[0] + ... + x[i]",
        "        run += v;\n        out[i] = ($t)run;",
        "        run = op(run, v);\n        $store run;",
    ),
    "exclusive_sum": (
        "Exclusive prefix sum",
        "x[0] + ... + x[i-1] (out[0] = 0)",
        "        out[i] = ($t)run;\n        run += v;",
        "        $store run;\n        run = op(run, v);",
    ),
    "inclusive_max": (
        "Running maximum",
        "max(x[0], ..., x[i])",
        "        if (i == 0 || v > run) run = v;\n        out[i] = ($t)run;",
        "        run = op(run, v);\n        $store run;",
    ),
}


@family("scan", TaskKind.C2CUDA, "scan")
def scan(rng: random.Random, index: int):
    kind = rng.choice(list(_KINDS))
    t = rng.choice(["float", "double", "int"] if kind != "inclusive_max" else ["float", "int"])
    what, formula, rbody, gbody = _KINDS[kind]
    is_sum = kind.endswith("sum")
    racc = ("double" if t != "int" else "long long") if is_sum else t
    big = {"int": "INT_MIN", "float": "-FLT_MAX", "double": "-DBL_MAX"}[t]
    entry = rng.choice([f"{kind}_scan", f"prefix_{kind.split('_')[1]}", f"scan_{kind}"])
    sig = c_signature(("n", "int", "scalar"), ("x", t, "in", "n"), ("out", t, "out", "n"))
    ref = fill(
        _REF,
        what=what,
        formula=formula,
        entry=entry,
        t=t,
        racc=racc,
        rident="0",
        rbody=fill(rbody, t=t),
    )
    block = rng.choice([128, 256, 512])
    max_tile = 4096 if t == "double" else 8192  # static shared memory stays under 48 KB
    ipt = rng.choice([k for k in (4, 8, 16) if block * k <= max_tile])
    common = dict(
        t=t,
        op="a + b" if is_sum else "(a > b ? a : b)",
        ident="(T)0" if is_sum else big,
        block=block,
        proto=prototype(entry, sig),
    )
    head = fill(_HEAD, **common) + fill(_BLOCK_SCAN, **common)
    tile = fill(_TILE, ipt=ipt, gbody=fill(gbody, store="T o ="), **common)
    impls = [
        impl(
            "serial_chunks",
            head
            + fill(
                _SERIAL,
                chunk=rng.choice([256, 1024, 4096]),
                gbody=fill(gbody, store="out[i] ="),
                **common,
            ),
            ["naive", "serial", "uncoalesced"],
        ),
        impl(
            "reduce_then_scan",
            head + tile + fill(_RTS, **common),
            ["reduce_then_scan", "smem_scan", "warp_shuffle", "coalesced"],
        ),
        impl(
            "scan_then_propagate",
            head + tile + fill(_STP, **common),
            ["scan_then_propagate", "smem_scan", "warp_shuffle", "coalesced"],
        ),
    ]
    if t == "float" and is_sum:
        large = (1 << 23) + rng.choice([0, 777])  # prefix sums stay below 2^24 (float ulp <= 1)
    else:
        large = (1 << 25 if t == "double" else 1 << 26) - rng.choice([0, 4321])
    sizes = {
        "small": {"n": rng.randrange(1001, 9000)},
        "medium": {"n": (1 << 20) + rng.randrange(1, 999)},
        "large": {"n": large},
        "heldout": {"n": rng.randrange(2_000_001, 6_000_000)},
    }
    if t == "int":
        dist = Distribution(
            kind="randint", low=0 if is_sum else -1_000_000, high=10 if is_sum else 1_000_000
        )
        tol = Tolerance(atol=0.0, rtol=0.0)
    elif is_sum:
        dist = Distribution(kind="uniform", low=0.25, high=1.75)
        tol = tolerance_for(t, 4 * max(s["n"] for s in sizes.values()))
    else:
        dist = Distribution(kind="normal", mean=0.0, std=3.0)
        tol = Tolerance(atol=0.0, rtol=0.0)
    desc = (
        f"{what} of n {t} values: out[i] = {formula}. "
        + (
            "Floating-point sums may be reassociated (tolerance grows with n). "
            if is_sum and t != "int"
            else "Results are exact. "
        )
        + "Every output depends on all earlier inputs, so a parallel version needs a multi-pass "
        "or carry-propagating scan."
    )
    return c_task("scan", index, entry, ref, sig, four_configs(sizes, dist), tol, impls, desc)
