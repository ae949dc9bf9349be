"""Stencil families (1D, 2D, 3D): a star stencil of radius r with per-offset weights drawn per
task; points closer than r to a border are copied unchanged. Arrays are row-major with the
last dimension (x) contiguous: idx = (z * ny + y) * nx + x."""

from __future__ import annotations

import random

from cudaperf.datagen.base import c_signature, c_task, family, fill, four_configs, impl, lit
from cudaperf.datagen.base import prototype as proto_of
from cudaperf.datagen.exprs import expr_tree
from cudaperf.tasks.model import Distribution, TaskKind, Tolerance


def _update(rng: random.Random, t: str) -> tuple[str, str]:
    """The point update u(c, s) from the centre value c and the weighted sum s: the plain sum,
    a relaxation step c + w * (s - c), or an expression drawn from the vocabulary."""
    k = rng.random()
    if k < 0.3:
        return "s", "the weighted sum s"
    if k < 0.6:
        w = lit(rng.choice([0.5, 0.6, 0.8, 1.2, 1.5]), t)
        return f"c + {w} * (s - c)", f"the relaxation c + {w} * (s - c) (c the centre)"
    e = expr_tree(rng, ["c", "s"], rng.choice([1, 2]), t)
    return e, f"u(c, s) = {e} (c the centre, s the weighted sum)"


_AXES = ["x", "y", "z"]


def _terms(rng: random.Random, dims: int, r: int, t: str) -> list[tuple[float, tuple[int, ...]]]:
    """(weight, (dx, dy, dz)) for the centre and every star offset, weights summing to ~1."""
    terms = [(round(rng.uniform(0.2, 0.5), 3), (0, 0, 0))]
    for ax in range(dims):
        for d in [*range(-r, 0), *range(1, r + 1)]:
            off = [0, 0, 0]
            off[ax] = d
            w = round(rng.uniform(0.02, 0.6) / (abs(d) * dims * r), 4)
            terms.append((w, tuple(off)))
    return terms


def _expr(terms, t: str, access) -> str:
    """Weighted sum with `access(dx, dy, dz)` giving each neighbour's C expression."""
    return " +\n            ".join(f"{lit(w, t)} * {access(*o)}" for w, o in terms)


_REF = """
/* Star stencil of radius $r: every point at least $r away from each border becomes the update
   of its value and the weighted sum of itself and its $nb neighbours along the axes; border
   points are copied. */
void $entry($params) {
    for (long long z = 0; z < $nz; ++z)
    for (long long y = 0; y < $ny; ++y)
    for (long long x = 0; x < nx; ++x) {
        long long i = (z * $ny + y) * nx + x;
        if ($inner) {
            out[i] = $expr;
        } else {
            out[i] = in[i];
        }
    }
}
"""

_NAIVE = """
// One thread per point; $map. Neighbours are read straight from global memory (L1/L2 catch
// the reuse).
__global__ void stencil_naive($kparams) {
    long long x = $xi, y = $yi, z = $zi;
    if (x >= nx || y >= $ny || z >= $nz) return;
    long long i = (z * $ny + y) * nx + x;
    if ($inner) {
        out[i] = $expr;
    } else {
        out[i] = in[i];
    }
}

$proto {
    dim3 block($bx, $by, 1);
    dim3 grid($gx, $gy, $gz);
    stencil_naive<<<grid, block>>>($kargs);
}
"""

_TILED = """
// Shared-memory tiling: a block of $bx x $by threads loads its tile plus a halo of $r points
// (cooperatively, coalesced along x) once, synchronises, and computes every output from
// shared memory, so each input is read from global memory about once per block. $zloop
#define BX $bx
#define BY $by
#define R $r
__global__ void __launch_bounds__(BX * BY) stencil_tiled($kparams) {
    __shared__ $t tile[BY + 2 * R * $has_y][BX + 2 * R];
    long long x0 = (long long)blockIdx.x * BX, y0 = (long long)blockIdx.y * BY;
    long long z = blockIdx.z;
    int ty = threadIdx.y, tx = threadIdx.x;
    for (int yy = ty; yy < BY + 2 * R * $has_y; yy += BY)
        for (int xx = tx; xx < BX + 2 * R; xx += BX) {
            long long gx = x0 + xx - R, gy = y0 + yy - R * $has_y;
            bool ok = gx >= 0 && gx < nx && gy >= 0 && gy < $ny;
            tile[yy][xx] = ok ? in[(z * $ny + gy) * nx + gx] : ($t)0;
        }
    __syncthreads();
    long long x = x0 + tx, y = y0 + ty;
    if (x >= nx || y >= $ny) return;
    long long i = (z * $ny + y) * nx + x;
    if ($inner) {
        out[i] = $sexpr;
    } else {
        out[i] = in[i];
    }
}

$proto {
    dim3 block(BX, BY, 1);
    dim3 grid((unsigned)((nx + BX - 1) / BX), (unsigned)(($ny + BY - 1) / BY), (unsigned)($nz));
    stencil_tiled<<<grid, block>>>($kargs);
}
"""


