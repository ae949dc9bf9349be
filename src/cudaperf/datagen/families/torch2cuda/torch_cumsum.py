"""PyTorch→CUDA cumulative sums along the rows of a (batch_size, dim) tensor: an optional
element-wise pre-op (scale, ReLU, square, abs), a forward or reversed (flip-cumsum-flip)
inclusive scan, and an optional post scale (2–4 ops). Implementations: one thread per row
(sequential), one warp per row (shuffle scans over 32-element chunks with a carry), one
block per row (warp scans, warp totals scanned through shared memory, a running carry)."""

from __future__ import annotations

import random

from cudaperf.datagen.base import family, fill, impl, torch_task
from cudaperf.datagen.families.torch2cuda.torch_common import (
    ROW_SHAPES,
    draw_chain,
    native_module,
    reference_template,
    row_configs,
)
from cudaperf.tasks.model import TaskKind, Tolerance

_REF = reference_template(
    {"batch_size": "rows", "dim": "cols"},
    """
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = $pre
$chain        y = $scan
$post$after        return y


def get_inputs():
    return [torch.rand(batch_size, dim) * $a + $b]


def get_init_inputs():
    return []
""",
)

_DEV = r"""
#define REV $rev
// Column of the k-th element in scan order, the pre-op, and the post-op.
__device__ __forceinline__ int col(int k, int cols) { return REV ? cols - 1 - k : k; }
${chain_fn}${after_fn}__device__ __forceinline__ float pre(float v) { return pre_chain($pre); }
__device__ __forceinline__ float post(float v) { return post_chain($post); }
"""

_ROW = r"""
// One thread per row, a sequential scan: lanes of a warp are a row apart (uncoalesced), and
// only `rows` threads work (weak on purpose).
__global__ void scan_rows(const float* x, float* y, int rows, int cols) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    long long off = (long long)r * cols;
    float acc = 0.0f;
    for (int k = 0; k < cols; ++k) {
        int j = col(k, cols);
        acc += pre(x[off + j]);
        y[off + j] = post(acc);
    }
}

extern "C" void cumsum_rows(const float* x, float* y, int rows, int cols) {
    if (rows > 0 && cols > 0) scan_rows<<<(rows + $block - 1) / $block, $block>>>(x, y, rows, cols);
}
"""

_WARP = r"""
// One warp per row ($wpb per block): 32 consecutive elements per step (coalesced), an
// inclusive Kogge-Stone scan with __shfl_up_sync, and the chunk total carried to the next.
__global__ void scan_warp(const float* __restrict__ x, float* __restrict__ y, int rows,
                          int cols) {
    int r = blockIdx.x * $wpb + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (r >= rows) return;
    long long off = (long long)r * cols;
    float carry = 0.0f;
    for (int k0 = 0; k0 < cols; k0 += 32) {
        int k = k0 + lane;
        float v = k < cols ? pre(x[off + col(k, cols)]) : 0.0f;
        for (int d = 1; d < 32; d <<= 1) {
            float u = __shfl_up_sync(0xffffffffu, v, d);
            if (lane >= d) v += u;
        }
        v += carry;
        if (k < cols) y[off + col(k, cols)] = post(v);
        carry = __shfl_sync(0xffffffffu, v, 31);
    }
}

extern "C" void cumsum_rows(const float* x, float* y, int rows, int cols) {
    if (rows > 0 && cols > 0)
        scan_warp<<<(rows + $wpb - 1) / $wpb, $wpb * 32>>>(x, y, rows, cols);
}
"""

_BLOCK = r"""
// One block of $block threads per row, $block consecutive elements per step (coalesced):
// each warp scans its 32 with shuffles, the warp totals are scanned by warp 0 through shared
// memory, and a running carry joins the steps.
#define BLOCK $block
__global__ void __launch_bounds__(BLOCK)
scan_block(const float* __restrict__ x, float* __restrict__ y, int cols) {
    __shared__ float warp_tot[BLOCK / 32];
    __shared__ float chunk_tot;
    long long off = (long long)blockIdx.x * cols;
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    float carry = 0.0f;
    for (int k0 = 0; k0 < cols; k0 += BLOCK) {
        int k = k0 + threadIdx.x;
        float v = k < cols ? pre(x[off + col(k, cols)]) : 0.0f;
        for (int d = 1; d < 32; d <<= 1) {
            float u = __shfl_up_sync(0xffffffffu, v, d);
            if (lane >= d) v += u;
        }
        if (lane == 31) warp_tot[w] = v;
        __syncthreads();
        if (w == 0) {
            float t = lane < BLOCK / 32 ? warp_tot[lane] : 0.0f;
            for (int d = 1; d < 32; d <<= 1) {
                float u = __shfl_up_sync(0xffffffffu, t, d);
                if (lane >= d) t += u;
            }
            if (lane < BLOCK / 32) warp_tot[lane] = t;
            if (lane == 31) chunk_tot = t;
        }
        __syncthreads();
        if (w > 0) v += warp_tot[w - 1];
        v += carry;
        if (k < cols) y[off + col(k, cols)] = post(v);
        carry += chunk_tot;
        __syncthreads();
    }
}

extern "C" void cumsum_rows(const float* x, float* y, int rows, int cols) {
    if (rows > 0 && cols > 0) scan_block<<<rows, BLOCK>>>(x, y, cols);
}
"""

