"""PyTorch→CUDA row-wise normalisation families: softmax / log-softmax (with a temperature),
LayerNorm and RMSNorm (with learned affine parameters). Every kind is two row statistics and
an element-wise output: stat1 = R1(f1(x)), stat2 = R2(f2(x, stat1)), y = g(x, stat1, stat2)."""

from __future__ import annotations

import random

from cudaperf.datagen.base import cfg, family, fill, impl, torch_task
from cudaperf.datagen.families.torch2cuda.torch_common import draw_chain, reference_template
from cudaperf.tasks.model import Distribution, TaskKind, Tolerance

# kind -> (pass-1 combine, identity, element term, finish; pass-2 ...; output expression)
_KINDS = {
    "softmax": (
        "fmaxf(a, b)",
        "-INFINITY",
        "v * SCALE",
        "acc",
        "a + b",
        "0.0f",
        "expf(v * SCALE - s1)",
        "acc",
        "expf(v * SCALE - s1) / s2",
    ),
    "log_softmax": (
        "fmaxf(a, b)",
        "-INFINITY",
        "v * SCALE",
        "acc",
        "a + b",
        "0.0f",
        "expf(v * SCALE - s1)",
        "logf(acc)",
        "v * SCALE - s1 - s2",
    ),
    "layernorm": (
        "a + b",
        "0.0f",
        "v",
        "acc / (float)cols",
        "a + b",
        "0.0f",
        "(v - s1) * (v - s1)",
        "rsqrtf(acc / (float)cols + EPS)",
        "(v - s1) * s2 * w[j] + bias[j]",
    ),
    "layernorm_plain": (
        "a + b",
        "0.0f",
        "v",
        "acc / (float)cols",
        "a + b",
        "0.0f",
        "(v - s1) * (v - s1)",
        "rsqrtf(acc / (float)cols + EPS)",
        "(v - s1) * s2",
    ),
    "rmsnorm_plain": (
        "a + b",
        "0.0f",
        "v * v",
        "rsqrtf(acc / (float)cols + EPS)",
        "a + b",
        "0.0f",
        "0.0f",
        "acc",
        "v * s1",
    ),
    "rmsnorm": (
        "a + b",
        "0.0f",
        "v * v",
        "rsqrtf(acc / (float)cols + EPS)",
        "a + b",
        "0.0f",
        "0.0f",
        "acc",
        "v * s1 * w[j]",
    ),
}

_REF = reference_template(
    {"batch_size": "rows", "dim": "cols"},
    """
    def __init__(self, dim: int):
        super().__init__()
$init
    def forward(self, x: torch.Tensor) -> torch.Tensor:
$pre        y = $forward
$post        return y


def get_inputs():
    return [torch.randn(batch_size, dim) * $std + $mean]


def get_init_inputs():
    return [dim]
""",
)

_DEV = r"""
#define SCALE $scale
#define EPS $eps
__device__ __forceinline__ float comb1(float a, float b) { return $c1; }
__device__ __forceinline__ float comb2(float a, float b) { return $c2; }
$pre_fn$post_fn"""

_ROW_THREAD = (
    _DEV
    + r"""
// One thread per row: three sequential passes over the row. Lanes of a warp are a whole row
// apart, so no load is coalesced, and only `rows` threads work (deliberately weak).
__global__ void rows_kernel(const float* x, float* y, int rows, int cols$kp) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* xr = x + (long long)r * cols;
    float* yr = y + (long long)r * cols;
    float acc = $i1;
    for (int j = 0; j < cols; ++j) { float v = pre_op(xr[j]); acc = comb1(acc, $e1); }
    float s1 = $f1;
    acc = $i2;
    for (int j = 0; j < cols; ++j) { float v = pre_op(xr[j]); acc = comb2(acc, $e2); }
    float s2 = $f2;
    for (int j = 0; j < cols; ++j) { float v = pre_op(xr[j]); yr[j] = post_op($out); }
}

extern "C" void row_op(const float* x, float* y, int rows, int cols$hp) {
    rows_kernel<<<(rows + $block - 1) / $block, $block>>>(x, y, rows, cols$ka);
}
"""
)

_WARP = (
    _DEV
    + r"""
// One warp per row ($wpb warps per block): strided coalesced loads, butterfly shuffles
// (__shfl_xor_sync) give every lane both statistics without shared memory.
__device__ __forceinline__ float warp1(float v) {
    for (int o = 16; o > 0; o >>= 1) v = comb1(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
__device__ __forceinline__ float warp2(float v) {
    for (int o = 16; o > 0; o >>= 1) v = comb2(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

__global__ void rows_kernel(const float* __restrict__ x, float* __restrict__ y, int rows,
                            int cols$kp) {
    int r = blockIdx.x * $wpb + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (r >= rows) return;
    const float* xr = x + (long long)r * cols;
    float* yr = y + (long long)r * cols;
    float acc = $i1;
    for (int j = lane; j < cols; j += 32) { float v = pre_op(xr[j]); acc = comb1(acc, $e1); }
    acc = warp1(acc);
    float s1 = $f1;
    acc = $i2;
    for (int j = lane; j < cols; j += 32) { float v = pre_op(xr[j]); acc = comb2(acc, $e2); }
    acc = warp2(acc);
    float s2 = $f2;
    for (int j = lane; j < cols; j += 32) { float v = pre_op(xr[j]); yr[j] = post_op($out); }
}

extern "C" void row_op(const float* x, float* y, int rows, int cols$hp) {
    rows_kernel<<<(rows + $wpb - 1) / $wpb, $wpb * 32>>>(x, y, rows, cols$ka);
}
"""
)

