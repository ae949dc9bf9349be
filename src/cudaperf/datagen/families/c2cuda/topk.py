"""Per-row selection: the K largest (or smallest) values of every row of a rows x cols matrix,
in order (best first), or only the K-th best value. Values, not indices, are returned, so
ties need no rule and results are exact. K = 1..16, cols up to 4096."""

from __future__ import annotations

import random

from cudaperf.datagen.base import c_signature, c_task, family, fill, four_configs, impl, prototype
from cudaperf.tasks.model import Distribution, TaskKind, Tolerance

_REF = """
/* $what */
void $entry(int rows, int cols, const $t* x, $t* out) {
    for (int r = 0; r < rows; ++r) {
        $t best[$k] = {0};
        int cnt = 0;
        for (int j = 0; j < cols; ++j) {
            $t v = x[(long long)r * cols + j];
            if (cnt == $k && !(v $op best[$k - 1])) continue;
            int p = cnt < $k ? cnt : $k - 1;
            while (p > 0 && v $op best[p - 1]) {
                best[p] = best[p - 1];
                --p;
            }
            best[p] = v;
            if (cnt < $k) ++cnt;
        }
$write    }
}
"""

_HEAD = """
#include <float.h>
#include <limits.h>
#define T $t
#define KK $k
#define BETTER(a, b) ((a) $op (b))
#define WORST ($worst)
"""

_THREAD = """
// One thread per row keeps a sorted list of the KK best values (insertion): lanes of a warp
// read rows $what_apart apart (uncoalesced), and each row is walked serially.
__global__ void topk_thread(int rows, int cols, const T* __restrict__ x, T* out) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    T best[KK];
    int cnt = 0;
    const T* xr = x + (long long)r * cols;
    for (int j = 0; j < cols; ++j) {
        T v = xr[j];
        if (cnt == KK && !BETTER(v, best[KK - 1])) continue;
        int p = cnt < KK ? cnt : KK - 1;
        while (p > 0 && BETTER(v, best[p - 1])) {
            best[p] = best[p - 1];
            --p;
        }
        best[p] = v;
        if (cnt < KK) ++cnt;
    }
$twrite}

$proto {
    if (rows > 0) topk_thread<<<(rows + $block - 1) / $block, $block>>>(rows, cols, x, out);
}
"""

_WARP = """
// One warp per row: lane l keeps a sorted list of the best values among columns l, l + 32,
// ... (coalesced reads), then KK rounds of a shuffle arg-best pick the next best head among
// the 32 lists (ties go to the lower lane, whose list then advances).
__global__ void __launch_bounds__($wpb * 32) topk_warp(int rows, int cols,
                                                      const T* __restrict__ x, T* out) {
    int r = blockIdx.x * $wpb + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (r >= rows) return;  // uniform per warp
    T best[KK];
    int cnt = 0;
    const T* xr = x + (long long)r * cols;
    for (int j = lane; j < cols; j += 32) {
        T v = xr[j];
        if (cnt == KK && !BETTER(v, best[KK - 1])) continue;
        int p = cnt < KK ? cnt : KK - 1;
        while (p > 0 && BETTER(v, best[p - 1])) {
            best[p] = best[p - 1];
            --p;
        }
        best[p] = v;
        if (cnt < KK) ++cnt;
    }
    int pos = 0;
    for (int q = 0; q < KK; ++q) {
        T v = pos < cnt ? best[pos] : WORST;
        int who = pos < cnt ? lane : 32;
        for (int o = 16; o > 0; o >>= 1) {
            T ov = __shfl_xor_sync(0xffffffffu, v, o);
            int ow = __shfl_xor_sync(0xffffffffu, who, o);
            if (BETTER(ov, v) || (ov == v && ow < who)) { v = ov; who = ow; }
        }
        if (who == lane) ++pos;
$wwrite    }
}

$proto {
    if (rows > 0) topk_warp<<<(rows + $wpb - 1) / $wpb, $wpb * 32>>>(rows, cols, x, out);
}
"""

_BITONIC = """
// One block per row: the row is copied into shared memory (coalesced), padded with WORST to
// a power of two P, sorted best-first by a bitonic network, and the first KK values written.
// Sorting the whole row does more work than selection needs (a strong-but-wasteful choice).
__global__ void __launch_bounds__($block) topk_bitonic(int cols, int P, const T* __restrict__ x,
                                                      T* out) {
    extern __shared__ unsigned char smem_raw[];
    T* s = reinterpret_cast<T*>(smem_raw);
    const T* xr = x + (long long)blockIdx.x * cols;
    for (int i = threadIdx.x; i < P; i += $block) s[i] = i < cols ? xr[i] : WORST;
    for (int size = 2; size <= P; size <<= 1)
        for (int stride = size >> 1; stride > 0; stride >>= 1) {
            __syncthreads();
            for (int i = threadIdx.x; i < P; i += $block) {
                int j = i ^ stride;
                if (j > i) {
                    T a = s[i], b = s[j];
                    bool first = (i & size) == 0;
                    if (first ? BETTER(b, a) : BETTER(a, b)) { s[i] = b; s[j] = a; }
                }
            }
        }
    __syncthreads();
    int r = blockIdx.x;
$bwrite}

$proto {
    int P = 1;
    while (P < cols) P <<= 1;
    if (rows > 0)
        topk_bitonic<<<rows, $block, P * sizeof(T)>>>(cols, P, x, out);
}
"""


