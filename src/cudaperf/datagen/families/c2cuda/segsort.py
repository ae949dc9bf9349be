"""Sorting of fixed-size segments: the input is nseg segments of SEG values each, every
segment is sorted independently (ascending or descending); SEG is a per-task constant (a
power of two or not), the element type float or int. Values are only moved, so results are
exact."""

from __future__ import annotations

import random

from cudaperf.datagen.base import c_signature, c_task, family, fill, four_configs, impl, prototype
from cudaperf.tasks.model import Distribution, TaskKind, Tolerance

_REF = """
#include <stdlib.h>
#include <string.h>

static int cmp(const void* pa, const void* pb) {
    $t a = *(const $t*)pa, b = *(const $t*)pb;
    return $cmp;
}

/* Sorts each of the nseg segments of $seg values of x ($order) into out. */
void $entry(int nseg, const $t* x, $t* out) {
    memcpy(out, x, (size_t)nseg * $seg * sizeof($t));
    for (int s = 0; s < nseg; ++s) qsort(out + (long long)s * $seg, $seg, sizeof($t), cmp);
}
"""

_HEAD = """
#define T $t
#define SEG $seg
// BEFORE(a, b): a belongs strictly before b in the output order ($order).
#define BEFORE(a, b) ((a) $op (b))
"""

_INSERTION = """
// One thread per segment: copy it, then insertion sort in global memory. O(SEG^2) serial work
// per thread and lanes a whole segment apart (deliberately weak).
__global__ void sort_serial(int nseg, const T* x, T* out) {
    int s = blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= nseg) return;
    const T* in = x + (long long)s * SEG;
    T* o = out + (long long)s * SEG;
    for (int k = 0; k < SEG; ++k) o[k] = in[k];
    for (int k = 1; k < SEG; ++k) {
        T v = o[k];
        int j = k - 1;
        while (j >= 0 && BEFORE(v, o[j])) { o[j + 1] = o[j]; --j; }
        o[j + 1] = v;
    }
}

$proto {
    if (nseg > 0) sort_serial<<<(nseg + $block - 1) / $block, $block>>>(nseg, x, out);
}
"""

_BITONIC = """
// One block per segment: the segment is loaded into shared memory, padded to P = $p with a
// sentinel that sorts last, sorted by a bitonic network (log P (log P + 1) / 2 compare-exchange
// stages, a barrier after each), and the first SEG values are stored.
#define P $p
#define THREADS $threads
__global__ void __launch_bounds__(THREADS)
sort_bitonic(const T* __restrict__ x, T* __restrict__ out) {
    __shared__ T s[P];
    const T* in = x + (long long)blockIdx.x * SEG;
    for (int k = threadIdx.x; k < P; k += THREADS) s[k] = k < SEG ? in[k] : ($sentinel);
    __syncthreads();
    for (int k = 2; k <= P; k <<= 1)
        for (int j = k >> 1; j > 0; j >>= 1) {
            for (int t = threadIdx.x; t < P; t += THREADS) {
                int u = t ^ j;
                if (u > t) {
                    T a = s[t], b = s[u];
                    bool up = (t & k) == 0;
                    if (up ? BEFORE(b, a) : BEFORE(a, b)) { s[t] = b; s[u] = a; }
                }
            }
            __syncthreads();
        }
    T* o = out + (long long)blockIdx.x * SEG;
    for (int k = threadIdx.x; k < SEG; k += THREADS) o[k] = s[k];
}

$proto {
    if (nseg > 0) sort_bitonic<<<nseg, THREADS>>>(x, out);
}
"""

_RANK = """
// Rank sort, one block per segment: every value's final position is the number of values that
// come before it (ties broken by position), counted against the segment in shared memory;
// SEG comparisons per element but no barriers between stages.
#define THREADS $threads
__global__ void __launch_bounds__(THREADS)
sort_rank(const T* __restrict__ x, T* __restrict__ out) {
    __shared__ T s[SEG];
    const T* in = x + (long long)blockIdx.x * SEG;
    for (int k = threadIdx.x; k < SEG; k += THREADS) s[k] = in[k];
    __syncthreads();
    T* o = out + (long long)blockIdx.x * SEG;
    for (int k = threadIdx.x; k < SEG; k += THREADS) {
        T v = s[k];
        int rank = 0;
        for (int j = 0; j < SEG; ++j) {
            T w = s[j];
            rank += BEFORE(w, v) || (w == v && j < k);
        }
        o[rank] = v;
    }
}

$proto {
    if (nseg > 0) sort_rank<<<nseg, THREADS>>>(x, out);
}
"""


@family("segmented_sort", TaskKind.C2CUDA, "sort")
def segmented_sort(rng: random.Random, index: int):
    t = rng.choice(["float", "int"])
    seg = rng.choice([32, 64, 100, 128, 200, 256, 300, 512])
    desc_order = rng.random() < 0.4
    order = "descending" if desc_order else "ascending"
    p = 1
    while p < seg:
        p *= 2
    entry = rng.choice(["sort_segments", f"segmented_sort_{seg}", "batched_sort", "sort_rows"])
    sig = c_signature(
        ("nseg", "int", "scalar"),
        ("x", t, "in", f"nseg*{seg}"),
        ("out", t, "out", f"nseg*{seg}"),
    )
    cmp = "(a > b) - (a < b)" if not desc_order else "(a < b) - (a > b)"
    ref = fill(_REF, t=t, cmp=cmp, seg=seg, order=order, entry=entry)
    big = {"float": "3.402823e38f", "int": "2147483647"}[t]
    sentinel = big if not desc_order else (f"-{big}" if t == "float" else "(-2147483647 - 1)")
    common = dict(
        t=t, seg=seg, order=order, op=">" if desc_order else "<", proto=prototype(entry, sig)
    )
    head = fill(_HEAD, **common)
    thr = min(1024, max(32, ((seg + 31) // 32) * 32))
    impls = [
        impl(
            "insertion_per_thread",
            head + fill(_INSERTION, block=rng.choice([32, 64, 128]), **common),
            ["naive", "serial", "uncoalesced"],
        ),
        impl(
            "bitonic_smem",
            head
            + fill(
                _BITONIC,
                p=p,
                threads=min(p, rng.choice([128, 256, 512])),
                sentinel=sentinel,
                **common,
            ),
            ["bitonic_network", "smem_sort", "coalesced"],
        ),
        impl(
            "rank_sort_smem",
            head + fill(_RANK, threads=thr, **common),
            ["rank_sort", "smem_sort", "coalesced"],
        ),
    ]
    total_large = (1 << 24) if seg <= 128 else (1 << 23)
    sizes = {
        "small": {"nseg": rng.randrange(3, 30)},
        "medium": {"nseg": (1 << 18) // seg + rng.randrange(0, 50)},
        "large": {"nseg": total_large // seg},
        "heldout": {"nseg": rng.randrange(5001, 20000)},
    }
    if t == "int":
        dist = Distribution(kind="randint", low=-(10**6), high=10**6)
    else:
        dist = Distribution(kind="normal", mean=0.0, std=10.0)
    desc = (
        f"Sort each of nseg segments of {seg} {t} values {order}ly (x is nseg x {seg}, row-major; "
        "out receives the sorted segments). Equal values may appear (ties need no particular "
        "order: they are equal). Results are exact."
    )
    return c_task(
        "segmented_sort",
        index,
        entry,
        ref,
        sig,
        four_configs(sizes, dist),
        Tolerance(atol=0.0, rtol=0.0),
        impls,
        desc,
    )
