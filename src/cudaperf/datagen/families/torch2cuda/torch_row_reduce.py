"""PyTorch→CUDA reductions after element-wise work, per row of a (batch_size, dim) tensor:
mean squared / absolute difference against a target, RMS, unbiased variance, logsumexp of a
scaled input, and L2 row normalisation (F.normalize, then a scale). Every kind is an
optional first statistic `a` (a sum or a max), a sum `s` of a per-element term that may use
`a`, then either one value per row or an element-wise output. Implementations: one thread
per row, one warp per row, one block per row with float4 loads."""

from __future__ import annotations

import random

from cudaperf.datagen.base import family, fill, impl, torch_task
from cudaperf.datagen.families.torch2cuda.torch_common import (
    REDUCE,
    draw_chain,
    native_module,
    reference_template,
    row_configs,
)
from cudaperf.tasks.model import TaskKind, Tolerance

# kind -> (torch expression, first statistic: "", "sum" or "max", its per-element term,
#          per-element term of s, finish (a, s) -> row value, or element-wise output of (v, s))
_KINDS = {
    "mse": ("((x - target) ** 2).mean(dim=1)", "", "", "(v - t) * (v - t)", "s / (float)cols"),
    "l1": ("(x - target).abs().mean(dim=1)", "", "", "fabsf(v - t)", "s / (float)cols"),
    "mean": ("x.mean(dim=1)", "", "", "v", "s / (float)cols"),
    "l1_mean_target": (
        "(x.abs() * target.abs()).mean(dim=1)",
        "",
        "",
        "fabsf(v * t)",
        "s / (float)cols",
    ),
    "std": ("x.std(dim=1)", "sum", "v", "(v - a) * (v - a)", "sqrtf(s / (float)(cols - 1))"),
    "center": ("x - x.mean(dim=1, keepdim=True)", "sum", "v", "0.0f", "v - a"),
    "rms": ("x.pow(2).mean(dim=1).sqrt()", "", "", "v * v", "sqrtf(s / (float)cols)"),
    "var": ("x.var(dim=1)", "sum", "v", "(v - a) * (v - a)", "s / (float)(cols - 1)"),
    "logsumexp": (
        "torch.logsumexp(x * $scale, dim=1)",
        "max",
        "v * ${scale}f",
        "expf(v * ${scale}f - a)",
        "a + logf(s)",
    ),
    "l2norm": (
        "torch.nn.functional.normalize(x, p=2.0, dim=1, eps=$eps) * $scale",
        "",
        "",
        "v * v",
        "v * ${scale}f / fmaxf(sqrtf(s), ${eps}f)",
    ),
}

_REF = reference_template(
    {"batch_size": "rows", "dim": "cols"},
    """
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor$targ) -> torch.Tensor:
$pre        y = $expr
$post        return y


def get_inputs():
    return [torch.randn(batch_size, dim) * $std + $mean$tin]


def get_init_inputs():
    return []
""",
)

_DEV = r"""
#define STAT_A $stat_a
#define A_IS_MAX $a_max
#define ELEMENTWISE $elementwise
${pre_fn}${post_fn}__device__ __forceinline__ float term_a(float v) {
    v = pre_op(v);
    return $ta;
}
__device__ __forceinline__ float term_s(float v, float t, float a) {
    v = pre_op(v);
    (void)t;
    (void)a;
    return $ts;
}
// ELEMENTWISE: the output of element v; otherwise the row's value.
__device__ __forceinline__ float finish(float v, float a, float s, int cols) {
    (void)v;
    (void)a;
    (void)cols;
    v = pre_op(v);
    return post_op($fin);
}
"""

_ROW = r"""
// One thread per row, sequential passes; lanes of a warp are a row apart (uncoalesced).
__global__ void reduce_rows(const float* x, const float* tg, float* out, int rows, int cols) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* xr = x + (long long)r * cols;
    const float* tr = tg + (long long)r * cols;
    float a = 0.0f;
#if STAT_A
    a = A_IS_MAX ? -INFINITY : 0.0f;
    for (int j = 0; j < cols; ++j) a = A_IS_MAX ? fmaxf(a, term_a(xr[j])) : a + term_a(xr[j]);
    if (!A_IS_MAX) a /= (float)cols;
#endif
    float s = 0.0f;
    for (int j = 0; j < cols; ++j) s += term_s(xr[j], tr[j], a);
#if ELEMENTWISE
    for (int j = 0; j < cols; ++j) out[(long long)r * cols + j] = finish(xr[j], a, s, cols);
#else
    out[r] = finish(0.0f, a, s, cols);
#endif
}

extern "C" void row_reduce(const float* x, const float* tg, float* out, int rows, int cols) {
    if (rows > 0 && cols > 0)
        reduce_rows<<<(rows + $block - 1) / $block, $block>>>(x, tg, out, rows, cols);
}
"""

