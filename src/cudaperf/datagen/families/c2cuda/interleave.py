"""Interleave / deinterleave: K = 2..4 separate arrays (structure of arrays) into one array of
K-element records (array of structures), or the reverse. One side is always strided by K, so
the coalesced choice is between the reads and the writes, or shared-memory staging."""

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

_NAMES = ["a", "b", "c", "d"]


def _soa_ptr(k: int, what: str) -> str:
    """C expression choosing the array of component `what` (an int expression)."""
    expr = _NAMES[k - 1]
    for j in range(k - 2, -1, -1):
        expr = f"({what} == {j} ? {_NAMES[j]} : {expr})"
    return expr


_REF_IL = """
/* Interleave: rec[i * $k + j] = f(component j of element i), components $comps. */
void $entry($params) {
    for (long long i = 0; i < n; ++i) {
$body    }
}
"""

_REF_DE = """
/* Deinterleave: component j of element i = f(rec[i * $k + j]), components $comps. */
void $entry($params) {
    for (long long i = 0; i < n; ++i) {
$body    }
}
"""

_HEAD = """
#define T $t
#define KC $k
__device__ __forceinline__ T f(T v) { return $map; }
"""

# ---- interleave (SoA -> AoS) -------------------------------------------------------------

_IL_BY_OUT = """
// One thread per output word: writes are coalesced, each thread reads component j of element
// i (K arrays read with stride 1/K per lane).
__global__ void il_by_out($kparams) {
    long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= (long long)n * KC) return;
    long long i = e / KC;
    int j = (int)(e % KC);
    const T* src = $sel;
    rec[e] = f(src[i]);
}

$proto {
    long long m = (long long)n * KC;
    if (n > 0) il_by_out<<<(unsigned)((m + $block - 1) / $block), $block>>>($kargs);
}
"""

_IL_BY_IN = """
// One thread per element: K coalesced reads, then K writes K words apart per lane (strided
// writes: every store instruction touches K times as many sectors).
__global__ void il_by_in($kparams) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
$in_body}

$proto {
    if (n > 0) il_by_in<<<(unsigned)(((long long)n + $block - 1) / $block), $block>>>($kargs);
}
"""

_IL_SMEM = """
// Shared-memory staging: a block reads TILE elements of every component (coalesced), then
// writes the TILE * K interleaved words of its tile (coalesced) from shared memory.
#define TILE $block
__global__ void __launch_bounds__(TILE) il_smem($kparams) {
    __shared__ T s[TILE * KC];
    long long base = (long long)blockIdx.x * TILE;
    long long i = base + threadIdx.x;
$smem_load    __syncthreads();
    long long words = ((long long)n - base < TILE ? (long long)n - base : TILE) * KC;
    for (int w = threadIdx.x; w < words; w += TILE) rec[base * KC + w] = s[w];
}

$proto {
    if (n > 0) il_smem<<<(unsigned)(((long long)n + TILE - 1) / TILE), TILE>>>($kargs);
}
"""

# ---- deinterleave (AoS -> SoA) -----------------------------------------------------------

_DE_BY_OUT = """
// One thread per element: K coalesced writes, K reads K words apart per lane (strided).
__global__ void de_by_out($kparams) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
$out_body}

$proto {
    if (n > 0) de_by_out<<<(unsigned)(((long long)n + $block - 1) / $block), $block>>>($kargs);
}
"""

_DE_BY_IN = """
// One thread per input word: reads are coalesced, each thread writes to component j's array
// (each warp's stores are spread over K arrays).
__global__ void de_by_in($kparams) {
    long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= (long long)n * KC) return;
    long long i = e / KC;
    int j = (int)(e % KC);
    T* dst = $sel;
    dst[i] = f(rec[e]);
}

$proto {
    long long m = (long long)n * KC;
    if (n > 0) de_by_in<<<(unsigned)((m + $block - 1) / $block), $block>>>($kargs);
}
"""

_DE_SMEM = """
// Shared-memory staging: a block reads its TILE * K words coalesced into shared memory, then
// writes each component's TILE elements coalesced (reads from shared memory are K apart).
#define TILE $block
__global__ void __launch_bounds__(TILE) de_smem($kparams) {
    __shared__ T s[TILE * KC];
    long long base = (long long)blockIdx.x * TILE;
    long long words = ((long long)n - base < TILE ? (long long)n - base : TILE) * KC;
    for (int w = threadIdx.x; w < words; w += TILE) s[w] = rec[base * KC + w];
    __syncthreads();
    long long i = base + threadIdx.x;
    if (i >= n) return;
$smem_store}

$proto {
    if (n > 0) de_smem<<<(unsigned)(((long long)n + TILE - 1) / TILE), TILE>>>($kargs);
}
"""


