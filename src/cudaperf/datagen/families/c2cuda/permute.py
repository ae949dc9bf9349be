"""Index permutations of one array, with a cheap map applied on the way: reverse the whole
array, reverse every segment of S elements (the last one may be shorter), or rotate left by
a shift s (out[i] = x[(i + s) mod n]). Pure data movement: the permutation decides which
accesses can be coalesced."""

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
/* $what */
void $entry($params) {
    for (long long i = 0; i < n; ++i) {
        long long j = $src;
        $t v = x[j];
        out[i] = $map;
    }
}
"""

_HEAD = """
#define T $t
__device__ __forceinline__ long long src_of(long long i, long long n$sparam) {
    (void)n;
    return $src;
}
__device__ __forceinline__ T map_of(T v) { return $map; }
"""

_GATHER = """
// One thread per output: writes are coalesced, reads follow the permutation (for a reversal
// or rotation they are still consecutive within a warp).
__global__ void permute_gather($kparams) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = map_of(x[src_of(i, n$sarg)]);
}

$proto {
    if (n > 0) permute_gather<<<(unsigned)(((long long)n + $block - 1) / $block), $block>>>($kargs);
}
"""

_ILP = """
// Grid-stride loop with $u independent outputs per thread per step (block-strided), a few
// waves of blocks.
#define U $u
__global__ void __launch_bounds__($block) permute_ilp($kparams) {
    long long step = (long long)gridDim.x * $block * U;
    for (long long b = (long long)blockIdx.x * $block * U + threadIdx.x; b < n; b += step) {
        T v[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            long long i = b + (long long)u * $block;
            v[u] = i < n ? x[src_of(i, n$sarg)] : (T)0;
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
            long long i = b + (long long)u * $block;
            if (i < n) out[i] = map_of(v[u]);
        }
    }
}

$proto {
    long long want = ((long long)n + $block * U - 1) / ($block * U);
    int grid = (int)(want < 132 * $waves ? want : 132 * $waves);
    if (grid > 0) permute_ilp<<<grid, $block>>>($kargs);
}
"""

_CHUNK = """
// Each thread handles $c consecutive outputs: lanes of a warp are $c elements apart, so no
// access is coalesced (deliberately weak).
__global__ void permute_chunked($kparams) {
    long long i0 = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * $c;
    for (long long i = i0; i < i0 + $c && i < n; ++i) out[i] = map_of(x[src_of(i, n$sarg)]);
}

$proto {
    long long threads = ((long long)n + $c - 1) / $c;
    if (n > 0) permute_chunked<<<(unsigned)((threads + $block - 1) / $block), $block>>>($kargs);
}
"""

_SCATTER = """
// One thread per input element scatters it to its destination (the inverse permutation):
// reads are coalesced, writes follow the permutation.
__device__ __forceinline__ long long dst_of(long long j, long long n$sparam) {
    (void)n;
    return $dst;
}
__global__ void permute_scatter($kparams) {
    long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (j < n) out[dst_of(j, n$sarg)] = map_of(x[j]);
}

