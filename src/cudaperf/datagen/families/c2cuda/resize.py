"""Image resize of a C-channel planar image (C x H x W, x contiguous) to C x OH x OW:
bilinear with half-pixel centres (source coordinate (o + 0.5) * in / out - 0.5, clamped to the
image) or nearest neighbour with integer arithmetic (source = o * in / out, exact). Scale
factors range from 4x down to 4x up."""

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

_SAMPLE_BILINEAR = """
    float fy = ((float)oy + 0.5f) * ((float)ih / (float)oh) - 0.5f;
    float fx = ((float)ox + 0.5f) * ((float)iw / (float)ow) - 0.5f;
    fy = fy < 0.0f ? 0.0f : (fy > (float)(ih - 1) ? (float)(ih - 1) : fy);
    fx = fx < 0.0f ? 0.0f : (fx > (float)(iw - 1) ? (float)(iw - 1) : fx);
    int y0 = (int)fy, x0 = (int)fx;
    int y1 = y0 + 1 < ih ? y0 + 1 : ih - 1, x1 = x0 + 1 < iw ? x0 + 1 : iw - 1;
    $t wy = ($t)(fy - (float)y0), wx = ($t)(fx - (float)x0);
    const $t* p = src + (long long)c * ih * iw;
    $t top = p[(long long)y0 * iw + x0] * (1 - wx) + p[(long long)y0 * iw + x1] * wx;
    $t bot = p[(long long)y1 * iw + x0] * (1 - wx) + p[(long long)y1 * iw + x1] * wx;
    return top * (1 - wy) + bot * wy;
"""

# The same arithmetic with explicitly rounded operations, so no multiply-add is fused and the
# source coordinates match the C reference bit for bit (a fused one can move a coordinate by
# an ulp of ~1e-4 at these image sizes).
_SAMPLE_BILINEAR_RN = """
    float fy = __fadd_rn(__fmul_rn(__fadd_rn((float)oy, 0.5f), (float)ih / (float)oh), -0.5f);
    float fx = __fadd_rn(__fmul_rn(__fadd_rn((float)ox, 0.5f), (float)iw / (float)ow), -0.5f);
    fy = fy < 0.0f ? 0.0f : (fy > (float)(ih - 1) ? (float)(ih - 1) : fy);
    fx = fx < 0.0f ? 0.0f : (fx > (float)(iw - 1) ? (float)(iw - 1) : fx);
    int y0 = (int)fy, x0 = (int)fx;
    int y1 = y0 + 1 < ih ? y0 + 1 : ih - 1, x1 = x0 + 1 < iw ? x0 + 1 : iw - 1;
    $t wy = ($t)(fy - (float)y0), wx = ($t)(fx - (float)x0);
    const $t* p = src + (long long)c * ih * iw;
    $t top = p[(long long)y0 * iw + x0] * (1 - wx) + p[(long long)y0 * iw + x1] * wx;
    $t bot = p[(long long)y1 * iw + x0] * (1 - wx) + p[(long long)y1 * iw + x1] * wx;
    return top * (1 - wy) + bot * wy;
"""

_SAMPLE_NEAREST = """
    int y = (int)((long long)oy * ih / oh), x = (int)((long long)ox * iw / ow);
    return src[((long long)c * ih + y) * iw + x];
"""

_REF = """
static $t sample(const $t* src, int ih, int iw, int oh, int ow, int c, int oy, int ox) {
$sample}

/* $what */
void $entry(int ih, int iw, int oh, int ow, const $t* in, $t* out) {
    for (int c = 0; c < $nc; ++c)
        for (int oy = 0; oy < oh; ++oy)
            for (int ox = 0; ox < ow; ++ox) {
                $t v = sample(in, ih, iw, oh, ow, c, oy, ox);
                out[((long long)c * oh + oy) * ow + ox] = $post(v);
            }
}
"""

_HEAD = """
#define T $t
#define NC $nc
__device__ __forceinline__ T sample(const T* __restrict__ src, int ih, int iw, int oh, int ow,
                                    int c, int oy, int ox) {
$sample}
"""

_NAIVE = """
// One thread per output pixel (all channels of it), $map.
__global__ void resize_naive(int ih, int iw, int oh, int ow, const T* __restrict__ in, T* out) {
    int ox = $xi, oy = $yi;
    if (ox >= ow || oy >= oh) return;
    for (int c = 0; c < NC; ++c)
        out[((long long)c * oh + oy) * ow + ox] = $post(sample(in, ih, iw, oh, ow, c, oy, ox));
}

$proto {
    dim3 block($bx, $by);
    dim3 grid($gx, $gy);
    resize_naive<<<grid, block>>>(ih, iw, oh, ow, in, out);
}
"""

_CHANNEL_GRID = """
// One thread per output value, channels on blockIdx.z, in a grid-stride loop over rows of
// the output (coalesced stores, more parallelism for few channels).
__global__ void __launch_bounds__($block) resize_cgrid(int ih, int iw, int oh, int ow,
                                                     const T* __restrict__ in, T* out) {
    int c = blockIdx.z;
    for (int oy = blockIdx.y; oy < oh; oy += gridDim.y)
        for (int ox = blockIdx.x * $block + threadIdx.x; ox < ow; ox += gridDim.x * $block)
            out[((long long)c * oh + oy) * ow + ox] = $post(sample(in, ih, iw, oh, ow, c, oy, ox));
}

$proto {
    unsigned gx = (unsigned)((ow + $block - 1) / $block);
    unsigned gy = (unsigned)(oh < $maxy ? oh : $maxy);
    resize_cgrid<<<dim3(gx, gy, NC), $block>>>(ih, iw, oh, ow, in, out);
}
"""