@family("interleave", TaskKind.C2CUDA, "permutation")
def interleave(rng: random.Random, index: int):
    t = rng.choice(["float", "int", "double", "float"])
    k = rng.choice([2, 3, 4])
    deint = rng.random() < 0.5
    names = _NAMES[:k]
    if t == "int":
        c = rng.randrange(1, 1 << 12)
        mapping, what_m = rng.choice([(f"v + {c}", f"v + {c}"), (f"v ^ {c}", f"v XOR {c}")])
    else:
        a = rng.choice([1.0, 2.0, 0.5, -1.0, 3.0])
        mapping, what_m = f"{lit(a, t)} * v", f"{a} * v"
    arr = [(nm, t, "out" if deint else "in", "n") for nm in names]
    rec = ("rec", t, "in" if deint else "out", f"n*{k}")
    items = [("n", "int", "scalar"), *([rec] + arr if deint else arr + [rec])]
    sig = c_signature(*items)
    params = ", ".join(p.c_decl() for p in sig)
    ref_map = mapping.replace("v", "$V")
    if deint:
        body = "".join(
            f"        {nm}[i] = {fill(ref_map, V=f'rec[i * {k} + {j}]')};\n"
            for j, nm in enumerate(names)
        )
        ref = fill(_REF_DE, entry="", params=params, k=k, comps=", ".join(names), body=body)
    else:
        body = "".join(
            f"        rec[i * {k} + {j}] = {fill(ref_map, V=f'{nm}[i]')};\n"
            for j, nm in enumerate(names)
        )
        ref = fill(_REF_IL, entry="", params=params, k=k, comps=", ".join(names), body=body)
    entry = rng.choice(
        [f"deinterleave{k}", "aos_to_soa", "split_records", "unpack_fields"]
        if deint
        else [f"interleave{k}", "soa_to_aos", "pack_records", "zip_fields"]
    )
    ref = ref.replace("void (", f"void {entry}(")
    kparams = params
    for nm in [*names, "rec"]:
        kparams = kparams.replace(f"const {t}* {nm}", f"const {t}* __restrict__ {nm}")
    common = dict(
        proto=prototype(entry, sig), kparams=kparams, kargs=", ".join(p.name for p in sig)
    )
    head = fill(_HEAD, t=t, k=k, map=mapping)
    b = lambda: rng.choice([128, 256, 512])  # noqa: E731
    if deint:
        out_body = "".join(f"    {nm}[i] = f(rec[i * KC + {j}]);\n" for j, nm in enumerate(names))
        store = "".join(
            f"    {nm}[i] = f(s[threadIdx.x * KC + {j}]);\n" for j, nm in enumerate(names)
        )
        impls = [
            impl(
                "thread_per_record",
                head + fill(_DE_BY_OUT, block=b(), out_body=out_body, **common),
                ["naive", "strided_reads"],
            ),
            impl(
                "thread_per_word",
                head + fill(_DE_BY_IN, block=b(), sel=_soa_ptr(k, "j"), **common),
                ["naive", "coalesced"],
            ),
            impl(
                "smem_staged",
                head + fill(_DE_SMEM, block=b(), smem_store=store, **common),
                ["smem_tiling", "coalesced"],
            ),
        ]
    else:
        in_body = "".join(f"    rec[i * KC + {j}] = f({nm}[i]);\n" for j, nm in enumerate(names))
        load = "".join(
            f"    if (i < n) s[threadIdx.x * KC + {j}] = f({nm}[i]);\n"
            for j, nm in enumerate(names)
        )
        impls = [
            impl(
                "thread_per_word",
                head + fill(_IL_BY_OUT, block=b(), sel=_soa_ptr(k, "j"), **common),
                ["naive", "coalesced"],
            ),
            impl(
                "thread_per_record",
                head + fill(_IL_BY_IN, block=b(), in_body=in_body, **common),
                ["naive", "strided_writes"],
            ),
            impl(
                "smem_staged",
                head + fill(_IL_SMEM, block=b(), smem_load=load, **common),
                ["smem_tiling", "coalesced"],
            ),
        ]
    esize = 8 if t == "double" else 4
    large = int(1.6e8 / (k * esize)) + rng.randrange(0, 999)
    sizes = {
        "small": {"n": rng.randrange(1001, 9000)},
        "medium": {"n": (1 << 19) + rng.randrange(0, 4096)},
        "large": {"n": large},
        "heldout": {"n": rng.randrange(1_000_001, 3_000_000)},
    }
    dist = (
        Distribution(kind="randint", low=-100000, high=100000)
        if t == "int"
        else Distribution(kind="uniform", low=0.5, high=1.5)
    )
    layout = f"{k} arrays ({', '.join(names)}) of n {t} values"
    what = (
        f"Deinterleave n records of {k} {t} fields (rec, n * {k} values) into {layout}"
        if deint
        else f"Interleave {layout} into n records of {k} fields (rec[i * {k} + j])"
    )
    desc = f"{what}, applying f(v) = {what_m} to every value. Pure data movement."
    tol = Tolerance(atol=0.0, rtol=0.0) if t != "float" else Tolerance(atol=1e-7, rtol=1e-7)
    return c_task("interleave", index, entry, ref, sig, four_configs(sizes, dist), tol, impls, desc)
