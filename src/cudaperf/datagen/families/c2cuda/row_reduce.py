"""Row-wise reductions of a row-major matrix: sum / sum of squares / mean / max / min /
argmax / argmin of every row (one output per row). Arg-reductions break ties by the smallest
index, so every implementation is deterministic and exact."""

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

# op -> (element value, "a better than or combined with b" kind, final from (v, i), what)
_OPS = {
    "sum": ("v", "add", "p.v", "the sum"),
    "sumsq": ("v * v", "add", "p.v", "the sum of squares"),
    "mean": ("v", "add", "p.v / (ACC)cols", "the mean"),
    "max": ("v", "max", "p.v", "the maximum"),
    "min": ("v", "min", "p.v", "the minimum"),
    "argmax": ("v", "max", "p.i", "the index of the maximum (first one on ties)"),
    "argmin": ("v", "min", "p.i", "the index of the minimum (first one on ties)"),
}

_COMB = {
    "add": "P r; r.v = a.v + b.v; r.i = 0; return r;",
    "max": "return (a.v > b.v || (a.v == b.v && a.i < b.i)) ? a : b;",
    "min": "return (a.v < b.v || (a.v == b.v && a.i < b.i)) ? a : b;",
}

_REF = """
/* For every row r of the rows x cols row-major matrix x: out[r] = $what of the row. */
void $entry(int rows, int cols, const $t* x, $tout* out) {
    for (int r = 0; r < rows; ++r) {
        const $t* xr = x + (long long)r * cols;
        $racc best = $rinit;
        int bi = 0;
        for (int j = 0; j < cols; ++j) {
            $racc v = ($racc)xr[j];
            $rstep
        }
        (void)bi;
        out[r] = ($tout)($rfinal);
    }
}
"""

_HEAD = """
#include <climits>
#include <cfloat>
#define ACC $acc
struct P { ACC v; int i; };
__device__ __forceinline__ P mk(ACC v, int i) { P p; p.v = v; p.i = i; return p; }
__device__ __forceinline__ P comb(P a, P b) { $comb }
__device__ __forceinline__ P ident() { return mk($ident, INT_MAX); }
__device__ __forceinline__ P elem(const $t* xr, int j) { ACC v = (ACC)xr[j]; return mk($pre, j); }
__device__ __forceinline__ P shfl_comb(P p, int off) {
    P o;
    o.v = __shfl_xor_sync(0xffffffffu, p.v, off);
    o.i = __shfl_xor_sync(0xffffffffu, p.i, off);
    return comb(p, o);
}
__device__ __forceinline__ $tout finish(P p, int cols) { return ($tout)($final); }
"""

_THREAD = """
// One thread per row walks the row sequentially: the lanes of a warp are a whole row apart,
// so every load touches its own sector, and only `rows` threads work (deliberately weak).
__global__ void row_reduce(int rows, int cols, const $t* x, $tout* out) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const $t* xr = x + (long long)r * cols;
    P p = ident();
    for (int j = 0; j < cols; ++j) p = comb(p, elem(xr, j));
    out[r] = finish(p, cols);
}

$proto {
    if (rows > 0) row_reduce<<<(rows + $block - 1) / $block, $block>>>(rows, cols, x, out);
}
"""

_WARP = """
// One warp per row ($wpb warps per block): lanes read consecutive elements (coalesced), each
// keeps a partial result, and a butterfly of shuffles combines the 32 partials.
__global__ void __launch_bounds__($wpb * 32)
row_reduce(int rows, int cols, const $t* __restrict__ x, $tout* __restrict__ out) {
    int r = blockIdx.x * $wpb + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (r >= rows) return;  // whole warps leave together: r is uniform within a warp
    const $t* xr = x + (long long)r * cols;
    P p = ident();
    for (int j = lane; j < cols; j += 32) p = comb(p, elem(xr, j));
    for (int off = 16; off > 0; off >>= 1) p = shfl_comb(p, off);
    if (lane == 0) out[r] = finish(p, cols);
}

$proto {
    if (rows > 0) row_reduce<<<(rows + $wpb - 1) / $wpb, $wpb * 32>>>(rows, cols, x, out);
}
"""

_BLOCK = """
// One block of $block threads per row: coalesced block-strided loads, warp shuffles, then the
// per-warp results combined by the first warp through shared memory (good for long rows).
__global__ void __launch_bounds__($block)
row_reduce(int cols, const $t* __restrict__ x, $tout* __restrict__ out) {
    __shared__ ACC sv[$block / 32];
    __shared__ int si[$block / 32];
    const $t* xr = x + (long long)blockIdx.x * cols;
    P p = ident();
    for (int j = threadIdx.x; j < cols; j += $block) p = comb(p, elem(xr, j));
    for (int off = 16; off > 0; off >>= 1) p = shfl_comb(p, off);
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (lane == 0) { sv[warp] = p.v; si[warp] = p.i; }
    __syncthreads();
    if (warp == 0) {
        p = lane < $block / 32 ? mk(sv[lane], si[lane]) : ident();
        for (int off = 16; off > 0; off >>= 1) p = shfl_comb(p, off);
        if (lane == 0) out[blockIdx.x] = finish(p, cols);
    }
}

$proto {
    if (rows > 0) row_reduce<<<rows, $block>>>(cols, x, out);
}
"""


