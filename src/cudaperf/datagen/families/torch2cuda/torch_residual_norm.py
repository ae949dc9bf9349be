"""PyTorch→CUDA residual add + normalisation: h = x * alpha + residual, y = act(norm(h)) with
norm LayerNorm (learned weight and bias) or RMSNorm (learned weight), an optional activation,
and optionally h returned as well (the transformer's residual stream, as fused add-norm
kernels do). 2–4 ops. Implementations: three kernels (add, one-thread-per-row statistics,
normalise), one warp per row, one block per row with float4 and the row staged in y."""

from __future__ import annotations

import random

from cudaperf.datagen.base import family, fill, impl, torch_task
from cudaperf.datagen.families.torch2cuda.torch_common import (
    REDUCE,
    ROW_SHAPES,
    draw_chain,
    eltwise,
    native_module,
    reference_template,
    row_configs,
)
from cudaperf.tasks.model import TaskKind, Tolerance

# Returning (y, h) is supported by the evaluator (tuple outputs are compared element-wise),
# but tests/datagen/test_families.py checks a single output tensor; off until it accepts tuples.
_RETURN_H = False

_REF = reference_template(
    {"batch_size": "rows", "dim": "cols"},
    """
    def __init__(self, dim: int):
        super().__init__()
$init
    def forward(self, x: torch.Tensor, residual: torch.Tensor):
$pre        h = $add
        y = $norm
$act$post        return $ret


def get_inputs():
    return [torch.randn(batch_size, dim) * $xstd, torch.randn(batch_size, dim) + $rmean]


def get_init_inputs():
    return [dim]
""",
)

_DEV = r"""
#define ALPHA $alpha
#define EPS $eps
#define CENTER $center
#define WRITE_H $write_h
${pre_fn}${post_fn}__device__ __forceinline__ float resid(float xv, float rv) {
    xv = pre_op(xv);
    return $add_c;
}
__device__ __forceinline__ float finish(float v, float c, float s, const float* w,
                                        const float* b, int j) {
    (void)b;
    v = $out_c;
    $act_c
    return post_op(v);
}
"""

_UNFUSED = r"""
// Unfused (weak on purpose): h written by one kernel, row statistics by one thread per row
// (lanes a row apart: uncoalesced, only `rows` threads), y by a third kernel.
__global__ void add_kernel(const float* x, const float* res, float* h, long long total) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < total) h[i] = resid(x[i], res[i]);
}

__global__ void stats_kernel(const float* h, float* stats, int rows, int cols) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* hr = h + (long long)r * cols;
    float c = 0.0f;
#if CENTER
    for (int j = 0; j < cols; ++j) c += hr[j];
    c /= (float)cols;
#endif
    float acc = 0.0f;
    for (int j = 0; j < cols; ++j) { float d = hr[j] - c; acc += d * d; }
    stats[2 * r] = c;
    stats[2 * r + 1] = rsqrtf(acc / (float)cols + EPS);
}

__global__ void norm_kernel(const float* h, const float* stats, const float* w, const float* b,
                            float* y, long long total, int cols) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total) return;
    long long r = i / cols;
    y[i] = finish(h[i], stats[2 * r], stats[2 * r + 1], w, b, (int)(i % cols));
}

extern "C" void add_norm(const float* x, const float* res, const float* w, const float* b,
                         float* y, float* h, float* stats, int rows, int cols) {
    long long total = (long long)rows * cols;
    if (total <= 0) return;
    unsigned grid = (unsigned)((total + 255) / 256);
    add_kernel<<<grid, 256>>>(x, res, h, total);
    stats_kernel<<<(rows + $block - 1) / $block, $block>>>(h, stats, rows, cols);
    norm_kernel<<<grid, 256>>>(h, stats, w, b, y, total, cols);
}
"""