_PRE = {
    "none": ("x", "v"),
    "scale": ("x * $a", "v * ${a}f"),
    "relu": ("torch.relu(x - $a)", "fmaxf(v - ${a}f, 0.0f)"),
    "square": ("x * x", "v * v"),
    "abs": ("(x - $a).abs()", "fabsf(v - ${a}f)"),
}


@family("torch_cumsum", TaskKind.TORCH2CUDA, "scan")
def torch_cumsum(rng: random.Random, index: int):
    pre_kind = rng.choice(list(_PRE))
    a = rng.choice([0.5, 0.25, 2.0])
    pre_py, pre_c = (fill(s, a=a) for s in _PRE[pre_kind])
    rev = rng.random() < 0.35
    # the terms stay >= 0 (no cancellation in the prefix sums): no negative scale or shift
    chain = draw_chain(rng, 0, 2, exclude=("scale", "shift"))
    after = draw_chain(rng, 0, 1)
    post = rng.choice([None, None, 0.5, 0.01, 3.0])
    if pre_kind == "none" and post is None:
        post = 0.1
    scan = "y.flip(1).cumsum(dim=1).flip(1)" if rev else "torch.cumsum(y, dim=1)"
    what = f"{'reversed ' if rev else ''}cumulative sum along dim 1 of {pre_py}"
    what += f" through {chain.describe()}" if chain else ""
    what += f", times {post}" if post is not None else ""
    what += f", then {after.describe()}" if after else ""
    doc = f"Row-wise {what}, on a (batch_size, dim) float32 input."
    rows_l, cols_l = rng.choice(ROW_SHAPES)
    src = fill(
        _REF,
        doc=doc,
        rows=rows_l,
        cols=cols_l,
        pre=pre_py,
        scan=scan,
        chain=chain.torch("y"),
        after=after.torch("y"),
        post=f"        y = y * {post}\n" if post is not None else "",
        a=rng.choice([1.0, 2.0]),
        b=rng.choice([0.0, 0.25]),
    )
    dev = fill(
        _DEV,
        chain_fn=chain.device("pre_chain"),
        after_fn=after.device("post_chain"),
        rev=int(rev),
        pre=pre_c,
        post=f"v * {post}f" if post is not None else "v",
    )
    fwd = (
        "x = x.contiguous()\n"
        "y = torch.empty_like(x)\n"
        "self.lib.cumsum_rows(x, y, x.shape[0], x.shape[1])\n"
        "return y\n"
    )
    variants = [
        ("row_sequential", _ROW, ["naive", "uncoalesced"], {"block": rng.choice([64, 128])}),
        ("warp_scan", _WARP, ["warp_shuffle", "coalesced"], {"wpb": rng.choice([4, 8])}),
        (
            "block_scan",
            _BLOCK,
            ["warp_shuffle", "smem_reduction", "coalesced"],
            {"block": rng.choice([256, 512, 1024])},
        ),
    ]
    impls = []
    for vid, tmpl, tags, extra in variants:
        code = native_module(
            f"{doc} ({vid.replace('_', ' ')})", dev + fill(tmpl, **extra), "", "", ", x", fwd
        )
        impls.append(impl(vid, code, tags))
    configs = row_configs(rng, (rows_l, cols_l))
    desc = (
        f"{doc} Memory-bound scan: each output depends on every earlier element of its row; "
        "inputs are non-negative so prefix sums grow and relative rounding stays small."
    )
    tol = Tolerance(atol=1e-5, rtol=2e-4)
    return torch_task("torch_cumsum", index, src, configs, tol, impls, desc)
