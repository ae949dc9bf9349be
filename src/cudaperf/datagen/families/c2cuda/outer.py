"""Outer products and row/column broadcasts: out[i][j] = g(u[i], v[j]) for an operator drawn
per task, or out[i][j] = g(A[i][j], u[i], v[j]) (a matrix scaled and shifted by a row and a
column vector). The output (rows x cols, row-major) dominates the traffic."""

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
#include <math.h>

static $t g($t a, $t ui, $t vj) {
    (void)a;
    return $gexpr;
}

/* $what */
void $entry($params) {
    for (int i = 0; i < rows; ++i)
        for (int j = 0; j < cols; ++j) {
            long long e = (long long)i * cols + j;
            out[e] = g($aload, u[i], v[j]);
        }
}
"""

_HEAD = """
#define T $t
__device__ __forceinline__ T g(T a, T ui, T vj) {
    (void)a;
    return $gexpr;
}
"""

_NAIVE = """
// One thread per output, $map.
__global__ void outer_naive($kparams) {
    int j = $ji, i = $ii;
    if (i >= rows || j >= cols) return;
    long long e = (long long)i * cols + j;
    out[e] = g($aload, u[i], v[j]);
}

$proto {
    dim3 block($bx, $by);
    dim3 grid($gx, $gy);
    outer_naive<<<grid, block>>>($kargs);
}
"""

_ROWBLOCK = """
// Register blocking: a block of $bx threads owns RB rows x $bx columns; each thread loads its
// v[j] once and the RB values u[i] from shared memory, then writes RB coalesced outputs.
#define RB $rb
__global__ void __launch_bounds__($bx) outer_rows($kparams) {
    __shared__ T su[RB];
    int j = blockIdx.x * $bx + threadIdx.x, i0 = blockIdx.y * RB;
    if (threadIdx.x < RB && i0 + (int)threadIdx.x < rows) su[threadIdx.x] = u[i0 + threadIdx.x];
    __syncthreads();
    if (j >= cols) return;
    T vj = v[j];
#pragma unroll
    for (int r = 0; r < RB; ++r) {
        int i = i0 + r;
        if (i < rows) {
            long long e = (long long)i * cols + j;
            out[e] = g($aload, su[r], vj);
        }
    }
}

$proto {
    dim3 grid((cols + $bx - 1) / $bx, (rows + RB - 1) / RB);
    outer_rows<<<grid, $bx>>>($kargs);
}
"""

_THREAD_ROW = """
// One thread per row writes the whole row: lanes of a warp are a row apart (uncoalesced) and
// only `rows` threads run (deliberately weak).
__global__ void outer_thread_row($kparams) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows) return;
    T ui = u[i];
    for (int j = 0; j < cols; ++j) {
        long long e = (long long)i * cols + j;
        out[e] = g($aload, ui, v[j]);
    }
}

