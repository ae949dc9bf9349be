"""PyTorch→CUDA element-wise chains with broadcasting over an NCHW tensor: a per-channel
scale and shift (learned, broadcast over N, H, W), an activation, then optionally a residual
add of the input and a final scale (3–5 ops). Implementations fuse the chain into one pass."""

from __future__ import annotations

import random

from cudaperf.datagen.base import cfg, family, fill, impl, torch_task
from cudaperf.datagen.families.torch2cuda.torch_common import draw_chain, reference_template
from cudaperf.datagen.families.torch2cuda.torch_linear_act import _ACTS
from cudaperf.tasks.model import Distribution, TaskKind, Tolerance

_REF = reference_template(
    {"batch_size": "n", "channels": "c", "height": "h", "width": "w"},
    """
    def __init__(self, channels: int):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(channels) + 0.5)
        self.bias = nn.Parameter(torch.randn(channels) * $bstd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x
$pre        y = h * self.weight.view(1, -1, 1, 1) + self.bias.view(1, -1, 1, 1)
        y = $act
$post$tail        return y


def get_inputs():
    return [torch.randn(batch_size, channels, height, width) * $xstd]


def get_init_inputs():
    return [channels]
""",
)

_PY = '''
"""$doc"""

import torch
import torch.nn as nn

from cudaperf.execute.native import load_cuda

CUDA_SRC = r"""$cuda"""


class ModelNew(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(channels) + 0.5)
        self.bias = nn.Parameter(torch.randn(channels) * $bstd)
        self.lib = load_cuda(CUDA_SRC)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n, c = x.shape[0], x.shape[1]
        hw = x.shape[2] * x.shape[3]
        self.lib.chan_op(x, self.weight.contiguous(), self.bias.contiguous(), y, n * c, c, hw)
        return y
'''

_DEV = """
${pre_fn}${post_fn}__device__ __forceinline__ float chain(float x, float w, float b) {
    float v = pre_op(x) * w + b;
    v = $act;
    v = post_op(v);
    $tail
    return v;
}
"""

_FLAT = (
    _DEV
    + """
// One thread per element; the channel of element i is (i / hw) % c (a 64-bit division per
// element), and the weight and bias are re-read for every element.
__global__ void chan_flat(const float* __restrict__ x, const float* __restrict__ w,
                          const float* __restrict__ b, float* __restrict__ y, long long total,
                          int c, int hw) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total) return;
    int ch = (int)((i / hw) % c);
    y[i] = chain(x[i], w[ch], b[ch]);
}

extern "C" void chan_op(const float* x, const float* w, const float* b, float* y, int planes,
                        int c, int hw) {
    long long total = (long long)planes * hw;
    unsigned grid = (unsigned)((total + $block - 1) / $block);
    if (total > 0) chan_flat<<<grid, $block>>>(x, w, b, y, total, c, hw);
}
"""
)

_STRIDED = (
    _DEV
    + """
// Weak on purpose: consecutive threads take consecutive planes (n, c) at the same spatial
// position, so the lanes of a warp are hw elements apart and no access is coalesced.
__global__ void chan_strided(const float* x, const float* w, const float* b, float* y,
                             int planes, int c, int hw) {
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (long long)planes * hw) return;
    int p = (int)(t % planes);
    long long s = t / planes;
    long long i = (long long)p * hw + s;
    y[i] = chain(x[i], w[p % c], b[p % c]);
}

extern "C" void chan_op(const float* x, const float* w, const float* b, float* y, int planes,
                        int c, int hw) {
    long long total = (long long)planes * hw;
    unsigned grid = (unsigned)((total + $block - 1) / $block);
    if (total > 0) chan_strided<<<grid, $block>>>(x, w, b, y, planes, c, hw);
}
"""
)

