"""PyTorch→CUDA fusions of a Linear layer with its epilogue: y = post(act(x W^T + b)), where
act is one of ReLU / GELU (tanh) / SiLU / sigmoid / tanh / LeakyReLU and post an optional
scale, shift or clamp (2–4 ops). Implementations are GEMM kernels in cudaperf's native form
with the bias, activation and post-op fused into the store."""

from __future__ import annotations

import random

from cudaperf.datagen.base import cfg, family, fill, impl, torch_task
from cudaperf.datagen.families.torch2cuda.torch_common import reference_template
from cudaperf.tasks.model import Distribution, TaskKind, Tolerance

# act -> (torch expression of y, CUDA expression of v)
_ACTS = {
    "relu": ("torch.relu(y)", "fmaxf(v, 0.0f)"),
    "gelu": (
        'torch.nn.functional.gelu(y, approximate="tanh")',
        "0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)))",
    ),
    "silu": ("torch.nn.functional.silu(y)", "v / (1.0f + expf(-v))"),
    "sigmoid": ("torch.sigmoid(y)", "1.0f / (1.0f + expf(-v))"),
    "tanh": ("torch.tanh(y)", "tanhf(v)"),
    "leaky_relu": (
        "torch.nn.functional.leaky_relu(y, $slope)",
        "(v > 0.0f ? v : $slope * v)",
    ),
}

_REF = reference_template(
    {"batch_size": "m", "in_features": "k", "out_features": "n"},
    """
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        y = $act
$post        return y


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
""",
)

_PY = '''
"""$doc"""

import torch
import torch.nn as nn

from cudaperf.execute.native import load_cuda

CUDA_SRC = r"""$cuda"""


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.lib = load_cuda(CUDA_SRC)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        w = self.linear.weight.contiguous()
        y = torch.empty(x.shape[0], w.shape[0], device=x.device, dtype=x.dtype)
        b = self.linear.bias.contiguous()
        self.lib.linear_act(x, w, b, y, x.shape[0], w.shape[0], x.shape[1])
        return y
'''

_EPI = """
// Epilogue fused into the store: bias, activation, post-op.
__device__ __forceinline__ float epilogue(float acc, float b) {
    float v = acc + b;
    v = $act;
    return $post;
}
"""

_NAIVE = (
    _EPI
    + """
// One thread per output y[m, n], threadIdx.x along n: the lanes of a warp read W rows K apart
// (uncoalesced) and x is re-read from global memory for every output (weak).
__global__ void linear_naive(const float* x, const float* w, const float* bias, float* y,
                             int M, int N, int K) {
    int n = blockIdx.x * blockDim.x + threadIdx.x, m = blockIdx.y;
    if (n >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += x[(long long)m * K + k] * w[(long long)n * K + k];
    y[(long long)m * N + n] = epilogue(acc, bias[n]);
}

extern "C" void linear_act(const float* x, const float* w, const float* bias, float* y, int M,
                           int N, int K) {
    dim3 grid((N + $block - 1) / $block, M);
    if (M > 0 && N > 0) linear_naive<<<grid, $block>>>(x, w, bias, y, M, N, K);
}
"""
)

_TILED = (
    _EPI
    + """
// Shared-memory tiles of x (TS x TS, coalesced along k) and of W (read along k, stored
// transposed in a padded tile: no bank conflicts), zero-filled past the edges.
#define TS $ts
__global__ void __launch_bounds__(TS * TS)
linear_tiled(const float* __restrict__ x, const float* __restrict__ w,
             const float* __restrict__ bias, float* __restrict__ y, int M, int N, int K) {
    __shared__ float xs[TS][TS + 1];
    __shared__ float ws[TS][TS + 1];
    int tx = threadIdx.x, ty = threadIdx.y;
    int m0 = blockIdx.y * TS, n0 = blockIdx.x * TS;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TS) {
        int xm = m0 + ty, xk = k0 + tx;
        xs[ty][tx] = (xm < M && xk < K) ? x[(long long)xm * K + xk] : 0.0f;
        int wn = n0 + ty, wk = k0 + tx;
        ws[tx][ty] = (wn < N && wk < K) ? w[(long long)wn * K + wk] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < TS; ++kk) acc += xs[ty][kk] * ws[kk][tx];
        __syncthreads();
    }
    int m = m0 + ty, n = n0 + tx;
    if (m < M && n < N) y[(long long)m * N + n] = epilogue(acc, bias[n]);
}

extern "C" void linear_act(const float* x, const float* w, const float* bias, float* y, int M,
                           int N, int K) {
    dim3 grid((N + TS - 1) / TS, (M + TS - 1) / TS);
    if (M > 0 && N > 0) linear_tiled<<<grid, dim3(TS, TS)>>>(x, w, bias, y, M, N, K);
}
"""
)

