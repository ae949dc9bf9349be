"""PyTorch→CUDA scaled + masked attention softmax: scores (batch, heads, seq, seq) are scaled,
optionally soft-capped (cap * tanh(s / cap)), masked (causal, or key padding from per-batch
lengths) with -inf, then softmaxed over the keys (3–5 ops). Both masks keep a prefix of each
row, so kernels compute the row's valid length and skip the rest. Implementations: one
thread per row, one warp per row, one block per row."""

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
    {"batch_size": "b", "heads": "h", "seq_len": "l"},
    """
    def __init__(self):
        super().__init__()

    def forward(self, scores: torch.Tensor$lens_arg) -> torch.Tensor:
        s = scores * $scale
$pre$cap$mask        y = torch.softmax(s, dim=-1)
$post        return y


def get_inputs():
    scores = torch.randn(batch_size, heads, seq_len, seq_len) * $std
$lens_in    return [scores$lens_ret]


def get_init_inputs():
    return []
""",
)

_CAUSAL = (
    "        mask = torch.ones(s.shape[-2], s.shape[-1], dtype=torch.bool, device=s.device)"
    ".triu(1)\n"
    '        s = s.masked_fill(mask, float("-inf"))\n'
)
_PADDING = (
    "        keys = torch.arange(s.shape[-1], device=s.device)\n"
    "        mask = keys[None, :] >= lengths[:, None]\n"
    '        s = s.masked_fill(mask[:, None, None, :], float("-inf"))\n'
)

_DEV = r"""
${pre_fn}${post_fn}// Pre-softmax value of a kept score, and how many leading keys row r keeps.
__device__ __forceinline__ float logit(float v) {
    v = pre_op(v * $scale);
    $cap
    return v;
}
__device__ __forceinline__ int row_keep(long long r, int L, int heads, const long long* lens) {
    (void)heads;
    (void)lens;
    $keep
}
"""

_ROW = r"""
// One thread per row, three sequential passes; lanes of a warp are a row apart, so nothing
// is coalesced (weak on purpose).
__global__ void softmax_rows(const float* x, const long long* lens, float* y, long long rows,
                             int L, int heads) {
    long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* xr = x + r * L;
    float* yr = y + r * L;
    int keep = row_keep(r, L, heads, lens);
    float m = -INFINITY;
    for (int j = 0; j < keep; ++j) m = fmaxf(m, logit(xr[j]));
    float sum = 0.0f;
    for (int j = 0; j < keep; ++j) sum += expf(logit(xr[j]) - m);
    float inv = 1.0f / sum;
    for (int j = 0; j < L; ++j) yr[j] = post_op(j < keep ? expf(logit(xr[j]) - m) * inv : 0.0f);
}

extern "C" void masked_softmax(const float* x, const long long* lens, float* y, long long rows,
                               int L, int heads) {
    if (rows > 0 && L > 0)
        softmax_rows<<<(unsigned)((rows + $block - 1) / $block), $block>>>(x, lens, y, rows, L,
                                                                           heads);
}
"""

_WARP = r"""
// One warp per row ($wpb per block): strided coalesced loops over the kept prefix, max and
// sum by butterfly shuffles; masked keys are written as zeros without being read.
__global__ void softmax_warp(const float* __restrict__ x, const long long* __restrict__ lens,
                             float* __restrict__ y, long long rows, int L, int heads) {
    long long r = (long long)blockIdx.x * $wpb + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (r >= rows) return;
    const float* xr = x + r * L;
    float* yr = y + r * L;
    int keep = row_keep(r, L, heads, lens);
    float m = -INFINITY;
    for (int j = lane; j < keep; j += 32) m = fmaxf(m, logit(xr[j]));
    m = warp_max(m);
    float sum = 0.0f;
    for (int j = lane; j < keep; j += 32) sum += expf(logit(xr[j]) - m);
    float inv = 1.0f / warp_sum(sum);
    for (int j = lane; j < L; j += 32)
        yr[j] = post_op(j < keep ? expf(logit(xr[j]) - m) * inv : 0.0f);
}

extern "C" void masked_softmax(const float* x, const long long* lens, float* y, long long rows,
                               int L, int heads) {
    if (rows > 0 && L > 0)
        softmax_warp<<<(unsigned)((rows + $wpb - 1) / $wpb), $wpb * 32>>>(x, lens, y, rows, L,
                                                                          heads);
}
"""

