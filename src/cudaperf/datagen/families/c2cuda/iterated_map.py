"""Compute-bound iterated maps: every element x[i] is iterated `steps` times through a scalar
map with its own parameter p[i] (logistic map, a cubic map, or Newton's square-root step),
and out[i] is the final iterate or the mean of all iterates. Parameters are drawn in ranges
where the map is attracting (a fixed point or a 2-cycle), so rounding differences shrink
instead of growing and a few ulps of tolerance suffice."""

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

# name -> (step of v with parameter q, p range, x range, what)
_MAPS = {
    "logistic": ("q * v * ($one - v)", (2.6, 3.4), (0.05, 0.95), "v <- p v (1 - v)"),
    "cubic": ("q * v * ($one - v * v)", (1.2, 1.9), (0.05, 0.95), "v <- p v (1 - v^2)"),
    "newton_sqrt": ("$half * (v + q / v)", (0.5, 4.0), (0.5, 1.5), "v <- (v + p / v) / 2"),
    "damped": (
        "q * v * ($one - v) + $c * v",
        (2.0, 2.6),
        (0.05, 0.95),
        "v <- p v (1 - v) + c v",
    ),
}

_REF = """
#include <stdlib.h>

/* $what */
void $entry(int n, const $t* x, const $t* p, $t* out) {
    $t* v = ($t*)malloc((size_t)(n > 0 ? n : 1) * sizeof($t));
    if (!v) return;
    for (int i = 0; i < n; ++i) {
        v[i] = x[i];
        out[i] = 0;
    }
    for (int s = 0; s < $steps; ++s)
        for (int i = 0; i < n; ++i) {
            $t q = p[i], w = v[i];
            v[i] = $rstep;
            $racc
        }
    for (int i = 0; i < n; ++i) out[i] = $rfinal;
    free(v);
}
"""

_HEAD = """
#define T $t
#define STEPS $steps
__device__ __forceinline__ T step(T v, T q) { return $step; }
"""

_NAIVE = """
// One thread per element keeps its iterate in a register for all STEPS steps.
__global__ void imap_naive(int n, const T* __restrict__ x, const T* __restrict__ p, T* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    T v = x[i], q = p[i];$decl
    for (int s = 0; s < STEPS; ++s) {
        v = step(v, q);
        $acc
    }
    out[i] = $final;
}

$proto {
    if (n > 0) imap_naive<<<(n + $block - 1) / $block, $block>>>(n, x, p, out);
}
"""

_ILP = """
// Each thread iterates U elements (block-strided, coalesced) in lockstep: U independent
// dependency chains per thread hide the latency of the arithmetic pipeline.
#define U $u
__global__ void __launch_bounds__($block) imap_ilp(int n, const T* __restrict__ x,
                                                 const T* __restrict__ p, T* out) {
    long long base = (long long)blockIdx.x * $block * U + threadIdx.x;
    T v[U], q[U];$udecl
#pragma unroll
    for (int u = 0; u < U; ++u) {
        long long i = base + (long long)u * $block;
        v[u] = i < n ? x[i] : (T)1;
        q[u] = i < n ? p[i] : (T)1;
        $uinit
    }
    for (int s = 0; s < STEPS; ++s) {
#pragma unroll
        for (int u = 0; u < U; ++u) {
            v[u] = step(v[u], q[u]);
            $uacc
        }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
        long long i = base + (long long)u * $block;
        if (i < n) out[i] = $ufinal;
    }
}

$proto {
    long long blocks = ((long long)n + $block * U - 1) / ($block * U);
    if (n > 0) imap_ilp<<<(unsigned)blocks, $block>>>(n, x, p, out);
}
"""

