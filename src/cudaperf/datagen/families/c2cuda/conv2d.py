"""Multi-channel 2D convolution (a CNN layer without batching): in is C x H x W, w is
F x C x K x K, out is F x H x W with zero padding ("same" size), out[f] = bias[f] +
sum over c, dy, dx of w[f][c][dy][dx] * in[c][y + dy - R][x + dx - R]. K = 3 or 5, channel
counts, the bias and the dtype vary."""

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
from cudaperf.tasks.model import Distribution, TaskKind

_REF = """
/* $what */
void $entry(int height, int width, const $t* in, const $t* w, const $t* bias, $t* out) {
    for (int f = 0; f < $nf; ++f)
    for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) {
        $t acc = bias[f];
        for (int c = 0; c < $nc; ++c)
        for (int dy = 0; dy < $k; ++dy) {
            int sy = y + dy - $r;
            if (sy < 0 || sy >= height) continue;
            for (int dx = 0; dx < $k; ++dx) {
                int sx = x + dx - $r;
                if (sx < 0 || sx >= width) continue;
                acc += w[((f * $nc + c) * $k + dy) * $k + dx] *
                       in[((long long)c * height + sy) * width + sx];
            }
        }
        out[((long long)f * height + y) * width + x] = acc;
    }
}
"""

_HEAD = """
#define T $t
#define NF $nf
#define NC $nc
#define K $k
#define R $r
"""

_NAIVE = """
// One thread per output value (x fastest, then y; blockIdx.z = output channel); inputs and
// weights come from global memory through the caches.
__global__ void conv_naive(int height, int width, const T* __restrict__ in,
                           const T* __restrict__ w, const T* __restrict__ bias, T* out) {
    int x = $xi, y = $yi, f = blockIdx.z;
    if (x >= width || y >= height) return;
    T acc = bias[f];
    for (int c = 0; c < NC; ++c)
        for (int dy = 0; dy < K; ++dy) {
            int sy = y + dy - R;
            if (sy < 0 || sy >= height) continue;
            for (int dx = 0; dx < K; ++dx) {
                int sx = x + dx - R;
                if (sx < 0 || sx >= width) continue;
                acc += w[((f * NC + c) * K + dy) * K + dx] *
                       in[((long long)c * height + sy) * width + sx];
            }
        }
    out[((long long)f * height + y) * width + x] = acc;
}

$proto {
    dim3 block($bx, $by);
    dim3 grid($gx, $gy, NF);
    conv_naive<<<grid, block>>>(height, width, in, w, bias, out);
}
"""

_TILED = """
// Shared-memory tiles with register blocking over output channels: a block of BX x BY
// threads stages one input channel's tile plus a halo of R (coalesced, zero outside the
// image) and that channel's weights for FB output channels, then every thread accumulates FB
// outputs at its pixel; the channel loop repeats this NC times.
#define BX $bx
#define BY $by
#define FB $fb
__global__ void __launch_bounds__(BX * BY) conv_tiled(int height, int width,
                                                      const T* __restrict__ in,
                                                      const T* __restrict__ w,
                                                      const T* __restrict__ bias, T* out) {
    __shared__ T tile[BY + 2 * R][BX + 2 * R];
    __shared__ T sw[FB][K * K];
    int tx = threadIdx.x, ty = threadIdx.y, tid = ty * BX + tx;
    int x0 = blockIdx.x * BX, y0 = blockIdx.y * BY, f0 = blockIdx.z * FB;
    int x = x0 + tx, y = y0 + ty;
    T acc[FB];
#pragma unroll
    for (int q = 0; q < FB; ++q) acc[q] = (f0 + q < NF) ? bias[f0 + q] : (T)0;
    for (int c = 0; c < NC; ++c) {
        for (int yy = ty; yy < BY + 2 * R; yy += BY)
            for (int xx = tx; xx < BX + 2 * R; xx += BX) {
                int gy = y0 + yy - R, gx = x0 + xx - R;
                bool ok = gy >= 0 && gy < height && gx >= 0 && gx < width;
                tile[yy][xx] = ok ? in[((long long)c * height + gy) * width + gx] : (T)0;
            }
        for (int k = tid; k < FB * K * K; k += BX * BY) {
            int q = k / (K * K), e = k % (K * K);
            sw[q][e] = (f0 + q < NF) ? w[((f0 + q) * NC + c) * K * K + e] : (T)0;
        }
        __syncthreads();
#pragma unroll
        for (int dy = 0; dy < K; ++dy)
#pragma unroll
            for (int dx = 0; dx < K; ++dx) {
                T v = tile[ty + dy][tx + dx];
#pragma unroll
                for (int q = 0; q < FB; ++q) acc[q] += sw[q][dy * K + dx] * v;
            }
        __syncthreads();
    }
    if (x >= width || y >= height) return;
#pragma unroll
    for (int q = 0; q < FB; ++q)
        if (f0 + q < NF) out[((long long)(f0 + q) * height + y) * width + x] = acc[q];
}

$proto {
    dim3 grid((width + BX - 1) / BX, (height + BY - 1) / BY, (NF + FB - 1) / FB);
    conv_tiled<<<grid, dim3(BX, BY)>>>(height, width, in, w, bias, out);
}
"""