_CHUNK1D = """
// Each thread computes $k consecutive outputs; lanes of a warp are $k elements apart, so
// every load instruction touches many sectors (deliberately weak coarsening).
__global__ void stencil_chunked($kparams) {
    long long x0 = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * $k;
    for (long long x = x0; x < x0 + $k && x < nx; ++x) {
        long long i = x;
        if ($inner) {
            out[i] = $expr;
        } else {
            out[i] = in[i];
        }
    }
}

$proto {
    long long threads = ((long long)nx + $k - 1) / $k;
    stencil_chunked<<<(unsigned)((threads + $block - 1) / $block), $block>>>($kargs);
}
"""


def _dims_info(dims: int):
    ny = "ny" if dims >= 2 else "1"
    nz = "nz" if dims == 3 else "1"
    return ny, nz


def _inner(dims: int, r: int) -> str:
    parts = [f"x >= {r} && x < nx - {r}"]
    if dims >= 2:
        parts.append(f"y >= {r} && y < ny - {r}")
    if dims == 3:
        parts.append(f"z >= {r} && z < nz - {r}")
    return " && ".join(parts)


def _global_access(dx: int, dy: int, dz: int) -> str:
    return f"in[i + ({dz}LL * ny + {dy}) * nx + {dx}]".replace("(0LL * ny + 0) * nx + ", "")


def _sizes(rng: random.Random, dims: int, esize: int) -> dict[str, dict[str, int]]:
    if dims == 1:
        big = (1 << 26) if esize == 4 else (1 << 25)
        return {
            "small": {"nx": rng.randrange(500, 3000)},
            "medium": {"nx": 1 << 20},
            "large": {"nx": big + rng.randrange(0, 999)},
            "heldout": {"nx": rng.randrange(3_000_001, 9_000_000)},
        }
    if dims == 2:
        big = 8192 if esize == 4 else 6144
        return {
            "small": {"nx": rng.randrange(40, 90), "ny": rng.randrange(30, 70)},
            "medium": {"nx": 1024, "ny": 1024},
            "large": {"nx": big + rng.choice([0, 1, 64]), "ny": big},
            "heldout": {"nx": rng.randrange(2001, 3001), "ny": rng.randrange(1999, 2999)},
        }
    big = 448 if esize == 4 else 352
    return {
        "small": {"nx": rng.randrange(12, 30), "ny": rng.randrange(10, 24), "nz": 11},
        "medium": {"nx": 128, "ny": 128, "nz": 128},
        "large": {"nx": big + rng.choice([0, 1, 32]), "ny": big, "nz": big},
        "heldout": {"nx": rng.randrange(200, 260), "ny": 201, "nz": rng.randrange(150, 200)},
    }


def _stencil(rng: random.Random, index: int, dims: int):
    fam = f"stencil{dims}d"
    t = rng.choice(["float", "float", "double"])
    r = rng.randint(1, 4 if dims == 1 else (3 if dims == 2 else 2))
    terms = _terms(rng, dims, r, t)
    ny, nz = _dims_info(dims)
    entry = rng.choice([f"stencil{dims}d_r{r}", f"star{dims}d", f"relax{dims}d", f"smooth{dims}d"])
    scal = [(n, "long long" if False else "int", "scalar") for n in ["nx", "ny", "nz"][:dims]]
    length = "*".join(["nx", "ny", "nz"][:dims])
    sig = c_signature(*scal, ("in", t, "in", length), ("out", t, "out", length))
    params = ", ".join(p.c_decl() for p in sig)
    uname = rng.choice(["update", "upd", "point_rule", "combine"])
    uexpr, utxt = _update(rng, t)
    expr = f"{uname}(in[i], {_expr(terms, t, _global_access)})"
    inner = _inner(dims, r)
    src = fill(
        _REF,
        entry=entry,
        params=params,
        r=r,
        nb=len(terms) - 1,
        ny=ny,
        nz=nz,
        inner=inner,
        expr=expr,
    )
    kparams = params.replace(f"const {t}* in", f"const {t}* __restrict__ in")
    kargs = ", ".join(p.name for p in sig)
    prototype = proto_of(entry, sig)
    impls = [_naive(rng, dims, t, kparams, kargs, prototype, inner, expr, ny, nz, coalesced=True)]
    if dims >= 2:
        impls.append(_naive(rng, dims, t, kparams, kargs, prototype, inner, expr, ny, nz, False))
    else:
        impls.append(
            impl(
                "chunked_uncoalesced",
                fill(
                    _CHUNK1D,
                    k=rng.choice([8, 16, 32]),
                    block=rng.choice([128, 256]),
                    kparams=kparams,
                    kargs=kargs,
                    proto=prototype,
                    inner=inner,
                    expr=expr,
                ),
                ["uncoalesced"],
            )
        )
    impls.append(_tiled(rng, dims, r, t, terms, kparams, kargs, prototype, inner, ny, nz, uname))
    ufun = f"{t} {uname}({t} c, {t} s) {{ return {uexpr}; }}\n"
    impls = [
        i.model_copy(update={"code": "__device__ __forceinline__ " + ufun + i.code}) for i in impls
    ]
    cut = src.index("*/") + 3
    src = src[:cut] + "#include <math.h>\nstatic " + ufun + src[cut:]
    esize = 8 if t == "double" else 4
    normal = Distribution(kind="normal", mean=1.0, std=0.5)
    tol = Tolerance(atol=1e-5, rtol=1e-5) if t == "float" else Tolerance(atol=1e-12, rtol=1e-12)
    axes = [sig[k].name for k in range(dims)]
    desc = (
        f"One step of a {dims}-D star stencil of radius {r} on a {t} grid ({' x '.join(axes)}, x "
        f"contiguous): interior points become {utxt}, s a fixed weighted sum of "
        f"{len(terms)} points; "
        "border points are copied. Memory-bound; each input is needed by several outputs."
    )
    return c_task(
        fam,
        index,
        entry,
        src,
        sig,
        four_configs(_sizes(rng, dims, esize), None, normal),
        tol,
        impls,
        desc,
    )


