"""Sparse matrix-vector product in ELLPACK-R form: row r holds row_len[r] <= K non-zeros,
stored in K slots of col (column indices) and val; y[r] = alpha * sum over the row's slots
of val * x[col]. The slots are row-major (slot k of row r at r * K + k) or slot-major (at
k * rows + r, the GPU-friendly layout); both are drawn. Every input drawn from the task's
distributions is a valid matrix (column indices in [0, cols), lengths in [lo, K])."""

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

_REF = """
/* $what */
void $entry(int rows, int cols, const int* row_len, const int* col, const $t* val,
            const $t* x, $t* y) {
    (void)cols;
    for (int r = 0; r < rows; ++r) {
        $t acc = 0;
        for (int k = 0; k < row_len[r]; ++k) {
            long long s = $slot;
            acc += val[s] * x[col[s]];
        }
        y[r] = $alpha * acc;
    }
}
"""

_HEAD = """
#define T $t
#define K $k
#define SLOT(r, k) ($slotm)
"""

_THREAD = """
// One thread per row walks its slots; $note
__global__ void spmv_thread(int rows, const int* __restrict__ row_len, const int* __restrict__ col,
                            const T* __restrict__ val, const T* __restrict__ x, T* y) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    int len = row_len[r];
    T acc = 0;
    for (int k = 0; k < len; ++k) {
        long long s = SLOT(r, k);
        acc += val[s] * __ldg(&x[col[s]]);
    }
    y[r] = $alpha * acc;
}

$proto {
    (void)cols;
    if (rows > 0) spmv_thread<<<(rows + $block - 1) / $block, $block>>>(
            rows, row_len, col, val, x, y);
}
"""

_GROUP = """
// G = $g lanes per row: lane j takes slots j, j + G, ...; the G partial sums are combined
// with shuffles. $note
#define G $g
__global__ void __launch_bounds__($block) spmv_group(int rows, const int* __restrict__ row_len,
                                                   const int* __restrict__ col,
                                                   const T* __restrict__ val,
                                                   const T* __restrict__ x, T* y) {
    long long gt = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    int r = (int)(gt / G), j = threadIdx.x % G;
    bool live = r < rows;
    int len = live ? row_len[r] : 0;
    T acc = 0;
    for (int k = j; k < len; k += G) {
        long long s = SLOT(r, k);
        acc += val[s] * __ldg(&x[col[s]]);
    }
#pragma unroll
    for (int o = G / 2; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o, G);
    if (live && j == 0) y[r] = $alpha * acc;
}

$proto {
    (void)cols;
    long long threads = (long long)rows * G;
    if (rows > 0)
        spmv_group<<<(unsigned)((threads + $block - 1) / $block), $block>>>(
            rows, row_len, col, val, x, y);
}
"""

_SMEMX = """
// One thread per row, with the row's lengths staged per block and the product computed from
// a block-strided walk; x is read through the read-only cache. Each block also counts its
// longest row so that all lanes run the same number of slot steps (idle lanes multiply 0).
__global__ void __launch_bounds__($block) spmv_padded(int rows, const int* __restrict__ row_len,
                                                    const int* __restrict__ col,
                                                    const T* __restrict__ val,
                                                    const T* __restrict__ x, T* y) {
    __shared__ int block_max;
    int r = blockIdx.x * $block + threadIdx.x;
    int len = r < rows ? row_len[r] : 0;
    if (threadIdx.x == 0) block_max = 0;
    __syncthreads();
    atomicMax(&block_max, len);
    __syncthreads();
    int steps = block_max;
    T acc = 0;
    for (int k = 0; k < steps; ++k) {
        bool on = k < len;
        long long s = on ? SLOT(r, k) : 0;
        T v = on ? val[s] : (T)0;
        int c = on ? col[s] : 0;
        acc += v * (on ? __ldg(&x[c]) : (T)0);
    }
    if (r < rows) y[r] = $alpha * acc;
}

$proto {
    (void)cols;
    if (rows > 0) spmv_padded<<<(rows + $block - 1) / $block, $block>>>(
            rows, row_len, col, val, x, y);
}
"""