_WARP = r"""
// One warp per row ($wpb per block): coalesced strided loops, butterfly shuffles.
__global__ void reduce_warp(const float* __restrict__ x, const float* __restrict__ tg,
                            float* __restrict__ out, int rows, int cols) {
    int r = blockIdx.x * $wpb + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (r >= rows) return;
    const float* xr = x + (long long)r * cols;
    const float* tr = tg + (long long)r * cols;
    float a = 0.0f;
#if STAT_A
    a = A_IS_MAX ? -INFINITY : 0.0f;
    for (int j = lane; j < cols; j += 32)
        a = A_IS_MAX ? fmaxf(a, term_a(xr[j])) : a + term_a(xr[j]);
    a = A_IS_MAX ? warp_max(a) : warp_sum(a) / (float)cols;
#endif
    float s = 0.0f;
    for (int j = lane; j < cols; j += 32) s += term_s(xr[j], tr[j], a);
    s = warp_sum(s);
#if ELEMENTWISE
    for (int j = lane; j < cols; j += 32) out[(long long)r * cols + j] = finish(xr[j], a, s, cols);
#else
    if (lane == 0) out[r] = finish(0.0f, a, s, cols);
#endif
}

extern "C" void row_reduce(const float* x, const float* tg, float* out, int rows, int cols) {
    if (rows > 0 && cols > 0)
        reduce_warp<<<(rows + $wpb - 1) / $wpb, $wpb * 32>>>(x, tg, out, rows, cols);
}
"""

_BLOCK = r"""
// One block of $block threads per row; float4 loads when cols % 4 == 0 (rows then start
// 16-byte aligned), scalar otherwise; block reductions by shuffles + shared memory.
__global__ void __launch_bounds__($block)
reduce_block(const float* __restrict__ x, const float* __restrict__ tg, float* __restrict__ out,
             int cols) {
    long long off = (long long)blockIdx.x * cols;
    const float* xr = x + off;
    const float* tr = tg + off;
    int n4 = (cols & 3) == 0 ? cols / 4 : 0;
    const float4* x4 = reinterpret_cast<const float4*>(xr);
    const float4* t4 = reinterpret_cast<const float4*>(tr);
    float a = 0.0f;
#if STAT_A
    a = A_IS_MAX ? -INFINITY : 0.0f;
    for (int q = threadIdx.x; q < n4; q += $block) {
        float4 v = x4[q];
        float e0 = term_a(v.x), e1 = term_a(v.y), e2 = term_a(v.z), e3 = term_a(v.w);
        a = A_IS_MAX ? fmaxf(fmaxf(a, fmaxf(e0, e1)), fmaxf(e2, e3)) : a + ((e0 + e1) + (e2 + e3));
    }
    for (int j = 4 * n4 + threadIdx.x; j < cols; j += $block)
        a = A_IS_MAX ? fmaxf(a, term_a(xr[j])) : a + term_a(xr[j]);
    a = A_IS_MAX ? block_max(a) : block_sum(a) / (float)cols;
#endif
    float s = 0.0f;
    for (int q = threadIdx.x; q < n4; q += $block) {
        float4 v = x4[q], t = t4[q];
        s += (term_s(v.x, t.x, a) + term_s(v.y, t.y, a)) +
             (term_s(v.z, t.z, a) + term_s(v.w, t.w, a));
    }
    for (int j = 4 * n4 + threadIdx.x; j < cols; j += $block) s += term_s(xr[j], tr[j], a);
    s = block_sum(s);
#if ELEMENTWISE
    float4* o4 = reinterpret_cast<float4*>(out + off);
    for (int q = threadIdx.x; q < n4; q += $block) {
        float4 v = x4[q];
        o4[q] = make_float4(finish(v.x, a, s, cols), finish(v.y, a, s, cols),
                            finish(v.z, a, s, cols), finish(v.w, a, s, cols));
    }
    for (int j = 4 * n4 + threadIdx.x; j < cols; j += $block)
        out[off + j] = finish(xr[j], a, s, cols);
#else
    if (threadIdx.x == 0) out[blockIdx.x] = finish(0.0f, a, s, cols);
#endif
}

extern "C" void row_reduce(const float* x, const float* tg, float* out, int rows, int cols) {
    if (rows > 0 && cols > 0) reduce_block<<<rows, $block>>>(x, tg, out, cols);
}
"""