_WARP = r"""
// One warp per row ($wpb per block): coalesced strided loops, statistics by butterfly
// shuffles; x and residual are re-read (from L2) in each of the passes.
__global__ void add_norm_warp(const float* __restrict__ x, const float* __restrict__ res,
                              const float* __restrict__ w, const float* __restrict__ b,
                              float* __restrict__ y, float* __restrict__ h, int rows, int cols) {
    int r = blockIdx.x * $wpb + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (r >= rows) return;
    long long off = (long long)r * cols;
    float c = 0.0f;
#if CENTER
    float sum = 0.0f;
    for (int j = lane; j < cols; j += 32) sum += resid(x[off + j], res[off + j]);
    c = warp_sum(sum) / (float)cols;
#endif
    float acc = 0.0f;
    for (int j = lane; j < cols; j += 32) {
        float d = resid(x[off + j], res[off + j]) - c;
        acc += d * d;
    }
    float s = rsqrtf(warp_sum(acc) / (float)cols + EPS);
    for (int j = lane; j < cols; j += 32) {
        float hv = resid(x[off + j], res[off + j]);
#if WRITE_H
        h[off + j] = hv;
#endif
        y[off + j] = finish(hv, c, s, w, b, j);
    }
}

extern "C" void add_norm(const float* x, const float* res, const float* w, const float* b,
                         float* y, float* h, int rows, int cols) {
    if (rows > 0 && cols > 0)
        add_norm_warp<<<(rows + $wpb - 1) / $wpb, $wpb * 32>>>(x, res, w, b, y, h, rows, cols);
}
"""

_BLOCK = r"""
// One block of $block threads per row. Pass 1 reads x and residual once (float4 when
// cols % 4 == 0) and stages h in y; passes 2 and 3 re-read only the thread's own staged
// values, so no barrier is needed between them. Block sums: shuffles + shared memory.
__global__ void __launch_bounds__($block)
add_norm_block(const float* __restrict__ x, const float* __restrict__ res,
               const float* __restrict__ w, const float* __restrict__ b, float* y, float* h,
               int cols) {
    long long off = (long long)blockIdx.x * cols;
    bool vec = (cols & 3) == 0;
    int n4 = vec ? cols / 4 : 0;
    float sum = 0.0f;
    for (int q = threadIdx.x; q < n4; q += $block) {
        float4 a = reinterpret_cast<const float4*>(x + off)[q];
        float4 r = reinterpret_cast<const float4*>(res + off)[q];
        float4 v = make_float4(resid(a.x, r.x), resid(a.y, r.y), resid(a.z, r.z), resid(a.w, r.w));
        reinterpret_cast<float4*>(y + off)[q] = v;
        sum += (v.x + v.y) + (v.z + v.w);
    }
    for (int j = 4 * n4 + threadIdx.x; j < cols; j += $block) {
        float v = resid(x[off + j], res[off + j]);
        y[off + j] = v;
        sum += v;
    }
    float c = 0.0f;
#if CENTER
    c = block_sum(sum) / (float)cols;
#endif
    float acc = 0.0f;
    for (int q = threadIdx.x; q < n4; q += $block) {
        float4 v = reinterpret_cast<const float4*>(y + off)[q];
        float d0 = v.x - c, d1 = v.y - c, d2 = v.z - c, d3 = v.w - c;
        acc += (d0 * d0 + d1 * d1) + (d2 * d2 + d3 * d3);
    }
    for (int j = 4 * n4 + threadIdx.x; j < cols; j += $block) {
        float d = y[off + j] - c;
        acc += d * d;
    }
    float s = rsqrtf(block_sum(acc) / (float)cols + EPS);
    for (int q = threadIdx.x; q < n4; q += $block) {
        float4 v = reinterpret_cast<const float4*>(y + off)[q];
#if WRITE_H
        reinterpret_cast<float4*>(h + off)[q] = v;
#endif
        int j = 4 * q;
        v = make_float4(finish(v.x, c, s, w, b, j), finish(v.y, c, s, w, b, j + 1),
                        finish(v.z, c, s, w, b, j + 2), finish(v.w, c, s, w, b, j + 3));
        reinterpret_cast<float4*>(y + off)[q] = v;
    }
    for (int j = 4 * n4 + threadIdx.x; j < cols; j += $block) {
        float v = y[off + j];
#if WRITE_H
        h[off + j] = v;
#endif
        y[off + j] = finish(v, c, s, w, b, j);
    }
}

extern "C" void add_norm(const float* x, const float* res, const float* w, const float* b,
                         float* y, float* h, int rows, int cols) {
    if (rows > 0 && cols > 0) add_norm_block<<<rows, $block>>>(x, res, w, b, y, h, cols);
}
"""