@family("spmv_ell", TaskKind.C2CUDA, "sparse")
def spmv_ell(rng: random.Random, index: int):
    t = rng.choice(["float", "float", "double"])
    k = rng.choice([4, 8, 12, 16, 24, 32, 48, 64])
    lo = rng.choice([0, 1, k // 4, k // 2, k - 1])
    slot_major = rng.random() < 0.5
    alpha = rng.choice([1.0, 0.5, 2.0, -1.0, 0.75, 1.25])
    slot_c = "(long long)k * rows + r" if slot_major else "(long long)r * " + str(k) + " + k"
    slot_m = "(long long)(k) * rows + (r)" if slot_major else "(long long)(r) * K + (k)"
    layout = (
        "slot-major (slot k of row r at k * rows + r)"
        if slot_major
        else ("row-major (slot k of row r at r * K + k)")
    )
    what = (
        f"y = {lit(alpha, 'double')} * A x for a rows x cols sparse matrix A in ELLPACK-R form "
        f"with K = {k} slots per row, {layout}; row r uses its first row_len[r] slots."
    )
    entry = rng.choice(["spmv_ell", "spmv", "ell_matvec", "sparse_matvec", "spmv_ellpack"])
    sig = c_signature(
        ("rows", "int", "scalar"),
        ("cols", "int", "scalar"),
        ("row_len", "int", "in", "rows"),
        ("col", "int", "in", f"rows*{k}"),
        ("val", t, "in", f"rows*{k}"),
        ("x", t, "in", "cols"),
        ("y", t, "out", "rows"),
    )
    ref = fill(_REF, what=what, entry=entry, t=t, slot=slot_c, alpha=lit(alpha, t))
    common = dict(alpha=lit(alpha, t), proto=prototype(entry, sig))
    head = fill(_HEAD, t=t, k=k, slotm=slot_m)
    g = rng.choice([g for g in (2, 4, 8, 16, 32) if g <= max(2, k)])
    tnote = (
        "with slot-major storage the lanes of a warp read consecutive addresses (coalesced)."
        if slot_major
        else "with row-major storage the lanes of a warp are K slots apart (uncoalesced)."
    )
    gnote = (
        "With row-major storage a row's G lanes read consecutive slots (coalesced)."
        if not slot_major
        else "With slot-major storage the G lanes of a row are rows apart (uncoalesced)."
    )
    coal_t = ["coalesced"] if slot_major else ["uncoalesced"]
    coal_g = ["uncoalesced"] if slot_major else ["coalesced"]
    impls = [
        impl(
            "thread_per_row",
            head + fill(_THREAD, block=rng.choice([128, 256]), note=tnote, **common),
            ["naive", *coal_t],
        ),
        impl(
            "lanes_per_row",
            head + fill(_GROUP, g=g, block=rng.choice([128, 256]), note=gnote, **common),
            ["warp_shuffle", *coal_g],
        ),
        impl(
            "padded_lockstep",
            head + fill(_SMEMX, block=rng.choice([64, 128, 256]), **common),
            ["padded", "shared_atomics", *coal_t],
        ),
    ]
    esize = 8 if t == "double" else 4
    large_rows = int(2.4e8 / (k * (4 + esize))) + rng.randrange(0, 999)
    sizes = {
        "small": {"rows": rng.randrange(50, 400), "cols": rng.randrange(50, 500)},
        "medium": {"rows": 100_000 + rng.randrange(0, 999), "cols": 50_000},
        "large": {"rows": large_rows, "cols": rng.choice([1 << 16, 1 << 20, 1 << 22])},
        "heldout": {"rows": rng.randrange(30_001, 90_000), "cols": rng.randrange(10_001, 90_000)},
    }
    pd = {
        name: {
            "row_len": Distribution(kind="randint", low=lo, high=k + 1),
            "col": Distribution(kind="randint", low=0, high=s["cols"]),
        }
        for name, s in sizes.items()
    }
    dist = Distribution(kind="uniform", low=0.25, high=1.25)
    desc = (
        f"{what} val, x and y are {t}; col and row_len are int (row lengths between {lo} and "
        f"{k}). Memory-bound with an irregular gather of x; rows have different lengths."
    )
    return c_task(
        "spmv_ell",
        index,
        entry,
        ref,
        sig,
        four_configs(sizes, dist, param_dists=pd),
        tolerance_for(t, 4 * k),
        impls,
        desc,
    )