_BLOCK = r"""
// One block of $block threads per row: each thread keeps a running (max, sum) over its keys
// (online softmax, one read for both statistics), the block combines the pairs with
// shuffles and shared memory, then a second coalesced pass writes the row.
__global__ void __launch_bounds__($block)
softmax_block(const float* __restrict__ x, const long long* __restrict__ lens,
              float* __restrict__ y, int L, int heads) {
    long long r = blockIdx.x;
    const float* xr = x + r * L;
    float* yr = y + r * L;
    int keep = row_keep(r, L, heads, lens);
    float m = -INFINITY, sum = 0.0f;
    for (int j = threadIdx.x; j < keep; j += $block) {
        float v = logit(xr[j]);
        if (v > m) {
            sum = sum * expf(m - v) + 1.0f;
            m = v;
        } else {
            sum += expf(v - m);
        }
    }
    float bm = block_max(m);
    float part = m == -INFINITY ? 0.0f : sum * expf(m - bm);
    float inv = 1.0f / block_sum(part);
    for (int j = threadIdx.x; j < L; j += $block)
        yr[j] = post_op(j < keep ? expf(logit(xr[j]) - bm) * inv : 0.0f);
}

extern "C" void masked_softmax(const float* x, const long long* lens, float* y, long long rows,
                               int L, int heads) {
    if (rows > 0 && L > 0) softmax_block<<<(unsigned)rows, $block>>>(x, lens, y, L, heads);
}
"""


@family("torch_masked_softmax", TaskKind.TORCH2CUDA, "softmax")
def torch_masked_softmax(rng: random.Random, index: int):
    mask = rng.choice(["causal", "padding"])
    scale = rng.choice([0.125, 0.0884, 0.25, 1.0, 0.5])
    cap = rng.choice([None, None, 30.0, 50.0, 5.0])
    std = rng.choice([1.0, 4.0, 8.0])
    b_l, h_l, l_l = rng.choice([(4, 16, 1024), (8, 16, 512), (2, 16, 2048), (16, 8, 512)])
    padding = mask == "padding"
    pre, post = draw_chain(rng, 0, 2), draw_chain(rng, 0, 1)
    what = f"softmax over keys of (scores * {scale})"
    if cap:
        what += f" soft-capped at {cap}"
    if pre:
        what = what.replace(")", f", then {pre.describe()})", 1)
    what += ", causal mask" if mask == "causal" else ", key-padding mask from lengths (batch,)"
    if post:
        what += f"; the probabilities then go through {post.describe()}"
    doc = f"Scaled masked attention softmax on (batch, heads, seq, seq) float32 scores: {what}."
    src = fill(
        _REF,
        doc=doc,
        b=b_l,
        h=h_l,
        l=l_l,
        lens_arg=", lengths: torch.Tensor" if padding else "",
        scale=scale,
        pre=pre.torch("s"),
        post=post.torch("y"),
        cap=f"        s = torch.tanh(s / {cap}) * {cap}\n" if cap else "",
        mask=_PADDING if padding else _CAUSAL,
        std=std,
        lens_in="    lengths = torch.randint(1, seq_len + 1, (batch_size,))\n" if padding else "",
        lens_ret=", lengths" if padding else "",
    )
    keep = (
        "long long n = lens[r / ((long long)heads * L)];\n    return n < L ? (int)n : L;"
        if padding
        else "return (int)(r % L) + 1;"
    )
    dev = fill(
        _DEV,
        pre_fn=pre.device("pre_op"),
        post_fn=post.device("post_op"),
        scale=f"{scale}f",
        cap=f"v = tanhf(v / {cap}f) * {cap}f;" if cap else "",
        keep=keep,
    )
    lens = "lengths.contiguous()" if padding else "scores"
    fwd = (
        "scores = scores.contiguous()\n"
        "y = torch.empty_like(scores)\n"
        "L = scores.shape[-1]\n"
        f"self.lib.masked_softmax(scores, {lens}, y, scores.numel() // L, L, scores.shape[1])\n"
        "return y\n"
    )
    variants = [
        ("row_per_thread", _ROW, ["naive", "uncoalesced"], {"block": rng.choice([64, 128])}),
        (
            "warp_per_row",
            REDUCE + _WARP,
            ["warp_shuffle", "coalesced"],
            {"wpb": rng.choice([4, 8])},
        ),
        (
            "block_online",
            REDUCE + _BLOCK,
            ["warp_shuffle", "smem_reduction", "coalesced", "online_softmax"],
            {"block": rng.choice([128, 256, 512])},
        ),
    ]
    fwd_args = ", scores, lengths" if padding else ", scores"
    impls = []
    for vid, tmpl, tags, extra in variants:
        cuda = dev + fill(tmpl, **extra)
        code = native_module(f"{doc} ({vid.replace('_', ' ')})", cuda, "", "", fwd_args, fwd)
        impls.append(impl(vid, code, tags))

    def sz(b: int, h: int, seq: int) -> dict[str, int]:
        return {"batch_size": b, "heads": h, "seq_len": seq}

    r = rng.randrange
    configs = torch_configs(
        sz(2, r(2, 5), r(37, 150, 2)),
        sz(2, 8, rng.choice([256, 384])),
        sz(b_l, h_l, l_l),
        sz(r(2, 5), r(3, 9), r(301, 900, 2)),
    )
    desc = (
        f"{doc} Memory-bound; masked keys need not be read, and each row needs its max and "
        "sum before it is written."
    )
    tol = Tolerance(atol=1e-6, rtol=1e-4)
    return torch_task("torch_masked_softmax", index, src, configs, tol, impls, desc)