@family("torch_residual_norm", TaskKind.TORCH2CUDA, "layernorm")
def torch_residual_norm(rng: random.Random, index: int):
    kind = rng.choice(["layernorm", "rmsnorm"])
    alpha = rng.choice([1.0, 1.0, 0.5, 2.0, 0.7071])
    eps = rng.choice([1e-5, 1e-6, 1e-5 * 2, 1e-3])
    act = rng.choice(["none", "none", "relu", "gelu_tanh", "silu"])
    ret_h = rng.random() < 0.5 and _RETURN_H
    init = "self.weight = nn.Parameter(torch.rand(dim) + 0.5)\n"
    if kind == "layernorm":
        init += "self.bias = nn.Parameter(torch.randn(dim) * 0.1)\n"
        norm = f"torch.nn.functional.layer_norm(h, (h.shape[1],), self.weight, self.bias, {eps})"
        out_c, b_arg = "(v - c) * s * w[j] + b[j]", "self.bias.contiguous()"
    else:
        norm = f"h * torch.rsqrt(h.pow(2).mean(dim=1, keepdim=True) + {eps}) * self.weight"
        out_c, b_arg = "v * s * w[j]", "self.weight.contiguous()"
    add = "x + residual" if alpha == 1.0 else f"x * {alpha} + residual"
    act_py, act_c = ("", "") if act == "none" else eltwise(act)
    pre, post = draw_chain(rng, 0, 2), draw_chain(rng, 0, 1)
    what = f"x = {pre.describe()} of x; " if pre else ""
    what += f"h = {add}; y = {kind}(h)" + (f", then {act}" if act != "none" else "")
    what += f", then {post.describe()}" if post else ""
    what += "; returns (y, h)" if ret_h else "; returns y"
    doc = f"Residual add + {kind} on (batch_size, dim) float32 tensors: {what}."
    rows_l, cols_l = rng.choice(ROW_SHAPES)
    src = fill(
        _REF,
        doc=doc,
        rows=rows_l,
        cols=cols_l,
        init="".join(f"        {ln}\n" for ln in init.splitlines()),
        add=add,
        norm=norm,
        act=f"        {act_py}\n" if act_py else "",
        ret="y, h" if ret_h else "y",
        pre=pre.torch("x"),
        post=post.torch("y"),
        xstd=rng.choice([1.0, 0.5, 2.0]),
        rmean=rng.choice([0.0, 0.5, -0.25]),
    )
    dev = fill(
        _DEV,
        pre_fn=pre.device("pre_op"),
        post_fn=post.device("post_op"),
        alpha=f"{alpha}f",
        eps=f"{eps}f",
        center=int(kind == "layernorm"),
        write_h=int(ret_h),
        add_c="xv + rv" if alpha == 1.0 else "xv * ALPHA + rv",
        out_c=out_c,
        act_c=f"v = {act_c};" if act_c else "",
    )
    head = "x = x.contiguous()\nresidual = residual.contiguous()\ny = torch.empty_like(x)\n"
    ret = "return y, h\n" if ret_h else "return y\n"
    call = f"self.weight.contiguous(), {b_arg}, y, h, x.shape[0], x.shape[1]"
    h_fused = "h = torch.empty_like(x)\n" if ret_h else "h = y\n"
    fwd_unfused = (
        head
        + "h = torch.empty_like(x)\n"
        + "stats = torch.empty(2 * x.shape[0], device=x.device, dtype=x.dtype)\n"
        + f"self.lib.add_norm(x, residual, {call.replace(', x.shape[0]', ', stats, x.shape[0]')})\n"
        + ret
    )
    fwd_fused = head + h_fused + f"self.lib.add_norm(x, residual, {call})\n" + ret
    variants = [
        (
            "unfused_row_thread",
            _UNFUSED,
            fwd_unfused,
            ["naive", "unfused", "uncoalesced"],
            {"block": rng.choice([64, 128])},
        ),
        (
            "warp_per_row",
            REDUCE + _WARP,
            fwd_fused,
            ["warp_shuffle", "coalesced"],
            {"wpb": rng.choice([4, 8])},
        ),
        (
            "block_per_row_vec4",
            REDUCE + _BLOCK,
            fwd_fused,
            ["warp_shuffle", "smem_reduction", "coalesced", "vectorized"],
            {"block": rng.choice([256, 512, 1024])},
        ),
    ]
    impls = []
    for vid, tmpl, fwd, tags, extra in variants:
        cuda = dev + fill(tmpl, **extra)
        code = native_module(
            f"{doc} ({vid.replace('_', ' ')})", cuda, ", dim: int", init, ", x, residual", fwd
        )
        impls.append(impl(vid, code, tags))
    configs = row_configs(rng, (rows_l, cols_l), 512, (1024, 2048, 4096))
    desc = (
        f"{doc} Memory-bound: each row needs its statistics before it is written; a fused "
        "kernel reads x and residual once and writes y (and h) once."
    )
    tol = Tolerance(atol=1e-4, rtol=1e-4)
    return torch_task("torch_residual_norm", index, src, configs, tol, impls, desc)
