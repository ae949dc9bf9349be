"""All-pairs N-body interactions with Plummer softening on bodies given as structure-of-arrays
(x, y, z, m): the gravitational acceleration of every body, or its potential, both scaled by
G / n so outputs stay O(1) for every n. Every body interacts with every body (itself
included, where the softened term is 0 for the acceleration and m / eps for the potential)."""

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
)
from cudaperf.tasks.model import Distribution, TaskKind, Tolerance

_REF = """
#include <math.h>

/* $what, softening eps = $eps, G = $g; outputs are scaled by G / n. */
void $entry($params) {
    for (int i = 0; i < n; ++i) {
        $rdecl
        for (int j = 0; j < n; ++j) {
            double dx = (double)x[j] - x[i], dy = (double)y[j] - y[i], dz = (double)z[j] - z[i];
            double r2 = dx * dx + dy * dy + dz * dz + $eps2;
            double inv = 1.0 / sqrt(r2);
$rterm
        }
        double scale = $g / (double)n;
$rstore
    }
}
"""

# kind -> (C reference accumulation, reference store, device accumulation, device store)
_KINDS = {
    "accel": (
        "            double w = (double)m[j] * inv * inv * inv;\n"
        "            s0 += dx * w; s1 += dy * w; s2 += dz * w;",
        "        ax[i] = ($t)(s0 * scale); ay[i] = ($t)(s1 * scale); az[i] = ($t)(s2 * scale);",
        "T w = mj * inv * inv * inv; s0 += dx * w; s1 += dy * w; s2 += dz * w;",
        "ax[i] = s0 * scale; ay[i] = s1 * scale; az[i] = s2 * scale;",
    ),
    "potential": (
        "            s0 -= (double)m[j] * inv;",
        "        phi[i] = ($t)(s0 * scale);",
        "s0 -= mj * inv;",
        "phi[i] = s0 * scale;",
    ),
}

_HEAD = """
#define T $t
#define EPS2 $eps2d
#define INV_SQRT(v) $invsqrt
"""

_NAIVE = """
// One thread per body i, looping over all bodies j straight from global memory (every warp
// reads the same j at once: broadcast loads through L1, no reuse across warps; weak).
__global__ void nbody_naive($kparams) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    T xi = x[i], yi = y[i], zi = z[i];
    $decl
    for (int j = 0; j < n; ++j) {
        T dx = x[j] - xi, dy = y[j] - yi, dz = z[j] - zi, mj = m[j];
        T inv = INV_SQRT(dx * dx + dy * dy + dz * dz + EPS2);
        $term
    }
    T scale = $g / (T)n;
    $store
}

$proto {
    if (n > 0) nbody_naive<<<(n + $block - 1) / $block, $block>>>($kargs);
}
"""

_TILED = """
// Bodies are staged through shared memory in tiles of $tile (one coalesced load per thread
// per tile, zero mass past n), and every thread sweeps each tile from shared memory$unroll_note.
#define TILE $tile
__global__ void __launch_bounds__(TILE) nbody_tiled($kparams) {
    __shared__ T sx[TILE], sy[TILE], sz[TILE], sm[TILE];
    int i = blockIdx.x * TILE + threadIdx.x;
    bool live = i < n;
    T xi = live ? x[i] : (T)0, yi = live ? y[i] : (T)0, zi = live ? z[i] : (T)0;
    $decl
    for (int base = 0; base < n; base += TILE) {
        int j = base + threadIdx.x;
        bool ok = j < n;
        sx[threadIdx.x] = ok ? x[j] : (T)0;
        sy[threadIdx.x] = ok ? y[j] : (T)0;
        sz[threadIdx.x] = ok ? z[j] : (T)0;
        sm[threadIdx.x] = ok ? m[j] : (T)0;
        __syncthreads();
$pragma
        for (int k = 0; k < TILE; ++k) {
            T dx = sx[k] - xi, dy = sy[k] - yi, dz = sz[k] - zi, mj = sm[k];
            T inv = INV_SQRT(dx * dx + dy * dy + dz * dz + EPS2);
            $term
        }
        __syncthreads();
    }
    if (!live) return;
    T scale = $g / (T)n;
    $store
}

$proto {
    if (n > 0) nbody_tiled<<<(n + TILE - 1) / TILE, TILE>>>($kargs);
}
"""