_PLANE = (
    _DEV
    + """
// One block row per (n, c) plane (blockIdx.y), so the channel's weight and bias are loaded
// once per thread with no division; blockIdx.x strides the plane. When hw is a multiple of 4
// every plane starts 16-byte aligned and the plane is processed as float4 (vectorised).
__global__ void chan_plane_vec4(const float4* __restrict__ x, const float* __restrict__ w,
                                const float* __restrict__ b, float4* __restrict__ y, int c,
                                int hw4) {
    int p = blockIdx.y;
    float wc = w[p % c], bc = b[p % c];
    const float4* xp = x + (long long)p * hw4;
    float4* yp = y + (long long)p * hw4;
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < hw4; k += gridDim.x * blockDim.x) {
        float4 v = xp[k];
        v.x = chain(v.x, wc, bc);
        v.y = chain(v.y, wc, bc);
        v.z = chain(v.z, wc, bc);
        v.w = chain(v.w, wc, bc);
        yp[k] = v;
    }
}

__global__ void chan_plane(const float* __restrict__ x, const float* __restrict__ w,
                           const float* __restrict__ b, float* __restrict__ y, int c, int hw) {
    int p = blockIdx.y;
    float wc = w[p % c], bc = b[p % c];
    const float* xp = x + (long long)p * hw;
    float* yp = y + (long long)p * hw;
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < hw; k += gridDim.x * blockDim.x)
        yp[k] = chain(xp[k], wc, bc);
}

extern "C" void chan_op(const float* x, const float* w, const float* b, float* y, int planes,
                        int c, int hw) {
    if (planes <= 0 || hw <= 0) return;
    // planes <= 65535 here (grid y limit); larger tensors fall back to several launches.
    for (int p0 = 0; p0 < planes; p0 += 65535) {
        int np = planes - p0 < 65535 ? planes - p0 : 65535;
        long long off = (long long)p0 * hw;
        if (hw % 4 == 0) {
            int hw4 = hw / 4;
            int gx = (hw4 + $block - 1) / $block;
            dim3 grid(gx < 64 ? gx : 64, np);
            chan_plane_vec4<<<grid, $block>>>((const float4*)(x + off), w, b,
                                              (float4*)(y + off), c, hw4);
        } else {
            int gx = (hw + $block - 1) / $block;
            dim3 grid(gx < 64 ? gx : 64, np);
            chan_plane<<<grid, $block>>>(x + off, w, b, y + off, c, hw);
        }
    }
}
"""
)


@family("torch_channel_affine", TaskKind.TORCH2CUDA, "fusion")
def torch_channel_affine(rng: random.Random, index: int):
    act = rng.choice(list(_ACTS))
    slope = rng.choice([0.01, 0.1, 0.2])
    tact, cact = (
        fill(s, slope=f"{slope}{sfx}") for s, sfx in zip(_ACTS[act], ("", "f"), strict=True)
    )
    residual = rng.random() < 0.5
    pre, post = draw_chain(rng, 0, 2), draw_chain(rng, 0, 1)
    scale = rng.choice([None, 0.5, 2.0, 0.7071])
    tail_py, tail_c, parts = "", "", []
    if residual:
        tail_py += "        y = y + x\n"
        tail_c += "v = v + x; "
        parts.append("plus the input (residual)")
    if scale is not None:
        tail_py += f"        y = y * {scale}\n"
        tail_c += f"v = v * {scale}f;"
        parts.append(f"times {scale}")
    h = f"({pre.describe()} of x)" if pre else "x"
    if post:
        parts.insert(0, f"then {post.describe()}")
    what = f"{act}({h} * weight[c] + bias[c]) per channel" + (
        ", " + ", ".join(parts) if parts else ""
    )
    doc = f"{what}, on an NCHW float32 tensor."
    bstd = rng.choice([0.1, 0.5])
    xstd = rng.choice([1.0, 2.0])
    src = fill(
        _REF,
        doc=doc,
        n=16,
        c=64,
        h=56,
        w=56,
        act=tact,
        tail=tail_py,
        pre=pre.torch("h"),
        post=post.torch("y"),
        bstd=bstd,
        xstd=xstd,
    )
    dev = dict(act=cact, tail=tail_c, pre_fn=pre.device("pre_op"), post_fn=post.device("post_op"))
    variants = [
        ("flat", _FLAT, ["naive", "coalesced"], rng.choice([128, 256, 512])),
        ("plane_strided", _STRIDED, ["uncoalesced"], rng.choice([128, 256])),
        (
            "plane_vectorized",
            _PLANE,
            ["coalesced", "vectorized", "grid_stride"],
            rng.choice([128, 256]),
        ),
    ]
    impls = []
    for vid, tmpl, tags, block in variants:
        cuda = fill(tmpl, block=block, **dev)
        impls.append(
            impl(
                vid, fill(_PY, doc=f"{what}: {vid.replace('_', ' ')}.", cuda=cuda, bstd=bstd), tags
            )
        )

    def sz(n: int, c: int, h: int, w: int) -> dict[str, int]:
        return {"batch_size": n, "channels": c, "height": h, "width": w}

    r = rng.randrange
    configs = [
        cfg("small", sz(2, r(3, 9), r(5, 14), r(7, 16)), 1),
        cfg("medium", sz(8, 64, 56, 56), 2),
        cfg(
            "large",
            sz(*rng.choice([(32, 128, 112, 112), (64, 256, 56, 56), (16, 64, 224, 224)])),
            3,
        ),
        cfg(
            "heldout",
            sz(r(3, 12), r(20, 200), r(13, 80), r(13, 80)),
            4,
            held_out=True,
            dist=Distribution(kind="normal"),
        ),
    ]
    desc = (
        f"{doc} Memory-bound: one read and one write per element; the per-channel parameters "
        "broadcast over batch and space."
    )
    return torch_task(
        "torch_channel_affine", index, src, configs, Tolerance(atol=1e-5, rtol=1e-5), impls, desc
    )
