"""PyTorch→CUDA 2-D pooling over NCHW tensors: max or average pooling with a drawn kernel
size, stride and padding (average with or without the padding in the divisor), optionally
followed by a ReLU, scale or shift. Implementations: one thread per output with consecutive
threads on consecutive planes (uncoalesced), one thread per output along the row
(coalesced), and a shared-memory input tile with halo per 32 x 8 block of outputs."""

from __future__ import annotations

import random

from cudaperf.datagen.base import family, fill, impl, torch_task
from cudaperf.datagen.families.torch2cuda.torch_common import (
    native_module,
    reference_template,
    torch_configs,
)
from cudaperf.tasks.model import TaskKind, Tolerance

_REF = reference_template(
    {"batch_size": "n", "channels": "c", "height": "h", "width": "w"},
    """
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = $pool
$post        return y


def get_inputs():
    return [torch.randn(batch_size, channels, height, width) * $std + $mean]


def get_init_inputs():
    return []
""",
)

_DEV = r"""
#define K $k
#define S $s
#define P $p
#define IS_MAX $is_max
#define COUNT_PAD $count_pad
__device__ __forceinline__ float post(float v) { return $post; }
// Window of output (oh, ow) read straight from the plane; padding is skipped.
__device__ __forceinline__ float pool_at(const float* xp, int H, int W, int oh, int ow) {
    int h0 = oh * S - P, w0 = ow * S - P, cnt = 0;
    float acc = IS_MAX ? -INFINITY : 0.0f;
    for (int kh = 0; kh < K; ++kh) {
        int h = h0 + kh;
        if (h < 0 || h >= H) continue;
        for (int kw = 0; kw < K; ++kw) {
            int w = w0 + kw;
            if (w < 0 || w >= W) continue;
            float v = xp[(long long)h * W + w];
            acc = IS_MAX ? fmaxf(acc, v) : acc + v;
            ++cnt;
        }
    }
    return post(IS_MAX ? acc : acc / (float)(COUNT_PAD ? K * K : cnt));
}
"""

_PLANES = r"""
// One thread per output, but consecutive threads take consecutive planes (n, c) at the same
// position: every lane of a warp reads a different plane (uncoalesced, weak on purpose).
__global__ void pool_planes(const float* x, float* y, long long planes, int H, int W, int Ho,
                            int Wo) {
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= planes * Ho * Wo) return;
    long long p = t % planes, o = t / planes;
    int oh = (int)(o / Wo), ow = (int)(o % Wo);
    y[p * Ho * Wo + o] = pool_at(x + p * H * W, H, W, oh, ow);
}

extern "C" void pool2d(const float* x, float* y, long long planes, int H, int W, int Ho, int Wo) {
    long long total = planes * Ho * Wo;
    if (total > 0)
        pool_planes<<<(unsigned)((total + $block - 1) / $block), $block>>>(x, y, planes, H, W, Ho,
                                                                          Wo);
}
"""

_DIRECT = r"""
// One thread per output in row-major order: the lanes of a warp cover consecutive outputs
// of a row, so loads are S floats apart and stores coalesced; neighbouring windows overlap
// and are re-read through L1/L2.
__global__ void pool_direct(const float* __restrict__ x, float* __restrict__ y, long long total,
                            int H, int W, int Ho, int Wo) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total) return;
    int ow = (int)(i % Wo);
    long long r = i / Wo;
    int oh = (int)(r % Ho);
    long long p = r / Ho;
    y[i] = pool_at(x + p * H * W, H, W, oh, ow);
}

extern "C" void pool2d(const float* x, float* y, long long planes, int H, int W, int Ho, int Wo) {
    long long total = planes * Ho * Wo;
    if (total > 0)
        pool_direct<<<(unsigned)((total + $block - 1) / $block), $block>>>(x, y, total, H, W, Ho,
                                                                          Wo);
}
"""

_TILED = r"""
// A 32 x 8 block computes a 32 x 8 tile of outputs of one plane (blockIdx.z): the input
// tile with its halo, ((8-1)*S+K) x ((32-1)*S+K), is loaded once, coalesced, into shared
// memory (padding as -inf for max, 0 for average); each window is then read from there.
#define TX 32
#define TY 8
#define IW ((TX - 1) * S + K)
#define IH ((TY - 1) * S + K)
__global__ void __launch_bounds__(TX * TY)
pool_tiled(const float* __restrict__ x, float* __restrict__ y, long long p0, int H, int W,
           int Ho, int Wo) {
    __shared__ float tile[IH][IW + 1];
    long long p = p0 + blockIdx.z;
    const float* xp = x + p * H * W;
    int oh0 = blockIdx.y * TY, ow0 = blockIdx.x * TX;
    int ih0 = oh0 * S - P, iw0 = ow0 * S - P;
    for (int e = threadIdx.y * TX + threadIdx.x; e < IH * IW; e += TX * TY) {
        int r = e / IW, c = e % IW, h = ih0 + r, w = iw0 + c;
        bool in = h >= 0 && h < H && w >= 0 && w < W;
        tile[r][c] = in ? xp[(long long)h * W + w] : (IS_MAX ? -INFINITY : 0.0f);
    }
    __syncthreads();
    int oh = oh0 + threadIdx.y, ow = ow0 + threadIdx.x;
    if (oh >= Ho || ow >= Wo) return;
    float acc = IS_MAX ? -INFINITY : 0.0f;
#pragma unroll
    for (int kh = 0; kh < K; ++kh)
#pragma unroll
        for (int kw = 0; kw < K; ++kw) {
            float v = tile[threadIdx.y * S + kh][threadIdx.x * S + kw];
            acc = IS_MAX ? fmaxf(acc, v) : acc + v;
        }
    int h0 = oh * S - P, w0 = ow * S - P;
    int hs = h0 < 0 ? 0 : h0, he = h0 + K < H ? h0 + K : H;
    int ws = w0 < 0 ? 0 : w0, we = w0 + K < W ? w0 + K : W;
    int cnt = COUNT_PAD ? K * K : (he - hs) * (we - ws);
    y[p * Ho * Wo + (long long)oh * Wo + ow] = post(IS_MAX ? acc : acc / (float)cnt);
}

extern "C" void pool2d(const float* x, float* y, long long planes, int H, int W, int Ho, int Wo) {
    if (planes <= 0 || Ho <= 0 || Wo <= 0) return;
    for (long long p0 = 0; p0 < planes; p0 += 65535) {
        long long np = planes - p0 < 65535 ? planes - p0 : 65535;
        dim3 grid((Wo + TX - 1) / TX, (Ho + TY - 1) / TY, (unsigned)np);
        pool_tiled<<<grid, dim3(TX, TY)>>>(x, y, p0, H, W, Ho, Wo);
    }
}
"""