$proto {
    unsigned grid = (unsigned)(((long long)n + $block - 1) / $block);
    if (n > 0) permute_scatter<<<grid, $block>>>($kargs);
}
"""


def _op(rng: random.Random):
    """(name, src index expr, inverse expr, what, extra scalar or None)."""
    kind = rng.choice(["reverse", "segments", "rotate"])
    if kind == "reverse":
        return kind, "n - 1 - i", "n - 1 - j", "reverse the array: out[i] = f(x[n - 1 - i])", None
    if kind == "segments":
        seg = rng.choice([3, 4, 7, 16, 32, 100, 256, 1000, 4096])
        start = f"(i / {seg}) * {seg}"
        src = f"{start} + ({start} + {seg} <= n ? {seg} : n - {start}) - 1 - i % {seg}"
        what = (
            f"reverse every segment of {seg} elements (the last segment may be shorter): "
            f"out[i] = f(x[j]) with j the mirror of i inside its segment"
        )
        return kind, src, src.replace("i", "j"), what, None  # an involution
    return (
        kind,
        "(i + s) % n",
        "(j + n - s) % n",
        "rotate left by s (0 <= s < n): out[i] = f(x[(i + s) mod n])",
        "s",
    )


@family("permute", TaskKind.C2CUDA, "permutation")
def permute(rng: random.Random, index: int):
    t = rng.choice(["float", "double", "int", "int", "float"])
    kind, src, dst, what_p, extra = _op(rng)
    if t == "int":
        c = rng.randrange(1, 1 << 16)
        mapping, what_m = rng.choice(
            [(f"v ^ {c}", f"v XOR {c}"), (f"v + {c}", f"v + {c}"), (f"v * 3 - {c}", f"3v - {c}")]
        )
    else:
        a, b = rng.choice([1.0, 2.0, -1.0, 0.5, 1.5, -0.25]), round(rng.uniform(-1, 1), 3)
        mapping, what_m = f"{lit(a, t)} * v + {lit(b, t)}", f"{a} * v + {b}"
    what = f"{what_p}, with f(v) = {what_m}."
    entry = rng.choice([f"{kind}_copy", f"permute_{kind}", f"{kind}_array", f"{kind}_map"])
    items = [("n", "int", "scalar")]
    if extra:
        items.append(("s", "int", "scalar"))
    items += [("x", t, "in", "n"), ("out", t, "out", "n")]
    sig = c_signature(*items)
    params = ", ".join(p.c_decl() for p in sig)
    ref = fill(_REF, what=what, entry=entry, params=params, src=src, t=t, map=mapping)
    kparams = params.replace(f"const {t}* x", f"const {t}* __restrict__ x")
    common = dict(
        proto=prototype(entry, sig),
        kparams=kparams,
        kargs=", ".join(p.name for p in sig),
        sarg=", s" if extra else "",
    )
    head = fill(_HEAD, t=t, src=src, map=mapping, sparam=", int s" if extra else "")
    b = lambda: rng.choice([128, 256, 512])  # noqa: E731
    impls = [
        impl("gather", head + fill(_GATHER, block=b(), **common), ["naive", "coalesced"]),
        impl(
            "grid_stride_ilp",
            head
            + fill(_ILP, block=b(), u=rng.choice([2, 4, 8]), waves=rng.choice([4, 8]), **common),
            ["grid_stride", "unrolled", "coalesced"],
        ),
        impl(
            "chunked_uncoalesced",
            head + fill(_CHUNK, block=b(), c=rng.choice([8, 16, 32]), **common),
            ["uncoalesced"],
        ),
    ]
    if rng.random() < 0.5:
        scatter = fill(_SCATTER, block=b(), dst=dst, sparam=", int s" if extra else "", **common)
        impls.append(impl("scatter", head + scatter, ["naive", "scatter_writes"]))
    esize = 8 if t == "double" else 4
    sizes = {
        k: {"n": v}
        for k, v in {
            "small": rng.randrange(1001, 9000),
            "medium": (1 << 20) + rng.randrange(0, 4096),
            "large": max(1 << 25, int(3.2e8 / esize)) + rng.randrange(0, 999),
            "heldout": rng.randrange(3_000_001, 9_000_000),
        }.items()
    }
    if extra:
        for v in sizes.values():
            v["s"] = rng.randrange(1, v["n"])
    dist = (
        Distribution(kind="randint", low=-100000, high=100000)
        if t == "int"
        else Distribution(kind="uniform", low=0.5, high=1.5)
    )
    desc = f"Permute a {t} array of n elements: {what} Pure data movement (memory-bound)" + (
        "; integer results are exact." if t == "int" else "."
    )
    tol = Tolerance(atol=0.0, rtol=0.0) if t == "int" else Tolerance(atol=1e-6, rtol=1e-6)
    if t == "double":
        tol = Tolerance(atol=1e-14, rtol=1e-14)
    return c_task("permute", index, entry, ref, sig, four_configs(sizes, dist), tol, impls, desc)