$proto {
    if (rows > 0) outer_thread_row<<<(rows + $block - 1) / $block, $block>>>($kargs);
}
"""

_OUTER_OPS = [
    ("ui * vj", "u[i] * v[j]"),
    ("ui + vj", "u[i] + v[j]"),
    ("ui - vj", "u[i] - v[j]"),
    ("(ui - vj) * (ui - vj)", "(u[i] - v[j])^2"),
    ("$fmax(ui, vj)", "max(u[i], v[j])"),
    ("ui / ($c + vj)", "u[i] / (c + v[j])"),
    ("$c * ui * vj + ui", "c u[i] v[j] + u[i]"),
]
_BCAST_OPS = [
    ("a * ui + vj", "A[i][j] * u[i] + v[j]"),
    ("(a - vj) * ui", "(A[i][j] - v[j]) * u[i]"),
    ("a * ui * vj", "A[i][j] * u[i] * v[j]"),
    ("a + $c * ui", "A[i][j] + c u[i] (v unused weight 0: + 0 * v[j])"),
    ("$fmax(a, ui) * vj", "max(A[i][j], u[i]) * v[j]"),
]


@family("outer_broadcast", TaskKind.C2CUDA, "broadcast")
def outer_broadcast(rng: random.Random, index: int):
    t = rng.choice(["float", "float", "double"])
    has_a = rng.random() < 0.5
    form, what_op = rng.choice(_BCAST_OPS if has_a else _OUTER_OPS)
    c = round(rng.uniform(0.5, 3.0), 3)
    fmax = "fmaxf" if t == "float" else "fmax"
    gexpr = fill(form, c=lit(c, t), fmax=fmax)
    if "+ c u[i] (v unused" in what_op:
        gexpr += f" + {lit(0.0, t)} * vj"
        what_op = "A[i][j] + c * u[i] + 0 * v[j]"
    what = f"out[i][j] = {what_op} for i < rows, j < cols (c = {c}); row-major rows x cols {t}."
    items = [("rows", "int", "scalar"), ("cols", "int", "scalar")]
    if has_a:
        items.append(("A", t, "in", "rows*cols"))
    items += [("u", t, "in", "rows"), ("v", t, "in", "cols"), ("out", t, "out", "rows*cols")]
    sig = c_signature(*items)
    params = ", ".join(p.c_decl() for p in sig)
    entry = rng.choice(["outer_op", "broadcast_rows_cols", "outer_product", "rank1_map"])
    aload = "A[e]" if has_a else f"({t})0"
    ref = fill(_REF, what=what, entry=entry, params=params, t=t, gexpr=gexpr, aload=aload)
    kparams = params
    for nm in ("A", "u", "v"):
        kparams = kparams.replace(f"const {t}* {nm}", f"const {t}* __restrict__ {nm}")
    common = dict(
        proto=prototype(entry, sig),
        kparams=kparams,
        kargs=", ".join(p.name for p in sig),
        aload=aload,
    )
    head = fill(_HEAD, t=t, gexpr=gexpr)
    bx = rng.choice([32, 64, 128, 256])
    by = max(1, 256 // bx)
    coal = dict(
        ji="blockIdx.x * blockDim.x + threadIdx.x",
        ii="blockIdx.y * blockDim.y + threadIdx.y",
        gx=f"(cols + {bx} - 1) / {bx}",
        gy=f"(rows + {by} - 1) / {by}",
        map="threadIdx.x runs along a row (coalesced stores)",
    )
    uncoal = dict(
        ji="blockIdx.y * blockDim.y + threadIdx.y",
        ii="blockIdx.x * blockDim.x + threadIdx.x",
        gx=f"(rows + {bx} - 1) / {bx}",
        gy=f"(cols + {by} - 1) / {by}",
        map="threadIdx.x runs down a column, so the lanes' stores are a row apart (weak)",
    )
    variants = [
        impl("naive", head + fill(_NAIVE, bx=bx, by=by, **coal, **common), ["naive", "coalesced"]),
        impl(
            "column_major_threads",
            head + fill(_NAIVE, bx=bx, by=by, **uncoal, **common),
            ["naive", "uncoalesced"],
        ),
        impl(
            "row_blocked",
            head + fill(_ROWBLOCK, bx=rng.choice([128, 256]), rb=rng.choice([4, 8, 16]), **common),
            ["register_blocking", "coalesced", "unrolled"],
        ),
        impl(
            "thread_per_row",
            head + fill(_THREAD_ROW, block=rng.choice([64, 128]), **common),
            ["naive", "uncoalesced"],
        ),
    ]
    impls = [variants[0], variants[2], rng.choice([variants[1], variants[3]])]
    esize = 8 if t == "double" else 4
    lr, lc = rng.choice([(8192, 8192), (16384, 4096), (4096, 16384), (65536, 1024)])
    if esize == 8:
        lr //= 2
    sizes = {
        "small": {"rows": rng.randrange(20, 120), "cols": rng.randrange(20, 150)},
        "medium": {"rows": rng.choice([1024, 2048]), "cols": rng.choice([1000, 1024, 2048])},
        "large": {"rows": lr + rng.choice([0, 1]), "cols": lc + rng.choice([0, 3])},
        "heldout": {"rows": rng.randrange(1001, 4000), "cols": rng.randrange(999, 4000)},
    }
    dist = Distribution(kind="uniform", low=0.5, high=1.5)
    desc = f"{what} Store-bound: every output is written once; u and v are reused across it."
    return c_task(
        "outer_broadcast",
        index,
        entry,
        ref,
        sig,
        four_configs(sizes, dist),
        tolerance_for(t, 4),
        impls,
        desc,
    )
