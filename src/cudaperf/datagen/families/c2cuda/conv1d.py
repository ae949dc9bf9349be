"""Direct 1D convolution (correlation form) of a long signal with a K-tap filter passed as an
array: y[i] = sum_j w[j] * x[i + j - R] (or w[K-1-j] when the filter is flipped), K = 3..17.
Borders: zero padding, clamp to the edge, or a "valid" output of n - K + 1 points."""

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
from cudaperf.tasks.model import Distribution, TaskKind

_REF = """
/* $what */
void $entry(int n, const $t* x, const $t* w, $t* y) {
    for (long long i = 0; i < (long long)($nout); ++i) {
        $t acc = 0;
        for (int j = 0; j < $k; ++j) {
            long long s = i + j$shift;
$load
            acc += w[$widx] * v;
        }
        y[i] = acc;
    }
}
"""

# The per-tap load in terms of a source index s (long long) and the signal; defines v.
_LOADS = {
    "zero": "            $t v = (s >= 0 && s < n) ? $src[s] : ($t)0;",
    "clamp": "            $t v = $src[s < 0 ? 0 : (s >= n ? n - 1 : s)];",
    "valid": "            $t v = $src[s];",
}

_HEAD = """
#define T $t
#define K $k
__device__ __forceinline__ T tap(const T* src, long long s, int n) {
$dload
    return v;
}
"""

_NAIVE = """
// One thread per output; each of the K taps is read from global memory (neighbouring threads
// share taps through L1), the filter from global memory as well.
__global__ void conv_naive(int n, const T* __restrict__ x, const T* __restrict__ w, T* y) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long long)($nout)) return;
    T acc = 0;
    for (int j = 0; j < K; ++j) acc += w[$widx] * tap(x, i + j$shift, n);
    y[i] = acc;
}

$proto {
    long long m = (long long)($nout);
    if (m > 0) conv_naive<<<(unsigned)((m + $block - 1) / $block), $block>>>(n, x, w, y);
}
"""

_TILED = """
// Shared-memory tiling: a block stages BLOCK * PER outputs' inputs plus a halo of K - 1 (one
// coalesced pass) and the filter in shared memory, then every thread computes PER outputs
// (block-strided, so shared-memory reads stay conflict-free) with the taps unrolled.
#define BLOCK $block
#define PER $per
__global__ void __launch_bounds__(BLOCK) conv_tiled(int n, const T* __restrict__ x,
                                                    const T* __restrict__ w, T* y) {
    __shared__ T s[BLOCK * PER + K - 1];
    __shared__ T sw[K];
    long long base = (long long)blockIdx.x * BLOCK * PER;
    for (int k = threadIdx.x; k < BLOCK * PER + K - 1; k += BLOCK)
        s[k] = tap(x, base + k$shift, n);
    if (threadIdx.x < K) sw[threadIdx.x] = w[threadIdx.x];
    __syncthreads();
    long long m = (long long)($nout);
#pragma unroll
    for (int p = 0; p < PER; ++p) {
        int o = p * BLOCK + threadIdx.x;
        if (base + o >= m) break;
        T acc = 0;
#pragma unroll
        for (int j = 0; j < K; ++j) acc += sw[$swidx] * s[o + j];
        y[base + o] = acc;
    }
}

$proto {
    long long m = (long long)($nout);
    long long blocks = (m + BLOCK * PER - 1) / (BLOCK * PER);
    if (m > 0) conv_tiled<<<(unsigned)blocks, BLOCK>>>(n, x, w, y);
}
"""

_CHUNK = """
// Each thread computes $c consecutive outputs serially: lanes of a warp are $c outputs apart,
// so every load and store touches a different sector (deliberately weak).
__global__ void conv_chunked(int n, const T* x, const T* w, T* y) {
    long long m = (long long)($nout);
    long long i0 = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * $c;
    for (long long i = i0; i < i0 + $c && i < m; ++i) {
        T acc = 0;
        for (int j = 0; j < K; ++j) acc += w[$widx] * tap(x, i + j$shift, n);
        y[i] = acc;
    }
}

$proto {
    long long m = (long long)($nout);
    long long threads = (m + $c - 1) / $c;
    if (m > 0) conv_chunked<<<(unsigned)((threads + $block - 1) / $block), $block>>>(n, x, w, y);
}
"""

