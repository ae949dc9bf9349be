"""2-D image filters with clamp-to-edge borders on a row-major height x width image (x
contiguous): box blur, Gaussian blur, sharpen, and Sobel gradient magnitude (L1 or L2), with
radius, weights and dtype drawn per task."""

from __future__ import annotations

import math
import random

from cudaperf.datagen.base import c_signature, c_task, family, fill, four_configs, impl, lit
from cudaperf.datagen.base import prototype as proto_of
from cudaperf.tasks.model import Distribution, TaskKind, Tolerance

_SOBEL_X = {(-1, -1): -1, (1, -1): 1, (-1, 0): -2, (1, 0): 2, (-1, 1): -1, (1, 1): 1}
_SOBEL_Y = {(-1, -1): -1, (0, -1): -2, (1, -1): -1, (-1, 1): 1, (0, 1): 2, (1, 1): 1}


def _weights(rng: random.Random, kind: str) -> tuple[int, dict[tuple[int, int], float]]:
    if kind == "box":
        r = rng.randint(1, 3)
        w = 1.0 / (2 * r + 1) ** 2
        return r, {(dx, dy): w for dx in range(-r, r + 1) for dy in range(-r, r + 1)}
    if kind == "gaussian":
        r = rng.randint(1, 2)
        sigma = rng.choice([0.6, 0.8, 1.0, 1.4])
        g = {
            (dx, dy): math.exp(-(dx * dx + dy * dy) / (2 * sigma * sigma))
            for dx in range(-r, r + 1)
            for dy in range(-r, r + 1)
        }
        s = sum(g.values())
        return r, {k: round(v / s, 5) for k, v in g.items()}
    # sharpen: centre 1 + 4a, the four neighbours -a
    a = rng.choice([0.25, 0.5, 1.0])
    return 1, {(0, 0): 1 + 4 * a, (1, 0): -a, (-1, 0): -a, (0, 1): -a, (0, -1): -a}


def _body(kind: str, weights, t: str, access, norm: str) -> str:
    """C statements that set `res` from the neighbour values `access(dx, dy)`."""
    if kind == "sobel":
        gx = " + ".join(f"{lit(w, t)} * {access(dx, dy)}" for (dx, dy), w in _SOBEL_X.items())
        gy = " + ".join(f"{lit(w, t)} * {access(dx, dy)}" for (dx, dy), w in _SOBEL_Y.items())
        sq = "sqrtf" if t == "float" else "sqrt"
        ab = "fabsf" if t == "float" else "fabs"
        mag = f"{sq}(gx * gx + gy * gy)" if norm == "l2" else f"{ab}(gx) + {ab}(gy)"
        return f"{t} gx = {gx};\n        {t} gy = {gy};\n        {t} res = {mag};"
    terms = " +\n            ".join(
        f"{lit(w, t)} * {access(dx, dy)}" for (dx, dy), w in sorted(weights.items())
    )
    return f"{t} res = {terms};"


_REF = """
#include <math.h>
static int clampi(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

/* $what: every output pixel combines the $taps pixels within radius $r, reading pixels
   outside the image from the nearest edge pixel (clamp). */
void $entry(int width, int height, const $t* in, $t* out) {
    for (int y = 0; y < height; ++y)
        for (int x = 0; x < width; ++x) {
        $body
        out[(long long)y * width + x] = res;
    }
}
"""

_NAIVE = """
__device__ __forceinline__ int clampi(int v, int lo, int hi) {
    return v < lo ? lo : (v > hi ? hi : v);
}

// One thread per pixel reading its neighbours from global memory with clamped coordinates;
// $map.
__global__ void filter_naive(int width, int height, const $t* __restrict__ in,
                             $t* __restrict__ out) {
    int x = $xi, y = $yi;
    if (x >= width || y >= height) return;
    $body
    out[(long long)y * width + x] = res;
}

$proto {
    dim3 block($bx, $by);
    dim3 grid($gx, $gy);
    filter_naive<<<grid, block>>>(width, height, in, out);
}
"""

_TILED = """
__device__ __forceinline__ int clampi(int v, int lo, int hi) {
    return v < lo ? lo : (v > hi ? hi : v);
}

// Shared-memory tile with a halo of $r pixels: the block loads (BY + 2R) x (BX + 2R) pixels
// cooperatively (coalesced along x, coordinates clamped so the halo already holds the edge
// pixels), synchronises, and computes every output from shared memory.
#define BX $bx
#define BY $by
#define R $r
__global__ void __launch_bounds__(BX * BY)
filter_tiled(int width, int height, const $t* __restrict__ in, $t* __restrict__ out) {
    __shared__ $t tile[BY + 2 * R][BX + 2 * R + $pad];
    int x0 = blockIdx.x * BX, y0 = blockIdx.y * BY;
    for (int yy = threadIdx.y; yy < BY + 2 * R; yy += BY)
        for (int xx = threadIdx.x; xx < BX + 2 * R; xx += BX) {
            int gx = clampi(x0 + xx - R, 0, width - 1), gy = clampi(y0 + yy - R, 0, height - 1);
            tile[yy][xx] = in[(long long)gy * width + gx];
        }
    __syncthreads();
    int tx = threadIdx.x, ty = threadIdx.y, x = x0 + tx, y = y0 + ty;
    if (x >= width || y >= height) return;
    $body
    out[(long long)y * width + x] = res;
}

$proto {
    dim3 block(BX, BY);
    dim3 grid((width + BX - 1) / BX, (height + BY - 1) / BY);
    filter_tiled<<<grid, block>>>(width, height, in, out);
}
"""