@family("torch_row_reduce", TaskKind.TORCH2CUDA, "reduction")
def torch_row_reduce(rng: random.Random, index: int):
    kind = rng.choice(list(_KINDS))
    scale = rng.choice([0.5, 1.0, 2.0, 0.125, 4.0])
    eps = rng.choice([1e-12, 1e-8, 1e-6])
    expr, stat_a, ta, ts, fin = (fill(s, scale=scale, eps=eps) for s in _KINDS[kind])
    two = kind in ("mse", "l1", "l1_mean_target")
    elementwise = kind in ("l2norm", "center")
    pre, post = draw_chain(rng, 0, 2), draw_chain(rng, 0, 1)
    what = {
        "mse": "mean squared difference of x and target per row",
        "l1": "mean absolute difference of x and target per row",
        "rms": "root mean square per row",
        "var": "unbiased variance per row",
        "logsumexp": f"logsumexp of x * {scale} per row",
        "l2norm": f"L2-normalised rows (eps={eps}) times {scale}",
        "mean": "mean per row",
        "l1_mean_target": "mean of |x * target| per row",
        "std": "unbiased standard deviation per row",
        "center": "rows minus their mean",
    }[kind]
    if pre:
        what += f", x first going through {pre.describe()}"
    if post:
        what += f"; the result then goes through {post.describe()}"
    doc = f"Row-wise {what}, on a (batch_size, dim) float32 input."
    rows_l, cols_l = rng.choice(
        [(8192, 4096), (4096, 8192), (16384, 2048)]
        if two or elementwise
        else [(16384, 4096), (8192, 8192), (65536, 1024)]
    )
    src = fill(
        _REF,
        doc=doc,
        rows=rows_l,
        cols=cols_l,
        targ=", target: torch.Tensor" if two else "",
        expr=expr,
        pre=pre.torch("x"),
        post=post.torch("y"),
        std=rng.choice([1.0, 2.0, 0.5]),
        mean=rng.choice([0.0, 0.5, -1.0, 2.0]),
        tin=", torch.randn(batch_size, dim)" if two else "",
    )
    dev = fill(
        _DEV,
        pre_fn=pre.device("pre_op"),
        post_fn=post.device("post_op"),
        stat_a=int(bool(stat_a)),
        a_max=int(stat_a == "max"),
        elementwise=int(elementwise),
        ta=ta or "v",
        ts=ts,
        fin=fin,
    )
    out_alloc = (
        "torch.empty_like(x)"
        if elementwise
        else "torch.empty(x.shape[0], device=x.device, dtype=x.dtype)"
    )
    fwd = (
        "x = x.contiguous()\n"
        + ("target = target.contiguous()\n" if two else "")
        + f"out = {out_alloc}\n"
        + f"self.lib.row_reduce(x, {'target' if two else 'x'}, out, x.shape[0], x.shape[1])\n"
        + "return out\n"
    )
    variants = [
        ("row_per_thread", _ROW, ["naive", "uncoalesced"], {"block": rng.choice([64, 128, 256])}),
        (
            "warp_per_row",
            REDUCE + _WARP,
            ["warp_shuffle", "coalesced"],
            {"wpb": rng.choice([4, 8])},
        ),
        (
            "block_per_row_vec4",
            REDUCE + _BLOCK,
            ["warp_shuffle", "smem_reduction", "coalesced", "vectorized"],
            {"block": rng.choice([256, 512])},
        ),
    ]
    impls = []
    for vid, tmpl, tags, extra in variants:
        cuda = dev + fill(tmpl, **extra)
        fargs = ", x, target" if two else ", x"
        code = native_module(f"{doc} ({vid.replace('_', ' ')})", cuda, "", "", fargs, fwd)
        impls.append(impl(vid, code, tags))
    configs = row_configs(rng, (rows_l, cols_l))
    desc = f"{doc} Memory-bound: one read of each input; the reduction order is free."
    tol = Tolerance(atol=1e-5, rtol=1e-4)
    return torch_task("torch_row_reduce", index, src, configs, tol, impls, desc)
