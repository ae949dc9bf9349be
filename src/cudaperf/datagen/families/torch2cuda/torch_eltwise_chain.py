"""PyTorch→CUDA element-wise chains: 2–5 operators drawn from a vocabulary (scale, shift,
ReLU, sigmoid, tanh, SiLU, swish(beta), GELU (tanh / erf), leaky ReLU, clamp, softsign,
square, exp(-y^2), Mish, abs), optionally with a learned per-feature bias at a drawn
position. Implementations: one kernel per operator (unfused), a fused kernel with
uncoalesced column-major traversal, a fused flat kernel, and a fused float4 grid-stride
kernel."""

from __future__ import annotations

import random

from cudaperf.datagen.base import family, fill, impl, torch_task
from cudaperf.datagen.families.torch2cuda.torch_common import (
    ELTWISE,
    ELTWISE_CONSTS,
    ROW_SHAPES,
    eltwise,
    native_module,
    reference_template,
    row_configs,
)
from cudaperf.tasks.model import TaskKind, Tolerance

_REF = reference_template(
    {"batch_size": "rows", "dim": "cols"},
    """
    def __init__(self, dim: int):
        super().__init__()
$init
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x
$body        return y


def get_inputs():
    return [torch.randn(batch_size, dim) * $std]


def get_init_inputs():
    return [dim]
""",
)

_UNFUSED_OP = r"""
__global__ void op${k}_kernel(const float* src, float* dst, const float* bias, long long total,
                             int cols) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total) return;
    float v = src[i];
    int j = (int)(i % cols);
    (void)j;
    (void)bias;
    dst[i] = $expr;
}
"""

_UNFUSED_HOST = r"""
// Unfused (weak on purpose): one kernel and one full read + write pass per operator; the
// first reads x, the rest update y in place, so the chain moves $n times the bytes it needs.
extern "C" void chain(const float* x, const float* bias, float* y, long long rows, int cols) {
    long long total = rows * cols;
    if (total <= 0) return;
    unsigned grid = (unsigned)((total + $block - 1) / $block);
$launches}
"""

_CHAIN = r"""
__device__ __forceinline__ float chain_op(float v, const float* __restrict__ bias, int j) {
$steps    return v;
}
"""

_STRIDED = r"""
// Fused, but thread t takes element (t % rows, t / rows): the lanes of a warp are a whole
// row apart, so every load and store is a separate memory transaction (weak on purpose).
__global__ void chain_strided(const float* x, const float* bias, float* y, long long rows,
                              int cols) {
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= rows * cols) return;
    long long r = t % rows;
    int j = (int)(t / rows);
    long long i = r * cols + j;
    y[i] = chain_op(x[i], bias, j);
}

extern "C" void chain(const float* x, const float* bias, float* y, long long rows, int cols) {
    long long total = rows * cols;
    if (total <= 0) return;
    chain_strided<<<(unsigned)((total + $block - 1) / $block), $block>>>(x, bias, y, rows, cols);
}
"""

_FLAT = r"""
// Fused: one thread per element, consecutive threads on consecutive elements (coalesced);
// one read of x and one write of y.
__global__ void chain_flat(const float* __restrict__ x, const float* __restrict__ bias,
                           float* __restrict__ y, long long total, int cols) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < total) y[i] = chain_op(x[i], bias, (int)(i % cols));
}

extern "C" void chain(const float* x, const float* bias, float* y, long long rows, int cols) {
    long long total = rows * cols;
    if (total <= 0) return;
    chain_flat<<<(unsigned)((total + $block - 1) / $block), $block>>>(x, bias, y, total, cols);
}
"""

_VEC4 = r"""
// Fused, float4 loads and stores in a grid-stride loop over a few waves of blocks; when
// cols % 4 == 0 every float4 lies inside one row, else a scalar grid-stride loop.
__global__ void chain_vec4(const float4* __restrict__ x, const float* __restrict__ bias,
                           float4* __restrict__ y, long long total4, int cols) {
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x; q < total4;
         q += stride) {
        float4 v = x[q];
        int j = (int)((q * 4) % cols);
        v.x = chain_op(v.x, bias, j);
        v.y = chain_op(v.y, bias, j + 1);
        v.z = chain_op(v.z, bias, j + 2);
        v.w = chain_op(v.w, bias, j + 3);
        y[q] = v;
    }
}

__global__ void chain_scalar(const float* __restrict__ x, const float* __restrict__ bias,
                             float* __restrict__ y, long long total, int cols) {
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride)
        y[i] = chain_op(x[i], bias, (int)(i % cols));
}

extern "C" void chain(const float* x, const float* bias, float* y, long long rows, int cols) {
    long long total = rows * cols;
    if (total <= 0) return;
    if (cols % 4 == 0) {
        long long total4 = total / 4;
        long long want = (total4 + $block - 1) / $block;
        unsigned grid = (unsigned)(want < $waves ? want : $waves);
        chain_vec4<<<grid, $block>>>((const float4*)x, bias, (float4*)y, total4, cols);
    } else {
        long long want = (total + $block - 1) / $block;
        unsigned grid = (unsigned)(want < $waves ? want : $waves);
        chain_scalar<<<grid, $block>>>(x, bias, y, total, cols);
    }
}
"""