_BLOCK = (
    _DEV
    + r"""
// One block of $block threads per row: coalesced strided loads, warp shuffles, then the
// per-warp results combined through shared memory; suited to long rows.
#define BLOCK $block
template <int K>
__device__ __forceinline__ float block_comb(float v, float ident) {
    __shared__ float part[BLOCK / 32];
    __shared__ float total;
    for (int o = 16; o > 0; o >>= 1) {
        float u = __shfl_xor_sync(0xffffffffu, v, o);
        v = K == 1 ? comb1(v, u) : comb2(v, u);
    }
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;
    __syncthreads();
    if (threadIdx.x < 32) {
        v = threadIdx.x < BLOCK / 32 ? part[threadIdx.x] : ident;
        for (int o = 16; o > 0; o >>= 1) {
            float u = __shfl_xor_sync(0xffffffffu, v, o);
            v = K == 1 ? comb1(v, u) : comb2(v, u);
        }
        if (threadIdx.x == 0) total = v;
    }
    __syncthreads();
    return total;
}

__global__ void __launch_bounds__(BLOCK)
rows_kernel(const float* __restrict__ x, float* __restrict__ y, int cols$kp) {
    const float* xr = x + (long long)blockIdx.x * cols;
    float* yr = y + (long long)blockIdx.x * cols;
    float acc = $i1;
    for (int j = threadIdx.x; j < cols; j += BLOCK) {
        float v = pre_op(xr[j]);
        acc = comb1(acc, $e1);
    }
    acc = block_comb<1>(acc, $i1);
    float s1 = $f1;
    acc = $i2;
    for (int j = threadIdx.x; j < cols; j += BLOCK) {
        float v = pre_op(xr[j]);
        acc = comb2(acc, $e2);
    }
    acc = block_comb<2>(acc, $i2);
    float s2 = $f2;
    for (int j = threadIdx.x; j < cols; j += BLOCK) {
        float v = pre_op(xr[j]);
        yr[j] = post_op($out);
    }
}

extern "C" void row_op(const float* x, float* y, int rows, int cols$hp) {
    if (rows > 0) rows_kernel<<<rows, BLOCK>>>(x, y, cols$ka);
}
"""
)

_PY = '''
"""$doc"""

import torch
import torch.nn as nn

from cudaperf.execute.native import load_cuda

CUDA_SRC = r"""$cuda"""


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
$init        self.lib = load_cuda(CUDA_SRC)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        self.lib.row_op(x, y, x.shape[0], x.shape[1]$pa)
        return y
'''


def _forward(kind: str, scale: float, eps: float) -> tuple[str, str, str]:
    """(forward expression, __init__ body, description) of the reference Model."""
    if kind in ("softmax", "log_softmax"):
        fn = "torch.softmax" if kind == "softmax" else "torch.log_softmax"
        return (
            f"{fn}(x * {scale}, dim=1)",
            "",
            f"{kind.replace('_', '-')} along dim 1 of (x * {scale})",
        )
    if kind == "layernorm_plain":
        fwd = f"torch.nn.functional.layer_norm(x, (x.shape[1],), None, None, {eps})"
        return fwd, "", f"LayerNorm over dim 1 without affine parameters, eps={eps}"
    if kind == "rmsnorm_plain":
        fwd = f"x * torch.rsqrt(x.pow(2).mean(dim=1, keepdim=True) + {eps})"
        return fwd, "", f"RMSNorm over dim 1 without a weight, eps={eps}"
    if kind == "layernorm":
        init = (
            "        self.weight = nn.Parameter(torch.rand(dim) + 0.5)\n"
            "        self.bias = nn.Parameter(torch.randn(dim) * 0.1)\n"
        )
        fwd = f"torch.nn.functional.layer_norm(x, (x.shape[1],), self.weight, self.bias, {eps})"
        return fwd, init, f"LayerNorm over dim 1 with learned weight and bias, eps={eps}"
    init = "        self.weight = nn.Parameter(torch.rand(dim) + 0.5)\n"
    fwd = f"x * torch.rsqrt(x.pow(2).mean(dim=1, keepdim=True) + {eps}) * self.weight"
    return fwd, init, f"RMSNorm over dim 1 with a learned weight, eps={eps}"