@family("torch_pool2d", TaskKind.TORCH2CUDA, "pooling")
def torch_pool2d(rng: random.Random, index: int):
    is_max = rng.random() < 0.5
    k, s, p = rng.choice(
        [(2, 2, 0), (3, 2, 1), (3, 1, 1), (3, 2, 0), (5, 2, 2), (4, 4, 0), (7, 3, 3)]
    )
    count_pad = True if is_max else rng.random() < 0.6
    if is_max:
        pool = f"torch.nn.functional.max_pool2d(x, {k}, {s}, {p})"
    else:
        extra = "" if count_pad else ", count_include_pad=False"
        pool = f"torch.nn.functional.avg_pool2d(x, {k}, {s}, {p}{extra})"
    post_kind = rng.choice(["none", "relu", "scale", "shift"])
    a = rng.choice([0.5, 2.0, -0.25, 1.5])
    post_py, post_c = {
        "none": ("", "v"),
        "relu": ("        y = torch.relu(y)\n", "fmaxf(v, 0.0f)"),
        "scale": (f"        y = y * {a}\n", f"v * {a}f"),
        "shift": (f"        y = y + {a}\n", f"v + {a}f"),
    }[post_kind]
    what = f"{'max' if is_max else 'average'} pooling, kernel {k}, stride {s}, padding {p}"
    if not is_max and not count_pad:
        what += " (padding not counted)"
    if post_kind != "none":
        what += f", then {post_py.strip().replace('y = ', '')}"
    doc = f"2-D {what}, on an NCHW float32 tensor."
    n_l, c_l, h_l, w_l = rng.choice([(32, 128, 112, 112), (64, 64, 128, 128), (16, 64, 224, 224)])
    src = fill(
        _REF,
        doc=doc,
        n=n_l,
        c=c_l,
        h=h_l,
        w=w_l,
        pool=pool,
        post=post_py,
        std=rng.choice([1.0, 2.0]),
        mean=rng.choice([0.0, 0.5]),
    )
    dev = fill(_DEV, k=k, s=s, p=p, is_max=int(is_max), count_pad=int(count_pad), post=post_c)
    fwd = (
        "x = x.contiguous()\n"
        "n, c, h, w = x.shape\n"
        f"ho, wo = (h + {2 * p} - {k}) // {s} + 1, (w + {2 * p} - {k}) // {s} + 1\n"
        "y = torch.empty(n, c, ho, wo, device=x.device, dtype=x.dtype)\n"
        "self.lib.pool2d(x, y, n * c, h, w, ho, wo)\n"
        "return y\n"
    )
    variants = [
        ("plane_strided", _PLANES, ["naive", "uncoalesced"], {"block": rng.choice([128, 256])}),
        ("direct", _DIRECT, ["coalesced"], {"block": rng.choice([128, 256, 512])}),
        ("smem_tiled", _TILED, ["smem_tiling", "coalesced", "unrolled"], {}),
    ]
    impls = []
    for vid, tmpl, tags, extra in variants:
        code = native_module(
            f"{doc} ({vid.replace('_', ' ')})", dev + fill(tmpl, **extra), "", "", ", x", fwd
        )
        impls.append(impl(vid, code, tags))

    def sz(n: int, c: int, h: int, w: int) -> dict[str, int]:
        return {"batch_size": n, "channels": c, "height": h, "width": w}

    r = rng.randrange
    configs = torch_configs(
        sz(2, r(2, 6), r(k + 5, 40), r(k + 5, 60)),
        sz(8, 64, 56, 56),
        sz(n_l, c_l, h_l, w_l),
        sz(r(3, 9), r(20, 100), r(30, 120), r(30, 120)),
    )
    desc = (
        f"{doc} Memory-bound: windows overlap when the stride is below the kernel size, so "
        "staging the input tile once in shared memory saves re-reads."
    )
    tol = Tolerance(atol=1e-5, rtol=1e-4)
    return torch_task("torch_pool2d", index, src, configs, tol, impls, desc)