def _gaccess(dx: int, dy: int) -> str:
    return (
        f"in[(long long)clampi(y + {dy}, 0, height - 1) * width + clampi(x + {dx}, 0, width - 1)]"
    )


@family("image_filter2d", TaskKind.C2CUDA, "stencil")
def image_filter2d(rng: random.Random, index: int):
    t = rng.choice(["float", "float", "double"])
    kind = rng.choice(["box", "gaussian", "sharpen", "sobel"])
    norm = rng.choice(["l1", "l2"])
    if kind == "sobel":
        r, weights = 1, {}
    else:
        r, weights = _weights(rng, kind)
    what = {
        "box": f"{2 * r + 1}x{2 * r + 1} box blur",
        "gaussian": f"{2 * r + 1}x{2 * r + 1} Gaussian blur (normalised weights)",
        "sharpen": "3x3 sharpen (centre weight minus the four neighbours)",
        "sobel": "Sobel gradient magnitude "
        + ("sqrt(gx^2 + gy^2)" if norm == "l2" else "|gx| + |gy|"),
    }[kind]
    entry = rng.choice([f"{kind}_filter", f"{kind}2d", f"image_{kind}", f"apply_{kind}"])
    sig = c_signature(
        ("width", "int", "scalar"),
        ("height", "int", "scalar"),
        ("in", t, "in", "width*height"),
        ("out", t, "out", "width*height"),
    )
    prototype = proto_of(entry, sig)
    gbody = _body(kind, weights, t, _gaccess, norm)
    src = fill(
        _REF,
        what=what,
        taps=(2 * r + 1) ** 2,
        r=r,
        entry=entry,
        t=t,
        body=gbody,
    )
    impls = []
    for coalesced in (True, False):
        bx = rng.choice([16, 32, 64])
        by = max(1, rng.choice([128, 256]) // bx)
        if coalesced:
            xi, yi = (
                "blockIdx.x * blockDim.x + threadIdx.x",
                "blockIdx.y * blockDim.y + threadIdx.y",
            )
            gx, gy = f"(width + {bx} - 1) / {bx}", f"(height + {by} - 1) / {by}"
            mapping = "threadIdx.x runs along x, so a warp reads consecutive pixels"
        else:
            xi, yi = (
                "blockIdx.y * blockDim.y + threadIdx.y",
                "blockIdx.x * blockDim.x + threadIdx.x",
            )
            gx, gy = f"(height + {bx} - 1) / {bx}", f"(width + {by} - 1) / {by}"
            mapping = "threadIdx.x runs along y, so the lanes of a warp are a row apart (weak)"
        code = fill(
            _NAIVE,
            map=mapping,
            xi=xi,
            yi=yi,
            gx=gx,
            gy=gy,
            bx=bx,
            by=by,
            t=t,
            body=gbody,
            proto=prototype,
        )
        impls.append(
            impl("naive", code, ["naive", "coalesced"])
            if coalesced
            else impl("naive_uncoalesced", code, ["naive", "uncoalesced"])
        )
    bx, by = rng.choice([(32, 8), (32, 16), (64, 4), (16, 16)])

    def saccess(dx: int, dy: int) -> str:
        return f"tile[ty + {r + dy}][tx + {r + dx}]"

    impls.append(
        impl(
            "smem_tiled_halo",
            fill(
                _TILED,
                bx=bx,
                by=by,
                r=r,
                t=t,
                pad=rng.choice([0, 1]),
                proto=prototype,
                body=_body(kind, weights, t, saccess, norm),
            ),
            ["smem_tiling", "coalesced"],
        )
    )
    big = 8192 if t == "float" else 6144
    sizes = {
        "small": {"width": rng.randrange(40, 100), "height": rng.randrange(30, 80)},
        "medium": {"width": 1920, "height": 1080},
        "large": {"width": big + rng.choice([0, 7, 64]), "height": big - rng.choice([0, 3])},
        "heldout": {"width": rng.randrange(2001, 4001), "height": rng.randrange(1501, 3001)},
    }
    dist = Distribution(kind="uniform", low=0.0, high=1.0)
    tol = Tolerance(atol=2e-5, rtol=2e-5) if t == "float" else Tolerance(atol=1e-12, rtol=1e-12)
    desc = (
        f"{what[0].upper()}{what[1:]} of a width x height {t} image (row-major, x contiguous) with "
        "clamp-to-edge borders. Memory-bound; each input pixel is read by several outputs."
    )
    return c_task(
        "image_filter2d", index, entry, src, sig, four_configs(sizes, dist), tol, impls, desc
    )
