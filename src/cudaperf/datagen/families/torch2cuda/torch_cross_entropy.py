"""PyTorch→CUDA cross-entropy from logits and int64 targets: optional temperature scale, a
drawn element-wise chain on the logits, label smoothing, reduction 'none', 'mean' or 'sum'.
Per row: loss = lse - (1-eps) x[t] - eps/C sum x
with lse the row's logsumexp (2–4 ops). Implementations: one thread per row (and a one-thread
mean), one warp per row, one block per row with an online max/sum (and a block-reduced mean)."""

from __future__ import annotations

import random

from cudaperf.datagen.base import family, fill, impl, torch_task
from cudaperf.datagen.families.torch2cuda.torch_common import (
    REDUCE,
    draw_chain,
    native_module,
    reference_template,
    torch_configs,
)
from cudaperf.tasks.model import TaskKind, Tolerance

_REF = reference_template(
    {"batch_size": "n", "num_classes": "c"},
    """
    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        x = $logits
$pre        return torch.nn.functional.cross_entropy(
            x, targets, reduction="$reduction", label_smoothing=$eps
        )


def get_inputs():
    logits = torch.randn(batch_size, num_classes) * $std
    return [logits, torch.randint(0, num_classes, (batch_size,))]


def get_init_inputs():
    return []
""",
)

_DEV = r"""
#define EPS_LS $eps
#define REDUCED $reduced
#define DENOM(n) $denom
${pre_fn}__device__ __forceinline__ float logit(float v) { return pre_op($logit); }
__device__ __forceinline__ float row_loss(float m, float sum, float sumx, float xt, int C) {
    float lse = m + logf(sum);
    return (1.0f - EPS_LS) * (lse - xt) + EPS_LS * (lse - sumx / (float)C);
}
"""

_ROW = r"""
// One thread per row (lanes a row apart: uncoalesced), then one thread sums the losses for
// the mean (weak on purpose).
__global__ void ce_rows(const float* x, const long long* tg, float* loss, int N, int C) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= N) return;
    const float* xr = x + (long long)r * C;
    float m = -INFINITY, sum = 0.0f, sumx = 0.0f;
    for (int j = 0; j < C; ++j) m = fmaxf(m, logit(xr[j]));
    for (int j = 0; j < C; ++j) {
        float v = logit(xr[j]);
        sum += expf(v - m);
        sumx += v;
    }
    loss[r] = row_loss(m, sum, sumx, logit(xr[tg[r]]), C);
}

__global__ void mean_serial(const float* loss, float* out, int N) {
    float s = 0.0f;
    for (int i = 0; i < N; ++i) s += loss[i];
    out[0] = s / DENOM(N);
}

extern "C" void cross_entropy(const float* x, const long long* tg, float* loss, float* out, int N,
                              int C) {
    if (N <= 0 || C <= 0) return;
    ce_rows<<<(N + $block - 1) / $block, $block>>>(x, tg, REDUCED ? loss : out, N, C);
    if (REDUCED) mean_serial<<<1, 1>>>(loss, out, N);
}
"""

_MEAN_BLOCK = r"""
// Mean of the per-row losses: one block, strided coalesced loads, block reduction.
__global__ void __launch_bounds__(1024) mean_block(const float* loss, float* out, int N) {
    float s = 0.0f;
    for (int i = threadIdx.x; i < N; i += 1024) s += loss[i];
    s = block_sum(s);
    if (threadIdx.x == 0) out[0] = s / DENOM(N);
}
"""

_WARP = r"""
// One warp per row ($wpb per block): coalesced strided loops, butterfly shuffles for the
// max and the sums.
__global__ void ce_warp(const float* __restrict__ x, const long long* __restrict__ tg,
                        float* __restrict__ loss, int N, int C) {
    int r = blockIdx.x * $wpb + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (r >= N) return;
    const float* xr = x + (long long)r * C;
    float m = -INFINITY, sum = 0.0f, sumx = 0.0f;
    for (int j = lane; j < C; j += 32) m = fmaxf(m, logit(xr[j]));
    m = warp_max(m);
    for (int j = lane; j < C; j += 32) {
        float v = logit(xr[j]);
        sum += expf(v - m);
        sumx += v;
    }
    sum = warp_sum(sum);
    sumx = warp_sum(sumx);
    if (lane == 0) loss[r] = row_loss(m, sum, sumx, logit(xr[tg[r]]), C);
}

extern "C" void cross_entropy(const float* x, const long long* tg, float* loss, float* out, int N,
                              int C) {
    if (N <= 0 || C <= 0) return;
    ce_warp<<<(N + $wpb - 1) / $wpb, $wpb * 32>>>(x, tg, REDUCED ? loss : out, N, C);
    if (REDUCED) mean_block<<<1, 1024>>>(loss, out, N);
}
"""