def _params(kind: str) -> tuple[str, str, str, str]:
    """(kernel params, host params, kernel args, Python call args) for the affine tensors."""
    if kind == "layernorm":
        return (
            ", const float* __restrict__ w, const float* __restrict__ bias",
            ", const float* w, const float* bias",
            ", w, bias",
            ", self.weight.contiguous(), self.bias.contiguous()",
        )
    if kind == "rmsnorm":
        return (
            ", const float* __restrict__ w",
            ", const float* w",
            ", w",
            ", self.weight.contiguous()",
        )
    return "", "", "", ""


def _rownorm(rng: random.Random, index: int, fam: str, kinds: list[str]):
    kind = rng.choice(kinds)
    scale = rng.choice([0.5, 0.75, 1.0, 1.25, 2.0, 0.125])
    eps = rng.choice([1e-5, 1e-6, 1e-5 * 2, 1e-3])
    fwd, init, what = _forward(kind, scale, eps)
    pre, post = draw_chain(rng, 0, 2), draw_chain(rng, 0, 1)
    if pre:
        what += f", applied to x after {pre.describe()}"
    if post:
        what += f"; the result then goes through {post.describe()}"
    std, mean = rng.choice([1.0, 2.0, 0.5]), rng.choice([0.0, 0.5, -0.25])
    doc = f"{what[0].upper()}{what[1:]}, on a (batch_size, dim) float32 input."
    src = fill(
        _REF,
        doc=doc,
        rows=4096,
        cols=8192,
        init=init,
        forward=fwd,
        std=std,
        mean=mean,
        pre=pre.torch("x"),
        post=post.torch("y"),
    )
    c1, i1, e1, f1, c2, i2, e2, f2, out = _KINDS[kind]
    kp, hp, ka, pa = _params(kind)
    dev = dict(
        pre_fn=pre.device("pre_op"),
        post_fn=post.device("post_op"),
        scale=f"{scale}f",
        eps=f"{eps}f",
        c1=c1,
        c2=c2,
        i1=i1,
        e1=e1,
        f1=f1,
        i2=i2,
        e2=e2,
        f2=f2,
        out=out,
        kp=kp,
        hp=hp,
        ka=ka,
    )
    variants = [
        ("row_per_thread", _ROW_THREAD, ["naive", "uncoalesced"], {"block": rng.choice([64, 128])}),
        ("warp_per_row", _WARP, ["warp_shuffle", "coalesced"], {"wpb": rng.choice([4, 8])}),
        (
            "block_per_row",
            _BLOCK,
            ["warp_shuffle", "smem_reduction", "coalesced"],
            {"block": rng.choice([256, 512, 1024])},
        ),
    ]
    impls = []
    for vid, tmpl, strategies, extra in variants:
        cuda = fill(tmpl, **dev, **extra)
        code = fill(_PY, doc=f"{what}: {vid.replace('_', ' ')}.", cuda=cuda, init=init, pa=pa)
        impls.append(impl(vid, code, strategies))
    rows_l, cols_l = rng.choice([(4096, 8192), (8192, 4096), (2048, 16384), (16384, 2048)])
    configs = [
        cfg("small", {"batch_size": rng.randint(3, 9), "dim": rng.randrange(257, 1200)}, 1),
        cfg("medium", {"batch_size": 256, "dim": rng.choice([1024, 2048, 4096])}, 2),
        cfg("large", {"batch_size": rows_l, "dim": cols_l}, 3),
        cfg(
            "heldout",
            {"batch_size": rng.randrange(500, 1500), "dim": rng.randrange(1001, 6000)},
            4,
            held_out=True,
            dist=Distribution(kind="normal"),
        ),
    ]
    tol = {"softmax": Tolerance(atol=1e-6, rtol=1e-4)}.get(kind, Tolerance(atol=1e-4, rtol=1e-4))
    desc = (
        f"{doc} Rows are independent; each needs two row statistics before it can be "
        f"written (x ~ normal * {std} + {mean})."
    )
    return torch_task(fam, index, src, configs, tol, impls, desc)


@family("torch_softmax", TaskKind.TORCH2CUDA, "softmax")
def torch_softmax(rng: random.Random, index: int):
    return _rownorm(rng, index, "torch_softmax", ["softmax", "log_softmax"])


@family("torch_layernorm", TaskKind.TORCH2CUDA, "layernorm")
def torch_layernorm(rng: random.Random, index: int):
    return _rownorm(rng, index, "torch_layernorm", ["layernorm", "layernorm", "layernorm_plain"])


@family("torch_rmsnorm", TaskKind.TORCH2CUDA, "rmsnorm")
def torch_rmsnorm(rng: random.Random, index: int):
    return _rownorm(rng, index, "torch_rmsnorm", ["rmsnorm", "rmsnorm", "rmsnorm_plain"])