_CHUNK = """
// A fixed grid of $grid x $block threads; each thread iterates a contiguous chunk of elements
// one after another (lanes a chunk apart: uncoalesced; one dependency chain per thread, so
// the pipelines idle). Deliberately weak.
__global__ void imap_chunked(int n, const T* x, const T* p, T* out) {
    int threads = gridDim.x * blockDim.x;
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int chunk = (n + threads - 1) / threads;
    int lo = t * chunk, hi = min(n, lo + chunk);
    for (int i = lo; i < hi; ++i) {
        T v = x[i], q = p[i];$decl
        for (int s = 0; s < STEPS; ++s) {
            v = step(v, q);
            $acc
        }
        out[i] = $final;
    }
}

$proto {
    if (n > 0) imap_chunked<<<$grid, $block>>>(n, x, p, out);
}
"""


@family("iterated_map", TaskKind.C2CUDA, "compute_bound")
def iterated_map(rng: random.Random, index: int):
    t = rng.choice(["float", "float", "double"])
    name = rng.choice(list(_MAPS))
    form, prange, xrange_, what_map = _MAPS[name]
    mean = rng.random() < 0.4
    c = round(rng.uniform(0.05, 0.3), 3)
    stepx = fill(form, one=lit(1.0, t), half=lit(0.5, t), c=lit(c, t))
    budget = 4e8 if t == "float" else 2e8
    n_large = rng.choice([1 << 18, 1 << 19, 1 << 20]) + rng.randrange(0, 999)
    steps = max(100, int(budget / n_large) // 50 * 50)
    what = (
        f"Iterate {steps} times the map {what_map}"
        + (f" (c = {c})" if name == "damped" else "")
        + " from v = x[i] with p = p[i]; out[i] = "
        + (f"the mean of the {steps} iterates." if mean else "the final iterate.")
    )
    entry = rng.choice([f"{name}_iterate", f"iterate_{name}", f"{name}_map", "iterate_map"])
    sig = c_signature(
        ("n", "int", "scalar"), ("x", t, "in", "n"), ("p", t, "in", "n"), ("out", t, "out", "n")
    )
    ref = fill(
        _REF,
        what=what,
        entry=entry,
        t=t,
        steps=steps,
        rstep=stepx.replace("v", "w"),
        racc="out[i] += v[i];" if mean else "",
        rfinal=f"out[i] / ({t}){steps}" if mean else "v[i]",
    )
    head = fill(_HEAD, t=t, steps=steps, step=stepx)
    acc = dict(
        acc="acc += v;" if mean else "",
        decl=" T acc = 0;" if mean else "",
        udecl=" T acc[U];" if mean else "",
        uinit="acc[u] = 0;" if mean else "",
        final="acc / (T)STEPS" if mean else "v",
        uacc="acc[u] += v[u];" if mean else "",
        ufinal="acc[u] / (T)STEPS" if mean else "v[u]",
    )
    proto = prototype(entry, sig)
    impls = [
        impl(
            "naive",
            head + fill(_NAIVE, block=rng.choice([128, 256, 512]), proto=proto, **acc),
            ["naive", "coalesced"],
        ),
        impl(
            "ilp",
            head
            + fill(_ILP, block=rng.choice([128, 256]), u=rng.choice([2, 4]), proto=proto, **acc),
            ["unrolled", "ilp", "coalesced"],
        ),
        impl(
            "chunked",
            head + fill(_CHUNK, block=128, grid=rng.choice([132, 264]), proto=proto, **acc),
            ["uncoalesced", "low_occupancy"],
        ),
    ]
    sizes = {
        "small": {"n": rng.randrange(500, 3000)},
        "medium": {"n": rng.randrange(60_000, 120_000)},
        "large": {"n": n_large},
        "heldout": {"n": rng.randrange(150_001, 250_000)},
    }
    pd = {k: {"p": Distribution(kind="uniform", low=prange[0], high=prange[1])} for k in sizes}
    dist = Distribution(kind="uniform", low=xrange_[0], high=xrange_[1])
    desc = (
        f"{what} Element-wise on {t} arrays but compute-bound: {steps} dependent steps per "
        "element, so the arithmetic pipelines (not memory) set the speed."
    )
    return c_task(
        "iterated_map",
        index,
        entry,
        ref,
        sig,
        four_configs(sizes, dist, param_dists=pd),
        tolerance_for(t, 1024),
        impls,
        desc,
    )
