"""CUDA implementations of element-wise maps y[i] = f(x0[i], x1[i], ..., scalars).

Shared by every family whose work is one independent function per element (expression trees,
polynomial evaluation, bit manipulation). The per-element function is given as a CUDA
`__device__` function named `elem`; the strategies differ in how elements map to threads:

- `naive`: one thread per element, one launch covering n;
- `grid_stride_ilp`: a grid of a few waves, each thread handling U elements per iteration
  (U = 2..8 independent loads in flight);
- `vectorized`: 16-byte vector loads (float4 / double2 / uint4 / int4) with a scalar tail;
- `chunked_uncoalesced`: each thread walks its own contiguous chunk, so neighbouring lanes
  are a chunk apart and every load touches a different sector (deliberately weak).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from cudaperf.datagen.base import fill, impl
from cudaperf.tasks.model import Implementation

__all__ = ["MapSpec", "map_impls"]

VEC = {
    "float": ("float4", 4),
    "double": ("double2", 2),
    "int": ("int4", 4),
    "unsigned int": ("uint4", 4),
}
_LANES = ["x", "y", "z", "w"]


@dataclass(frozen=True)
class MapSpec:
    """What the generated kernels need to know about a map task."""

    entry: str  # the extern "C" function name
    proto: str  # its full prototype (from base.prototype)
    t_in: str  # element type of the input arrays
    t_out: str  # element type of the output array
    inputs: list[str]  # input array names, in signature order
    out: str  # output array name
    scalars: list[tuple[str, str]]  # (name, ctype) of extra scalars passed to elem, in order
    elem: str  # CUDA source of `__device__ ... elem(<inputs>, <scalars>)`


def _kparams(s: MapSpec) -> str:
    ins = ", ".join(f"const {s.t_in}* __restrict__ {n}" for n in s.inputs)
    sc = "".join(f", {t} {n}" for n, t in s.scalars)
    return f"int n, {ins}, {s.t_out}* __restrict__ {s.out}{sc}"


def _kargs(s: MapSpec) -> str:
    return ", ".join(["n", *s.inputs, s.out, *[n for n, _ in s.scalars]])


def _elem_call(s: MapSpec, idx: str, lane: str = "") -> str:
    acc = "".join(f"{n}{idx}{lane}, " for n in s.inputs)
    return f"elem({acc}{', '.join(n for n, _ in s.scalars)})".replace(", )", ")")


_NAIVE = """
// One thread per element; blocks of $block threads cover n.
$elem
__global__ void map_naive($kparams) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) $out[i] = $call;
}

$proto {
    int block = $block;
    if (n > 0) map_naive<<<(n + block - 1) / block, block>>>($kargs);
}
"""

_ILP = """
// Grid-stride loop with $u independent elements per thread per iteration (block-strided, so
// each of the $u loads is coalesced); the grid is capped at a few waves of the 132 SMs.
#define U $u
$elem
__global__ void __launch_bounds__($block) map_ilp($kparams) {
    long long step = (long long)gridDim.x * blockDim.x * U;
    for (long long base = (long long)blockIdx.x * blockDim.x * U + threadIdx.x; base < n;
         base += step) {
#pragma unroll
        for (int u = 0; u < U; ++u) {
            long long i = base + (long long)u * blockDim.x;
            if (i < n) $out[i] = $call;
        }
    }
}

$proto {
    int block = $block;
    long long want = ((long long)n + block * U - 1) / (block * U);
    int grid = (int)(want < 132 * $waves ? want : 132 * $waves);
    if (grid > 0) map_ilp<<<grid, block>>>($kargs);
}
"""

_VEC = """
// 16-byte vector loads and stores ($vt, $w lanes) in a grid-stride loop when every array is
// 16-byte aligned; the n % $w tail (and unaligned arrays) take a scalar loop.
#include <cstdint>
$elem
__global__ void map_vec($kparams) {
    int nv = n / $w;
    int stride = gridDim.x * blockDim.x;
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    for (int v = t; v < nv; v += stride) {
$vload        $vt vout_;
$vcompute        reinterpret_cast<$vt*>($out)[v] = vout_;
    }
    for (int i = nv * $w + t; i < n; i += stride) $out[i] = $call;
}

__global__ void map_scalar($kparams) {
    int stride = gridDim.x * blockDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) $out[i] = $call;
}

$proto {
    int block = $block;
    uintptr_t align_ = (uintptr_t)$out$align;
    int grid = (n / $w + block - 1) / block;
    if (grid > 132 * 16) grid = 132 * 16;
    if (grid < 1) grid = 1;
    if (n <= 0) return;
    if (align_ % 16 == 0) map_vec<<<grid, block>>>($kargs);
    else map_scalar<<<grid, block>>>($kargs);
}
"""

_CHUNK = """
// Each thread handles one contiguous chunk of about n / ($grid * $block) elements. Lanes of a
// warp are a whole chunk apart, so no load is coalesced (each touches its own sector).
$elem
__global__ void map_chunked($kparams) {
    int threads = gridDim.x * blockDim.x;
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int chunk = (n + threads - 1) / threads;
    int lo = t * chunk, hi = min(n, lo + chunk);
    for (int i = lo; i < hi; ++i) $out[i] = $call;
}

$proto {
    if (n > 0) map_chunked<<<$grid, $block>>>($kargs);
}
"""


def _vec_parts(s: MapSpec) -> dict[str, str]:
    vt_in, w = VEC[s.t_in]
    vt_out, w_out = VEC[s.t_out]
    assert w == w_out, "vectorised map needs equal lane counts"
    load = "".join(
        f"        {vt_in} {n}_v = reinterpret_cast<const {vt_in}*>({n})[v];\n" for n in s.inputs
    )
    comp = "".join(f"        vout_.{ln} = {_elem_call(s, '_v', '.' + ln)};\n" for ln in _LANES[:w])
    align = "".join(f" | (uintptr_t){n}" for n in s.inputs)
    return {"vt": vt_out, "w": w, "vload": load, "vcompute": comp, "align": align}


def map_impls(rng: random.Random, s: MapSpec, k: int | None = None) -> list[Implementation]:
    """3 or 4 implementations (one weak, the rest strong, in a random subset and order)."""
    common = {
        "elem": s.elem.strip(),
        "kparams": _kparams(s),
        "kargs": _kargs(s),
        "proto": s.proto,
        "out": s.out,
        "call": _elem_call(s, "[i]"),
    }
    b = lambda: rng.choice([128, 256, 512])  # noqa: E731 - one draw per template
    cands = [
        impl("naive", fill(_NAIVE, block=b(), **common), ["naive", "coalesced"]),
        impl(
            "grid_stride_ilp",
            fill(_ILP, block=b(), u=rng.choice([2, 4, 8]), waves=rng.choice([4, 8, 16]), **common),
            ["grid_stride", "unrolled", "coalesced"],
        ),
        impl(
            "chunked_uncoalesced",
            fill(_CHUNK, block=b(), grid=rng.choice([264, 528, 1056]), **common),
            ["uncoalesced"],
        ),
    ]
    if s.t_in in VEC and s.t_out in VEC:
        vec = fill(_VEC, block=b(), **common, **_vec_parts(s))
        cands.append(impl("vectorized", vec, ["vectorized", "grid_stride", "coalesced"]))
    n = k or rng.choice([3, len(cands)])
    chosen = [cands[2]] + rng.sample([c for c in cands if c.id != "chunked_uncoalesced"], n - 1)
    return sorted(chosen, key=lambda i: i.id)