_ROWS = """
// One thread per output row (all channels): lanes are a row apart, so no store is coalesced,
// and only oh threads run (deliberately weak).
__global__ void resize_rows(int ih, int iw, int oh, int ow, const T* in, T* out) {
    int oy = blockIdx.x * blockDim.x + threadIdx.x;
    if (oy >= oh) return;
    for (int c = 0; c < NC; ++c)
        for (int ox = 0; ox < ow; ++ox)
            out[((long long)c * oh + oy) * ow + ox] = $post(sample(in, ih, iw, oh, ow, c, oy, ox));
}

$proto {
    if (oh > 0) resize_rows<<<(oh + $block - 1) / $block, $block>>>(ih, iw, oh, ow, in, out);
}
"""


@family("resize2d", TaskKind.C2CUDA, "image")
def resize2d(rng: random.Random, index: int):
    t = rng.choice(["float", "float", "int"]) if rng.random() < 0.3 else "float"
    mode = "nearest" if t == "int" else rng.choice(["bilinear", "bilinear", "nearest"])
    nc = rng.choice([1, 1, 3, 4])
    fy, fx = rng.choice([(2, 2), (0.5, 0.5), (4, 4), (0.25, 0.25), (1.5, 1.5), (2, 0.5), (3, 3)])
    post = ""
    if t != "int" and rng.random() < 0.4:
        post = rng.choice(["2.0f * ", "0.5f * ", "-1.0f * "])
    sample = fill(_SAMPLE_BILINEAR if mode == "bilinear" else _SAMPLE_NEAREST, t=t)
    scale = {"": "", "2.0f * ": " times 2", "0.5f * ": " times 0.5", "-1.0f * ": " negated"}[post]
    what = (
        f"Resize a {nc}-channel planar {t} image (ih x iw per channel) to oh x ow with "
        + (
            "bilinear interpolation (half-pixel centres, source coordinates clamped to the "
            "image, computed in float as in the code)"
            if mode == "bilinear"
            else "nearest-neighbour sampling (source y = oy * ih / oh, x = ox * iw / ow, integer "
            "division)"
        )
        + f"{scale}."
    )
    entry = rng.choice([f"resize_{mode}", f"{mode}_resize", "resize_image", "scale_image"])
    sig = c_signature(
        ("ih", "int", "scalar"),
        ("iw", "int", "scalar"),
        ("oh", "int", "scalar"),
        ("ow", "int", "scalar"),
        ("in", t, "in", f"{nc}*ih*iw", "partial"),  # downscaling skips pixels
        ("out", t, "out", f"{nc}*oh*ow"),
    )
    post_c = f"({t})" + post if post else ""
    ref = fill(_REF, what=what, entry=entry, t=t, nc=nc, sample=sample, post=post_c)
    head = fill(
        _HEAD,
        t=t,
        nc=nc,
        sample=fill(_SAMPLE_BILINEAR_RN if mode == "bilinear" else _SAMPLE_NEAREST, t="T"),
    )
    proto = prototype(entry, sig)
    bx = rng.choice([32, 64, 128])
    by = max(1, 256 // bx)
    coal = dict(
        xi="blockIdx.x * blockDim.x + threadIdx.x",
        yi="blockIdx.y * blockDim.y + threadIdx.y",
        gx=f"(ow + {bx} - 1) / {bx}",
        gy=f"(oh + {by} - 1) / {by}",
        map="threadIdx.x along x (coalesced stores)",
    )
    impls = [
        impl(
            "naive",
            head + fill(_NAIVE, bx=bx, by=by, proto=proto, post=post_c, **coal),
            ["naive", "coalesced"],
        ),
        impl(
            "channel_grid",
            head
            + fill(
                _CHANNEL_GRID,
                block=rng.choice([128, 256]),
                maxy=rng.choice([256, 1024, 4096]),
                proto=proto,
                post=post_c,
            ),
            ["grid_stride", "coalesced"],
        ),
        impl(
            "thread_per_row",
            head + fill(_ROWS, block=rng.choice([32, 64, 128]), proto=proto, post=post_c),
            ["naive", "uncoalesced"],
        ),
    ]
    out_px = int(2.4e8 * min(1.0, fx * fy) / (4 * nc))  # >= 240 MB on the larger side

    def shape(opix: int) -> dict[str, int]:
        oh = int((opix * fy / fx) ** 0.5)
        ow = max(1, opix // max(1, oh))
        return {"ih": max(2, int(oh / fy)), "iw": max(2, int(ow / fx)), "oh": oh, "ow": ow}

    sizes = {
        "small": shape(rng.randrange(500, 3000)),
        "medium": shape(1 << 20),
        "large": shape(out_px),
        "heldout": shape(rng.randrange(2_000_000, 5_000_000)),
    }
    for s in sizes.values():  # odd sizes: the scale is then not exactly fy, fx
        s["iw"] += rng.choice([0, 1])
    dist = (
        Distribution(kind="randint", low=-1000, high=1000)
        if t == "int"
        else Distribution(kind="uniform", low=0.5, high=1.5)
    )
    tol = Tolerance(atol=0.0, rtol=0.0) if mode == "nearest" else tolerance_for("float", 64)
    desc = f"{what} Memory-bound gather with data reuse between neighbouring outputs."
    return c_task("resize2d", index, entry, ref, sig, four_configs(sizes, dist), tol, impls, desc)