@family("nbody", TaskKind.C2CUDA, "nbody")
def nbody(rng: random.Random, index: int):
    t = rng.choice(["float", "float", "double"])
    kind = rng.choice(["accel", "accel", "potential"])
    eps = rng.choice([0.01, 0.02, 0.05, 0.1])
    g = rng.choice([1.0, 0.5, 6.674e-1, 2.0])
    rterm, rstore, dterm, dstore = _KINDS[kind]
    outs = ["ax", "ay", "az"] if kind == "accel" else ["phi"]
    items = [("n", "int", "scalar")]
    items += [(a, t, "in", "n") for a in ("x", "y", "z", "m")]
    items += [(o, t, "out", "n") for o in outs]
    sig = c_signature(*items)
    params = ", ".join(p.c_decl() for p in sig)
    kparams = params
    for a in ("x", "y", "z", "m"):
        kparams = kparams.replace(f"const {t}* {a},", f"const {t}* __restrict__ {a},")
    kargs = ", ".join(p.name for p in sig)
    what = (
        "Softened gravitational acceleration (ax, ay, az) of every body"
        if kind == "accel"
        else "Softened gravitational potential phi of every body"
    )
    entry = rng.choice(
        ["nbody_accel", "gravity_accel", "all_pairs_forces", "compute_accelerations"]
        if kind == "accel"
        else ["nbody_potential", "gravity_potential", "all_pairs_potential"]
    )
    src = fill(
        _REF,
        what=what,
        eps=eps,
        g=lit(g, "double"),
        entry=entry,
        params=params,
        eps2=repr(round(eps * eps, 6)),
        rterm=rterm,
        rstore=fill(rstore, t=t),
        rdecl="double s0 = 0.0, s1 = 0.0, s2 = 0.0;" if kind == "accel" else "double s0 = 0.0;",
    )
    fast = "rsqrtf(v)" if t == "float" else "rsqrt(v)"
    slow = "(1.0f / sqrtf(v))" if t == "float" else "(1.0 / sqrt(v))"
    common = dict(
        t=t,
        g=lit(g, t),
        kparams=kparams,
        kargs=kargs,
        proto=prototype(entry, sig),
        term=dterm,
        store=dstore,
        decl="T s0 = 0, s1 = 0, s2 = 0;" if kind == "accel" else "T s0 = 0;",
        eps2d=f"(({t}){round(eps * eps, 6)!r})",
    )
    tile = rng.choice([64, 128, 256])
    impls = [
        impl(
            "naive",
            fill(_HEAD, invsqrt=slow, **common)
            + fill(_NAIVE, block=rng.choice([128, 256]), **common),
            ["naive", "broadcast_loads"],
        ),
        impl(
            "smem_tiled",
            fill(_HEAD, invsqrt=slow, **common)
            + fill(_TILED, tile=tile, pragma="", unroll_note="", **common),
            ["smem_tiling", "coalesced"],
        ),
        impl(
            "smem_tiled_unrolled_rsqrt",
            fill(_HEAD, invsqrt=fast, **common)
            + fill(
                _TILED,
                tile=tile,
                pragma=f"#pragma unroll {rng.choice([4, 8, 16])}",
                unroll_note=", unrolled, with the reciprocal square root intrinsic",
                **common,
            ),
            ["smem_tiling", "coalesced", "unrolled", "fast_math"],
        ),
    ]
    big = 16384 if t == "float" else 8192
    sizes = {
        "small": {"n": rng.randrange(200, 800)},
        "medium": {"n": 4096 + rng.randrange(0, 100)},
        "large": {"n": big + rng.choice([0, 17, 100])},
        "heldout": {"n": rng.randrange(5001, 9001)},
    }
    pos = Distribution(kind="uniform", low=-1.0, high=1.0)
    pd = {k: {"x": pos, "y": pos, "z": pos} for k in sizes}
    if t == "float":
        tol = Tolerance(atol=2e-5, rtol=2e-4)
    else:
        tol = Tolerance(atol=1e-11, rtol=1e-10)
    desc = (
        f"{what} for n bodies (positions uniform in [-1, 1)^3, masses in [0.5, 1.5)), all "
        f"pairs, softening eps = {eps}, scaled by G / n with G = {g}. Compute-bound: n^2 "
        "interactions, each a reciprocal square root and a few multiply-adds."
    )
    return c_task(
        "nbody", index, entry, src, sig, four_configs(sizes, param_dists=pd), tol, impls, desc
    )