_REG = (
    _EPI
    + """
// Register blocking: 256 threads compute a 64 x 64 tile of y, 4 x 4 outputs per thread
// (rows ty + 16 i, columns tx + 16 j); tiles of depth $bk of x and W are staged in shared
// memory (both read along k, coalesced) and every k step does 16 FMAs from registers.
#define BM 64
#define BN 64
#define BK $bk
__global__ void __launch_bounds__(256)
linear_reg(const float* __restrict__ x, const float* __restrict__ w,
           const float* __restrict__ bias, float* __restrict__ y, int M, int N, int K) {
    __shared__ float xs[BK][BM + 1];
    __shared__ float ws[BK][BN + 1];
    int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
    int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    float acc[4][4] = {};
    for (int k0 = 0; k0 < K; k0 += BK) {
        for (int e = tid; e < BM * BK; e += 256) {
            int r = e / BK, kk = e % BK, gk = k0 + kk;
            xs[kk][r] = (m0 + r < M && gk < K) ? x[(long long)(m0 + r) * K + gk] : 0.0f;
            ws[kk][r] = (n0 + r < N && gk < K) ? w[(long long)(n0 + r) * K + gk] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            float a[4], b[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) a[i] = xs[kk][ty + 16 * i];
#pragma unroll
            for (int j = 0; j < 4; ++j) b[j] = ws[kk][tx + 16 * j];
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * b[j];
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            int m = m0 + ty + 16 * i, n = n0 + tx + 16 * j;
            if (m < M && n < N) y[(long long)m * N + n] = epilogue(acc[i][j], bias[n]);
        }
}

extern "C" void linear_act(const float* x, const float* w, const float* bias, float* y, int M,
                           int N, int K) {
    dim3 grid((N + BN - 1) / BN, (M + BM - 1) / BM);
    if (M > 0 && N > 0) linear_reg<<<grid, 256>>>(x, w, bias, y, M, N, K);
}
"""
)


def _post(rng: random.Random) -> tuple[str, str, str]:
    """(torch statement lines, CUDA expression of v, description) of the post-op."""
    kind = rng.choice(["none", "scale", "shift", "clamp"])
    if kind == "scale":
        s = rng.choice([0.5, 2.0, 1.5, 0.1])
        return f"        y = y * {s}\n", f"v * {s}f", f"then multiplied by {s}"
    if kind == "shift":
        s = rng.choice([0.5, -0.25, 1.0])
        return f"        y = y + {s}\n", f"v + {s}f", f"then shifted by {s}"
    if kind == "clamp":
        lo, hi = rng.choice([(-0.5, 0.5), (-1.0, 1.0), (0.0, 0.25), (-0.1, 2.0)])
        return (
            f"        y = torch.clamp(y, {lo}, {hi})\n",
            f"fminf(fmaxf(v, {lo}f), {hi}f)",
            f"then clamped to [{lo}, {hi}]",
        )
    return "", "v", ""


@family("torch_linear_act", TaskKind.TORCH2CUDA, "fusion")
def torch_linear_act(rng: random.Random, index: int):
    act = rng.choice(list(_ACTS))
    slope = rng.choice([0.01, 0.1, 0.2])
    tact, cact = (
        fill(s, slope=f"{slope}{suffix}") for s, suffix in zip(_ACTS[act], ("", "f"), strict=True)
    )
    post_py, post_c, post_what = _post(rng)
    what = f"Linear layer (x W^T + b) followed by {act}" + (f", {post_what}" if post_what else "")
    doc = f"{what}; x is (batch_size, in_features) float32."
    m_l, k_l, n_l = rng.choice([(4096, 2048, 2048), (2048, 4096, 1024), (8192, 1024, 4096)])
    src = fill(_REF, doc=doc, m=m_l, k=k_l, n=n_l, act=tact, post=post_py)
    epi = dict(act=cact, post=post_c)
    variants = [
        ("naive", _NAIVE, ["naive", "uncoalesced"], {"block": rng.choice([128, 256])}),
        ("smem_tiled", _TILED, ["smem_tiling", "coalesced"], {"ts": rng.choice([16, 32])}),
        (
            "register_blocked",
            _REG,
            ["smem_tiling", "register_blocking", "coalesced", "unrolled"],
            {"bk": rng.choice([8, 16])},
        ),
    ]
    impls = []
    for vid, tmpl, tags, extra in variants:
        cuda = fill(tmpl, **epi, **extra)
        impls.append(impl(vid, fill(_PY, doc=f"{what}: {vid.replace('_', ' ')}.", cuda=cuda), tags))

    def sz(m: int, k: int, n: int) -> dict[str, int]:
        return {"batch_size": m, "in_features": k, "out_features": n}

    configs = [
        cfg("small", sz(rng.randint(3, 17), rng.randrange(20, 200), rng.randrange(10, 150)), 1),
        cfg("medium", sz(512, rng.choice([512, 1024]), rng.choice([512, 1024])), 2),
        cfg("large", sz(m_l, k_l, n_l), 3),
        cfg(
            "heldout",
            sz(rng.randrange(300, 1500), rng.randrange(200, 1500), rng.randrange(200, 1500)),
            4,
            held_out=True,
            dist=Distribution(kind="normal"),
        ),
    ]
    desc = (
        f"{doc} Compute-bound GEMM with an element-wise epilogue; fusing the epilogue into the "
        "GEMM's store avoids writing and re-reading the (batch_size, out_features) result."
    )
    return torch_task(
        "torch_linear_act", index, src, configs, Tolerance(atol=1e-4, rtol=1e-3), impls, desc
    )