_ROWS = """
// One thread per output row segment of $seg pixels, all output channels: lanes are $seg
// pixels apart (uncoalesced), and few threads are in flight (deliberately weak).
__global__ void conv_rows(int height, int width, const T* in, const T* w, const T* bias,
                          T* out) {
    int segs = (width + $seg - 1) / $seg;
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (long long)height * segs * NF) return;
    int f = (int)(t / ((long long)height * segs));
    int rest = (int)(t % ((long long)height * segs));
    int y = rest / segs, xs = (rest % segs) * $seg;
    for (int x = xs; x < xs + $seg && x < width; ++x) {
        T acc = bias[f];
        for (int c = 0; c < NC; ++c)
            for (int dy = 0; dy < K; ++dy)
                for (int dx = 0; dx < K; ++dx) {
                    int sy = y + dy - R, sx = x + dx - R;
                    if (sy >= 0 && sy < height && sx >= 0 && sx < width)
                        acc += w[((f * NC + c) * K + dy) * K + dx] *
                               in[((long long)c * height + sy) * width + sx];
                }
        out[((long long)f * height + y) * width + x] = acc;
    }
}

$proto {
    long long threads = (long long)height * ((width + $seg - 1) / $seg) * NF;
    conv_rows<<<(unsigned)((threads + 127) / 128), 128>>>(height, width, in, w, bias, out);
}
"""


@family("conv2d_channels", TaskKind.C2CUDA, "convolution")
def conv2d_channels(rng: random.Random, index: int):
    t = rng.choice(["float", "float", "float", "double"])
    k = rng.choice([3, 3, 5])
    r = k // 2
    nc = rng.choice([1, 2, 3, 4, 8, 16])
    nf = rng.choice([2, 4, 8, 16, 32] if nc < 16 else [4, 8, 16])
    what = (
        f"Same-size 2D convolution of a {nc}-channel height x width image (channel planes "
        f"row-major, x contiguous) with {nf} filters of {nc} x {k} x {k} {t} weights plus a "
        f"per-filter bias; pixels outside the image count as 0. out is {nf} x height x width."
    )
    entry = rng.choice(["conv2d", "conv2d_same", f"conv{k}x{k}", "conv_layer", "conv2d_nchw"])
    sig = c_signature(
        ("height", "int", "scalar"),
        ("width", "int", "scalar"),
        ("in", t, "in", f"{nc}*height*width"),
        ("w", t, "in", str(nf * nc * k * k)),
        ("bias", t, "in", str(nf)),
        ("out", t, "out", f"{nf}*height*width"),
    )
    ref = fill(_REF, what=what, entry=entry, t=t, nf=nf, nc=nc, k=k, r=r)
    common = dict(proto=prototype(entry, sig))
    head = fill(_HEAD, t=t, nf=nf, nc=nc, k=k, r=r)
    bx = rng.choice([16, 32, 64])
    by = max(1, rng.choice([128, 256]) // bx)
    coal = dict(
        xi="blockIdx.x * blockDim.x + threadIdx.x",
        yi="blockIdx.y * blockDim.y + threadIdx.y",
        gx=f"(width + {bx} - 1) / {bx}",
        gy=f"(height + {by} - 1) / {by}",
    )
    tbx = rng.choice([16, 32])
    tby = rng.choice([8, 16]) if tbx == 16 else rng.choice([4, 8])
    fb = min(nf, rng.choice([2, 4, 8]) if t == "float" else rng.choice([2, 4]))
    impls = [
        impl("naive", head + fill(_NAIVE, bx=bx, by=by, **coal, **common), ["naive", "coalesced"]),
        impl(
            "smem_tiled_fblock",
            head + fill(_TILED, bx=tbx, by=tby, fb=fb, **common),
            ["smem_tiling", "register_blocking", "coalesced", "unrolled"],
        ),
        impl(
            "row_segments",
            head + fill(_ROWS, seg=rng.choice([8, 16, 32, 64]), **common),
            ["naive", "uncoalesced"],
        ),
    ]
    macs = nc * nf * k * k
    side = int((3e8 / macs) ** 0.5) if t == "float" else int((2e8 / macs) ** 0.5)
    side = max(256, min(4096, side))
    sizes = {
        "small": {"height": rng.randrange(9, 40), "width": rng.randrange(10, 60)},
        "medium": {"height": 256, "width": rng.choice([256, 300, 384])},
        "large": {"height": side, "width": side + rng.choice([0, 1, 7])},
        "heldout": {"height": rng.randrange(100, 300), "width": rng.randrange(101, 400)},
    }
    dist = Distribution(kind="uniform", low=0.1, high=1.0)
    desc = (
        f"{what} Compute-bound for many channels ({2 * macs} FLOP per output pixel): reuse "
        "each input tile across filters and each weight across pixels."
    )
    return c_task(
        "conv2d_channels",
        index,
        entry,
        ref,
        sig,
        four_configs(sizes, dist),
        tolerance_for(t, 4 * nc * k * k),
        impls,
        desc,
    )