_REGS = """
// Register sliding window: each thread computes PER consecutive outputs from PER + K - 1
// inputs held in registers (every input loaded once per thread, the filter kept in
// registers); loads of neighbouring lanes are PER elements apart, partly coalesced.
#define PER $per
__global__ void __launch_bounds__($block) conv_regs(int n, const T* __restrict__ x,
                                                   const T* __restrict__ w, T* y) {
    long long m = (long long)($nout);
    long long i0 = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * PER;
    if (i0 >= m) return;
    T wr[K], win[PER + K - 1];
#pragma unroll
    for (int j = 0; j < K; ++j) wr[j] = w[$widx];
#pragma unroll
    for (int k = 0; k < PER + K - 1; ++k) win[k] = tap(x, i0 + k$shift, n);
#pragma unroll
    for (int p = 0; p < PER; ++p) {
        T acc = 0;
#pragma unroll
        for (int j = 0; j < K; ++j) acc += wr[j] * win[p + j];
        if (i0 + p < m) y[i0 + p] = acc;
    }
}

$proto {
    long long m = (long long)($nout);
    long long threads = (m + PER - 1) / PER;
    if (m > 0) conv_regs<<<(unsigned)((threads + $block - 1) / $block), $block>>>(n, x, w, y);
}
"""


@family("conv1d", TaskKind.C2CUDA, "convolution")
def conv1d(rng: random.Random, index: int):
    t = rng.choice(["float", "float", "double"])
    k = rng.choice([3, 4, 5, 7, 8, 9, 11, 13, 15, 17])
    border = rng.choice(["zero", "clamp", "valid"])
    flip = rng.random() < 0.4
    r = 0 if border == "valid" else (k - 1) // 2
    nout = f"n - {k - 1}" if border == "valid" else "n"
    shift = f" - {r}" if r else ""
    widx = f"{k - 1} - j" if flip else "j"
    what = (
        f"{'Convolution' if flip else 'Correlation'} of x (length n) with the {k}-tap filter w: "
        f"y[i] = sum over j < {k} of w[{widx}] * x[i + j{shift}]"
        + {
            "zero": ", x taken as 0 outside [0, n).",
            "clamp": ", x indices clamped to [0, n - 1].",
            "valid": f"; only the n - {k - 1} outputs whose taps lie inside x.",
        }[border]
    )
    entry = rng.choice(["conv1d", f"fir{k}", "filter_signal", f"correlate{k}", "conv1d_direct"])
    sig = c_signature(
        ("n", "int", "scalar"),
        ("x", t, "in", "n"),
        ("w", t, "in", str(k)),
        ("y", t, "out", nout.replace(" ", "")),
    )
    ref = fill(
        _REF,
        what=what,
        entry=entry,
        t=t,
        nout=nout,
        k=k,
        shift=shift,
        widx=widx,
        load=fill(_LOADS[border], t=t, src="x"),
    )
    common = dict(
        t=t,
        k=k,
        nout=nout,
        shift=shift,
        widx=widx,
        swidx="K - 1 - j" if flip else "j",
        proto=prototype(entry, sig),
    )
    dload = _LOADS["zero" if border == "valid" else border]  # staging may read past n - K
    head = fill(_HEAD, dload=fill(dload, t="T", src="src"), **common)
    b = lambda: rng.choice([128, 256, 512])  # noqa: E731
    impls = [
        impl("naive", head + fill(_NAIVE, block=b(), **common), ["naive", "coalesced"]),
        impl(
            "smem_tiled",
            head + fill(_TILED, block=rng.choice([128, 256]), per=rng.choice([2, 4, 8]), **common),
            ["smem_tiling", "coalesced", "unrolled"],
        ),
        impl(
            "chunked_uncoalesced",
            head + fill(_CHUNK, block=b(), c=rng.choice([8, 16, 32]), **common),
            ["uncoalesced"],
        ),
    ]
    if rng.random() < 0.6:
        impls.append(
            impl(
                "register_window",
                head + fill(_REGS, block=b(), per=rng.choice([2, 4]), **common),
                ["register_blocking", "unrolled"],
            )
        )
    big = (1 << 26 if k <= 8 else 1 << 25) >> (t == "double")  # >= 256 MB of traffic
    sizes = {
        "small": {"n": rng.randrange(700, 5000)},
        "medium": {"n": (1 << 20) + rng.randrange(0, 999)},
        "large": {"n": big + rng.randrange(0, 4999)},
        "heldout": {"n": rng.randrange(3_000_001, 9_000_000)},
    }
    dist = Distribution(kind="uniform", low=0.25, high=1.25)
    desc = (
        f"{what} Signal and filter are {t}; the filter weights are an input array (positive). "
        "Memory-bound for short filters, compute-heavier for long ones; each input feeds up to "
        f"{k} outputs."
    )
    return c_task(
        "conv1d",
        index,
        entry,
        ref,
        sig,
        four_configs(sizes, dist),
        tolerance_for(t, 4 * k),
        impls,
        desc,
    )