def _naive(rng, dims, t, kparams, kargs, prototype, inner, expr, ny, nz, coalesced):
    bx = rng.choice([32, 64, 128, 256]) if dims > 1 else rng.choice([128, 256, 512])
    by = 1 if dims == 1 else max(1, rng.choice([128, 256]) // bx)
    if coalesced:
        xi, yi = (
            "(long long)blockIdx.x * blockDim.x + threadIdx.x",
            ("(long long)blockIdx.y * blockDim.y + threadIdx.y"),
        )
        gx, gy = f"(unsigned)((nx + {bx} - 1) / {bx})", f"(unsigned)(({ny} + {by} - 1) / {by})"
        mapping = "threadIdx.x runs along x, so a warp reads consecutive addresses"
    else:  # threadIdx.x runs along y: lanes are a whole row apart
        xi, yi = (
            "(long long)blockIdx.y * blockDim.y + threadIdx.y",
            ("(long long)blockIdx.x * blockDim.x + threadIdx.x"),
        )
        gx, gy = f"(unsigned)(({ny} + {bx} - 1) / {bx})", f"(unsigned)((nx + {by} - 1) / {by})"
        mapping = (
            "threadIdx.x runs along y, so the lanes of a warp are a row apart and no "
            "load is coalesced (deliberately weak)"
        )
    code = fill(
        _NAIVE,
        map=mapping,
        kparams=kparams,
        kargs=kargs,
        proto=prototype,
        xi=xi,
        yi=yi,
        zi="blockIdx.z",
        ny=ny,
        nz=nz,
        inner=inner,
        expr=expr,
        bx=bx,
        by=by,
        gx=gx,
        gy=gy,
        gz=f"(unsigned)({nz})",
    )
    if coalesced:
        return impl("naive", code, ["naive", "coalesced"])
    return impl("naive_uncoalesced", code, ["naive", "uncoalesced"])


def _tiled(rng, dims, r, t, terms, kparams, kargs, prototype, inner, ny, nz, uname):
    has_y = 1 if dims >= 2 else 0
    bx = rng.choice([32, 64]) if dims > 1 else rng.choice([128, 256, 512])
    by = rng.choice([4, 8, 16]) if dims > 1 else 1

    def access(dx: int, dy: int, dz: int) -> str:
        if dz:
            return f"in[i + {dz}LL * ny * nx]"
        return f"tile[ty + {r * has_y + dy}][tx + {r + dx}]"

    zloop = (
        "The z neighbours are read from global memory (L2 holds the previous planes)."
        if dims == 3
        else ""
    )
    code = fill(
        _TILED,
        bx=bx,
        by=by,
        r=r,
        t=t,
        has_y=has_y,
        kparams=kparams,
        kargs=kargs,
        proto=prototype,
        inner=inner,
        sexpr=f"{uname}(tile[ty + {r * has_y}][tx + {r}], {_expr(terms, t, access)})",
        ny=ny,
        nz=nz,
        zloop=zloop,
    )
    return impl("smem_tiled", code, ["smem_tiling", "coalesced"])


@family("stencil1d", TaskKind.C2CUDA, "stencil")
def stencil1d(rng: random.Random, index: int):
    return _stencil(rng, index, 1)


@family("stencil2d", TaskKind.C2CUDA, "stencil")
def stencil2d(rng: random.Random, index: int):
    return _stencil(rng, index, 2)


@family("stencil3d", TaskKind.C2CUDA, "stencil")
def stencil3d(rng: random.Random, index: int):
    return _stencil(rng, index, 3)