@family("reduce_rows", TaskKind.C2CUDA, "reduction")
def reduce_rows(rng: random.Random, index: int):
    t = rng.choice(["float", "float", "double", "int"])
    ops = [o for o in _OPS if not (t == "int" and o in ("sum", "sumsq", "mean"))]
    op = rng.choice(ops)
    pre, kind, final, what = _OPS[op]
    is_arg = op.startswith("arg")
    tout = "int" if is_arg else t
    acc = t if kind != "add" else t  # GPU accumulates in the element type
    big = {"int": "INT_MAX", "float": "FLT_MAX", "double": "DBL_MAX"}[t]
    ident = {"add": "(ACC)0", "max": f"-{big}" if t != "int" else "INT_MIN", "min": big}[kind]
    racc = "double" if t != "int" else "int"
    rinit = {"add": "0", "max": "-1.0e308" if t != "int" else "-2147483647 - 1"}.get(
        kind, "1.0e308" if t != "int" else "2147483647"
    )
    cmp = {"max": ">", "min": "<"}.get(kind)
    rstep = (
        f"best += {pre};"
        if kind == "add"
        else f"if (v {cmp} best || j == 0) {{ best = v; bi = j; }}"
    )
    rfinal = {"p.v": "best", "p.i": "bi", "p.v / (ACC)cols": "best / (double)cols"}[final]
    entry = rng.choice([f"row_{op}", f"rows_{op}", f"matrix_row_{op}", f"{op}_per_row"])
    sig = c_signature(
        ("rows", "int", "scalar"),
        ("cols", "int", "scalar"),
        ("x", t, "in", "rows*cols"),
        ("out", tout, "out", "rows"),
    )
    ref = fill(
        _REF,
        entry=entry,
        what=what,
        t=t,
        tout=tout,
        racc=racc,
        rinit=rinit,
        rstep=rstep,
        rfinal=rfinal,
    )
    common = dict(
        t=t,
        tout=tout,
        acc=acc,
        comb=_COMB[kind],
        ident=ident,
        pre=pre,
        final=final,
        proto=prototype(entry, sig),
    )
    head = fill(_HEAD, **common)
    impls = [
        impl(
            "thread_per_row",
            head + fill(_THREAD, block=rng.choice([64, 128, 256]), **common),
            ["naive", "uncoalesced"],
        ),
        impl(
            "warp_per_row",
            head + fill(_WARP, wpb=rng.choice([4, 8]), **common),
            ["warp_shuffle", "coalesced"],
        ),
        impl(
            "block_per_row",
            head + fill(_BLOCK, block=rng.choice([128, 256, 512]), **common),
            ["warp_shuffle", "smem_reduction", "coalesced"],
        ),
    ]
    esize = 8 if t == "double" else 4
    shapes = [(65536, 1024), (8192, 8192), (1024, 65536), (16384, 4096)]
    lr, lc = rng.choice(shapes)
    if esize == 8:
        lr //= 2
    sizes = {
        "small": {"rows": rng.randrange(5, 40), "cols": rng.randrange(100, 900)},
        "medium": {"rows": rng.choice([1024, 4096]), "cols": rng.choice([256, 1000, 2048])},
        "large": {"rows": lr, "cols": lc},
        "heldout": {"rows": rng.randrange(700, 3000), "cols": rng.randrange(1001, 9000)},
    }
    if t == "int":
        dist = Distribution(kind="randint", low=-100000, high=100000)
        tol = Tolerance(atol=0.0, rtol=0.0)
    elif kind == "add":
        dist = Distribution(kind="uniform", low=0.25, high=1.75)
        base = tolerance_for(t, max(s["cols"] for s in sizes.values()) * 4)
        tol = Tolerance(atol=base.atol, rtol=base.rtol + (2e-5 if t == "float" else 0.0))
    else:
        dist = Distribution(kind="normal", mean=0.5, std=2.0)
        tol = Tolerance(atol=0.0, rtol=0.0)
    desc = (
        f"For each row of a rows x cols row-major {t} matrix, {what} of the row, written to "
        f"out[row] ({tout}). "
        + ("Values are compared exactly. " if tol.rtol == 0 else "")
        + "Rows are independent; the matrix shape ranges from tall and narrow to short and wide."
    )
    return c_task(
        "reduce_rows", index, entry, ref, sig, four_configs(sizes, dist), tol, impls, desc
    )