_BLOCK = r"""
// One block of $block threads per row, one read of the row: each thread keeps a running
// (max, sum of exp) pair (online softmax) and the sum of logits; the block combines them.
__global__ void __launch_bounds__($block)
ce_block(const float* __restrict__ x, const long long* __restrict__ tg, float* __restrict__ loss,
         int C) {
    const float* xr = x + (long long)blockIdx.x * C;
    float m = -INFINITY, sum = 0.0f, sumx = 0.0f;
    for (int j = threadIdx.x; j < C; j += $block) {
        float v = logit(xr[j]);
        sumx += v;
        if (v > m) {
            sum = sum * expf(m - v) + 1.0f;
            m = v;
        } else {
            sum += expf(v - m);
        }
    }
    float bm = block_max(m);
    float tot = block_sum(m == -INFINITY ? 0.0f : sum * expf(m - bm));
    sumx = block_sum(sumx);
    if (threadIdx.x == 0) loss[blockIdx.x] = row_loss(bm, tot, sumx, logit(xr[tg[blockIdx.x]]), C);
}

extern "C" void cross_entropy(const float* x, const long long* tg, float* loss, float* out, int N,
                              int C) {
    if (N <= 0 || C <= 0) return;
    ce_block<<<N, $block>>>(x, tg, REDUCED ? loss : out, C);
    if (REDUCED) mean_block<<<1, 1024>>>(loss, out, N);
}
"""


@family("torch_cross_entropy", TaskKind.TORCH2CUDA, "loss")
def torch_cross_entropy(rng: random.Random, index: int):
    reduction = rng.choice(["none", "mean", "sum"])
    eps = rng.choice([0.0, 0.0, 0.1, 0.05])
    temp = rng.choice([None, None, 0.5, 2.0, 0.7])
    std = rng.choice([1.0, 2.0, 4.0])
    n_l, c_l = rng.choice([(8192, 8192), (4096, 32000), (16384, 4096), (2048, 50257)])
    logits = f"logits / {temp}" if temp else "logits"
    pre = draw_chain(rng, 0, 2, exclude=("scale",))
    if pre:
        logits += f" through {pre.describe()}"
    what = f"cross_entropy({logits}, targets, reduction={reduction!r}, label_smoothing={eps})"
    doc = f"Cross-entropy of (batch_size, num_classes) float32 logits and int64 targets: {what}."
    src = fill(
        _REF,
        doc=doc,
        n=n_l,
        c=c_l,
        logits=f"logits / {temp}" if temp else "logits",
        pre=pre.torch("x"),
        reduction=reduction,
        eps=eps,
        std=std,
    )
    dev = fill(
        _DEV,
        eps=f"{eps}f",
        reduced=int(reduction != "none"),
        denom="((float)(n))" if reduction == "mean" else "1.0f",
        pre_fn=pre.device("pre_op"),
        logit=f"v / {temp}f" if temp else "v",
    )
    out = "torch.empty((), device=x.device, dtype=x.dtype)" if reduction != "none" else "loss"
    fwd = (
        "x = logits.contiguous()\n"
        "targets = targets.contiguous()\n"
        "loss = torch.empty(x.shape[0], device=x.device, dtype=x.dtype)\n"
        f"out = {out}\n"
        "self.lib.cross_entropy(x, targets, loss, out, x.shape[0], x.shape[1])\n"
        "return out\n"
    )
    variants = [
        ("row_per_thread", _ROW, ["naive", "uncoalesced"], {"block": rng.choice([64, 128])}),
        (
            "warp_per_row",
            REDUCE + _MEAN_BLOCK + _WARP,
            ["warp_shuffle", "coalesced"],
            {"wpb": rng.choice([4, 8])},
        ),
        (
            "block_online",
            REDUCE + _MEAN_BLOCK + _BLOCK,
            ["warp_shuffle", "smem_reduction", "coalesced", "online_softmax"],
            {"block": rng.choice([256, 512, 1024])},
        ),
    ]
    impls = []
    for vid, tmpl, tags, extra in variants:
        code = native_module(
            f"{doc} ({vid.replace('_', ' ')})",
            dev + fill(tmpl, **extra),
            "",
            "",
            ", logits, targets",
            fwd,
        )
        impls.append(impl(vid, code, tags))
    r = rng.randrange
    configs = torch_configs(
        {"batch_size": r(3, 9), "num_classes": r(10, 1200)},
        {"batch_size": 1024, "num_classes": rng.choice([1000, 4096])},
        {"batch_size": n_l, "num_classes": c_l},
        {"batch_size": r(500, 1500), "num_classes": r(1001, 12000)},
    )
    desc = (
        f"{doc} Memory-bound: each row of logits is read once for its logsumexp; the target "
        "logit is one gathered element per row."
    )
    tol = Tolerance(atol=1e-5, rtol=1e-4)
    return torch_task("torch_cross_entropy", index, src, configs, tol, impls, desc)
