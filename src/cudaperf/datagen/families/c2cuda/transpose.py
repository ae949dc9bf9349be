"""Transpose family: out = f(in^T) for a rows x cols row-major matrix, where f is the identity,
a scale, or a scale plus a shift (drawn per task), over float, double or int elements."""

from __future__ import annotations

import random

from cudaperf.datagen.base import c_signature, c_task, cfg, family, fill, impl, prototype
from cudaperf.tasks.model import Distribution, TaskKind, Tolerance

_REF = """
/* out (cols x rows) = f(transpose of in (rows x cols)); both row-major. */
void $entry(int rows, int cols, const $t* in, $t* out) {
    for (int r = 0; r < rows; ++r)
        for (int c = 0; c < cols; ++c) {
            $t v = in[(long long)r * cols + c];
            out[(long long)c * rows + r] = $f;
        }
}
"""

_NAIVE = """
// One thread per element with threadIdx.x along $along: $note
__global__ void transpose_naive(int rows, int cols, const $t* in, $t* out) {
    long long $a = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long $b = (long long)blockIdx.y * blockDim.y + threadIdx.y;
    if (r >= rows || c >= cols) return;
    $t v = in[r * cols + c];
    out[c * rows + r] = $f;
}

$proto {
    dim3 block($bx, $by);
    dim3 grid((unsigned)(($na + $bx - 1) / $bx), (unsigned)(($nb + $by - 1) / $by));
    transpose_naive<<<grid, block>>>(rows, cols, in, out);
}
"""

_TILED = """
// $tile x $tile tiles through shared memory: rows of the tile are read coalesced from `in`
// and written coalesced to `out`; each thread moves $tile / $by elements. $note
#define TILE $tile
#define BY $by
__global__ void transpose_tiled(int rows, int cols, const $t* __restrict__ in,
                                $t* __restrict__ out) {
    __shared__ $t tile[TILE][TILE + $pad];
    int c0 = blockIdx.x * TILE, r0 = blockIdx.y * TILE;
    int tx = threadIdx.x, ty = threadIdx.y;
    for (int k = ty; k < TILE; k += BY) {
        int r = r0 + k, c = c0 + tx;
        if (r < rows && c < cols) tile[k][tx] = in[(long long)r * cols + c];
    }
    __syncthreads();
    for (int k = ty; k < TILE; k += BY) {
        int c = c0 + k, r = r0 + tx;  // output row c, column r
        if (r < rows && c < cols) {
            $t v = tile[tx][k];
            out[(long long)c * rows + r] = $f;
        }
    }
}

$proto {
    dim3 block(TILE, BY);
    dim3 grid((unsigned)((cols + TILE - 1) / TILE), (unsigned)((rows + TILE - 1) / TILE));
    transpose_tiled<<<grid, block>>>(rows, cols, in, out);
}
"""


def _f(rng: random.Random, t: str) -> tuple[str, str]:
    kind = rng.choice(["copy", "scale", "affine", "square"])
    s = rng.choice([2, 3, -1, 5]) if t == "int" else round(rng.uniform(0.5, 3.0), 3)
    lit = (lambda x: f"{x}f") if t == "float" else str
    if kind == "copy":
        return "v", "a plain transpose"
    if kind == "scale":
        return f"v * {lit(s)}", f"a transpose scaled by {s}"
    if kind == "square":
        return "v * v", "the element-wise square of the transpose"
    one = "1.0f" if t == "float" else "1"
    return f"v * {lit(s)} + {one}", f"a transpose mapped by v * {s} + 1"


@family("transpose2d", TaskKind.C2CUDA, "transpose")
def transpose2d(rng: random.Random, index: int):
    t = rng.choice(["float", "float", "double", "int"])
    f, what = _f(rng, t)
    entry = rng.choice(["transpose", "transpose_map", "mat_t", "flip_layout"])
    sig = c_signature(
        ("rows", "int", "scalar"),
        ("cols", "int", "scalar"),
        ("in", t, "in", "rows*cols"),
        ("out", t, "out", "rows*cols"),
    )
    proto = prototype(entry, sig)
    bx, by = rng.choice([(32, 8), (32, 4), (64, 4), (16, 16)])
    impls = [
        impl(
            "naive_write_strided",
            fill(
                _NAIVE,
                along="columns",
                a="c",
                b="r",
                na="cols",
                nb="rows",
                bx=bx,
                by=by,
                t=t,
                f=f,
                proto=proto,
                note="reads are coalesced, writes are a whole column apart.",
            ),
            ["naive", "uncoalesced_writes"],
        ),
        impl(
            "naive_read_strided",
            fill(
                _NAIVE,
                along="rows",
                a="r",
                b="c",
                na="rows",
                nb="cols",
                bx=bx,
                by=by,
                t=t,
                f=f,
                proto=proto,
                note="writes are coalesced, reads are a whole row apart.",
            ),
            ["naive", "uncoalesced"],
        ),
    ]
    tile, tby = rng.choice([(32, 8), (32, 4), (32, 16)])
    ways = 32 if t != "double" else 16
    impls.append(
        impl(
            "smem_tiled_conflicts",
            fill(
                _TILED,
                tile=tile,
                by=tby,
                pad=0,
                t=t,
                f=f,
                proto=proto,
                note=f"Without padding, the column read tile[tx][k] is a {ways}-way bank conflict.",
            ),
            ["smem_tiling", "coalesced", "bank_conflicts"],
        )
    )
    impls.append(
        impl(
            "smem_tiled_padded",
            fill(
                _TILED,
                tile=tile,
                by=tby,
                pad=1,
                t=t,
                f=f,
                proto=proto,
                note="One column of padding spreads the column read over all 32 banks.",
            ),
            ["smem_tiling", "coalesced", "padded"],
        )
    )
    impls = sorted(
        rng.sample(impls[:2], 1) + impls[2:] if rng.random() < 0.5 else impls, key=lambda i: i.id
    )
    big = 8192 if t != "double" else 6144
    dist = Distribution(kind="randint", low=-1000, high=1000) if t == "int" else None
    configs = [
        cfg(
            "small", {"rows": rng.randrange(33, 120), "cols": rng.randrange(33, 120)}, 1, dist=dist
        ),
        cfg("medium", {"rows": 1024, "cols": rng.choice([1024, 2048])}, 2, dist=dist),
        cfg("large", {"rows": big, "cols": big + rng.choice([0, 32, 1])}, 3, dist=dist),
        cfg(
            "heldout",
            {"rows": rng.randrange(1000, 3000), "cols": rng.randrange(1000, 3000)},
            4,
            held_out=True,
            dist=dist,
        ),
    ]
    tol = (
        Tolerance(atol=0.0, rtol=0.0) if f == "v" or t == "int" else Tolerance(atol=1e-6, rtol=1e-6)
    )
    desc = (
        f"Write {what} of a rows x cols row-major {t} matrix into out (cols x rows, "
        "row-major). Pure data movement: one access side is strided unless the transpose "
        "is staged through on-chip memory."
    )
    src = fill(_REF, entry=entry, t=t, f=f)
    return c_task("transpose2d", index, entry, src, sig, configs, tol, impls, desc)