_FWD = """
x = x.contiguous()
y = torch.empty_like(x)
self.lib.chain(x, $bias, y, x.shape[0], x.shape[1])
return y
"""

_NONLINEAR = [k for k in ELTWISE if k not in ("scale", "shift")]


def _draw_chain(rng: random.Random) -> list[tuple[str, float, float]]:
    n = rng.randint(2, 5)
    ops = [rng.choice(_NONLINEAR)]
    while len(ops) < n:
        ops.append(rng.choice(list(ELTWISE)))
    rng.shuffle(ops)
    out = []
    for name in ops:
        a, b = rng.choice(ELTWISE_CONSTS.get(name, [(0.0, 0.0)]))
        out.append((name, a, b))
    return out


@family("torch_eltwise_chain", TaskKind.TORCH2CUDA, "fusion")
def torch_eltwise_chain(rng: random.Random, index: int):
    chain = _draw_chain(rng)
    has_bias = rng.random() < 0.5
    steps = [eltwise(n, a, b) for n, a, b in chain]
    names = [n for n, _, _ in chain]
    if has_bias:
        pos = rng.randint(0, len(steps))
        steps.insert(pos, ("y = y + self.bias", "v + bias[j]"))
        names.insert(pos, "bias")
    init = "        self.bias = nn.Parameter(torch.randn(dim) * 0.5)\n" if has_bias else ""
    std = rng.choice([1.0, 2.0, 0.5])
    what = "y = x, then " + " -> ".join(names)
    doc = f"Element-wise chain ({len(names)} ops) on a (batch_size, dim) float32 tensor: {what}."
    rows_l, cols_l = rng.choice(ROW_SHAPES)
    body = "".join(f"        {t}\n" for t, _ in steps)
    src = fill(_REF, doc=doc, rows=rows_l, cols=cols_l, init=init, body=body, std=std)
    chain_dev = fill(_CHAIN, steps="".join(f"    v = {c};\n" for _, c in steps))
    block = rng.choice([128, 256, 512])
    unfused = "".join(fill(_UNFUSED_OP, k=k, expr=c) for k, (_, c) in enumerate(steps))
    launches = "".join(
        f"    op{k}_kernel<<<grid, {block}>>>({'x' if k == 0 else 'y'}, y, bias, total, cols);\n"
        for k in range(len(steps))
    )
    unfused += fill(_UNFUSED_HOST, n=len(steps), block=block, launches=launches)
    variants = [
        ("unfused", unfused, ["naive", "unfused", "coalesced"]),
        ("fused_strided", chain_dev + fill(_STRIDED, block=block), ["uncoalesced"]),
        ("fused_flat", chain_dev + fill(_FLAT, block=block), ["coalesced"]),
        (
            "fused_vec4",
            chain_dev + fill(_VEC4, block=block, waves=rng.choice([1056, 2112, 4224])),
            ["coalesced", "vectorized", "grid_stride"],
        ),
    ]
    fwd = fill(_FWD, bias="self.bias.contiguous()" if has_bias else "x")
    impls = []
    for vid, cuda, tags in variants:
        code = native_module(
            f"{doc} ({vid.replace('_', ' ')})", cuda, ", dim: int", init, ", x", fwd
        )
        impls.append(impl(vid, code, tags))
    configs = row_configs(rng, (rows_l, cols_l))
    desc = (
        f"{doc} Memory-bound: fused, the chain is one read and one write per element; "
        "each unfused operator adds a full pass."
    )
    return torch_task(
        "torch_eltwise_chain", index, src, configs, Tolerance(atol=1e-5, rtol=1e-4), impls, desc
    )