@family("topk_rows", TaskKind.C2CUDA, "selection")
def topk_rows(rng: random.Random, index: int):
    t = rng.choice(["float", "float", "int", "double"])
    k = rng.choice([1, 2, 3, 4, 5, 8, 10, 16])
    largest = rng.random() < 0.6
    only_kth = k > 1 and rng.random() < 0.3
    op = ">" if largest else "<"
    worst = {
        ("float", True): "-FLT_MAX",
        ("float", False): "FLT_MAX",
        ("double", True): "-DBL_MAX",
        ("double", False): "DBL_MAX",
        ("int", True): "INT_MIN",
        ("int", False): "INT_MAX",
    }[(t, largest)]
    word = "largest" if largest else "smallest"
    if only_kth:
        what = f"out[r] = the {k}-th {word} value of row r (counting repeats)."
        nout = "rows"
        ref_write = f"        out[r] = best[{k - 1}];\n"
        twrite = "    out[r] = best[KK - 1];\n"
        wwrite = "        if (q == KK - 1 && lane == 0) out[r] = v;\n"
        bwrite = "    if (threadIdx.x == 0) out[r] = s[KK - 1];\n"
    else:
        what = f"out[r * {k} + q] = the (q+1)-th {word} value of row r, q < {k} (best first)."
        nout = f"rows*{k}"
        ref_write = (
            f"        for (int q = 0; q < {k}; ++q) out[(long long)r * {k} + q] = best[q];\n"
        )
        twrite = "    for (int q = 0; q < KK; ++q) out[(long long)r * KK + q] = best[q];\n"
        wwrite = "        if (lane == 0) out[(long long)r * KK + q] = v;\n"
        bwrite = (
            "    for (int q = threadIdx.x; q < KK; q += $block)\n"
            "        out[(long long)r * KK + q] = s[q];\n"
        )
    entry = rng.choice(
        [
            f"top{k}_rows",
            "row_topk",
            f"kth_{word}" if only_kth else f"{word}_{k}_per_row",
            "select_rows",
        ]
    )
    sig = c_signature(
        ("rows", "int", "scalar"),
        ("cols", "int", "scalar"),
        ("x", t, "in", "rows*cols"),
        ("out", t, "out", nout),
    )
    ref = fill(_REF, what=what, entry=entry, t=t, k=k, op=op, write=ref_write)
    head = fill(_HEAD, t=t, k=k, op=op, worst=worst)
    proto = prototype(entry, sig)
    bb = rng.choice([128, 256, 512])
    impls = [
        impl(
            "thread_per_row",
            head
            + fill(
                _THREAD,
                block=rng.choice([64, 128]),
                twrite=twrite,
                proto=proto,
                what_apart="a whole row",
            ),
            ["naive", "uncoalesced"],
        ),
        impl(
            "warp_per_row",
            head + fill(_WARP, wpb=rng.choice([4, 8]), wwrite=wwrite, proto=proto),
            ["warp_shuffle", "coalesced"],
        ),
        impl(
            "block_bitonic",
            head + fill(_BITONIC, block=bb, bwrite=fill(bwrite, block=bb), proto=proto),
            ["smem_sort", "bitonic_network", "coalesced"],
        ),
    ]
    esize = 8 if t == "double" else 4
    lc = rng.choice([256, 1000, 1024, 2048, 4096])
    lr = int(2.4e8 / (lc * esize)) + rng.randrange(0, 99)
    sizes = {
        "small": {"rows": rng.randrange(5, 40), "cols": rng.randrange(40, 300)},
        "medium": {"rows": rng.choice([4096, 8192]), "cols": rng.choice([128, 500, 1024])},
        "large": {"rows": lr, "cols": lc},
        "heldout": {"rows": rng.randrange(1001, 5000), "cols": rng.randrange(100, 3000)},
    }
    dist = (
        Distribution(kind="randint", low=-1000000, high=1000000)
        if t == "int"
        else Distribution(kind="normal", mean=0.0, std=10.0)
    )
    desc = (
        f"For a rows x cols row-major {t} matrix (cols <= 4096, cols >= {k}): {what} "
        "Values are compared exactly. Memory-bound when selection is done in one pass."
    )
    return c_task(
        "topk_rows",
        index,
        entry,
        ref,
        sig,
        four_configs(sizes, dist),
        Tolerance(atol=0.0, rtol=0.0),
        impls,
        desc,
    )
