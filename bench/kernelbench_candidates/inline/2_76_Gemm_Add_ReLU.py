"""KernelBench level 2 / 76_Gemm_Add_ReLU.py

Linear (no bias), add a bias parameter, ReLU.

KernelBench candidate form (torch.utils.cpp_extension.load_inline).
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>

#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#define FULL_MASK 0xffffffffu

// Number of SMs of the current device (queried once).
static inline int cp_num_sms() {
    static int sms = 0;
    if (sms == 0) {
        int dev = 0;
        cudaGetDevice(&dev);
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
        if (sms <= 0) sms = 132;
    }
    return sms;
}

// Blocks for `work` items at `block` threads each, capped at `per_sm` blocks per SM
// (the kernels are grid-stride loops, so any cap is correct).
static inline unsigned cp_grid(long long work, int block, int per_sm) {
    long long g = (work + block - 1) / block;
    long long cap = (long long)cp_num_sms() * per_sm;
    if (g > cap) g = cap;
    if (g < 1) g = 1;
    return (unsigned)g;
}

// Epilogue fused into the GEMM store: acc is (x @ W^T)[row, col].
struct Epi {
    const float* bias;  // per output column
    const float* add;   // problem-specific second operand
    float p0, p1, p2;   // problem-specific scalars
    __device__ __forceinline__ float operator()(float acc, int row, int col) const {
        const float v = acc + bias[col];
        return v < 0.0f ? 0.0f : v;
    }
};

#define GM_BM 128
#define GM_BN 128
#define GM_BK 8

template <bool TA, bool TB, bool ATOMIC>
__global__ void __launch_bounds__(256)
    sgemm_kernel(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                 int M, int N, int K, long long lda, long long ldb, long long ldc, long long sA,
                 long long sB, long long sC, int splits, int k_per_split, int vec_ok, Epi epi) {
    __shared__ __align__(16) float As[GM_BK][GM_BM + 4];
    __shared__ __align__(16) float Bs[GM_BK][GM_BN + 4];
    const int tid = threadIdx.x;
    const int tx = tid & 15, ty = tid >> 4;
    const int m0 = blockIdx.y * GM_BM, n0 = blockIdx.x * GM_BN;
    const int bz = blockIdx.z / splits, sz = blockIdx.z % splits;
    A += bz * sA;
    B += bz * sB;
    C += bz * sC;
    const int k_begin = sz * k_per_split;
    const int k_end = min(K, k_begin + k_per_split);

    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;

    for (int k0 = k_begin; k0 < k_end; k0 += GM_BK) {
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            const int e = tid + r * 256;
            int mm, kk;
            if (TA) { mm = e % GM_BM; kk = e / GM_BM; } else { kk = e % GM_BK; mm = e / GM_BK; }
            const int gm = m0 + mm, gk = k0 + kk;
            float v = 0.0f;
            if (gm < M && gk < k_end)
                v = TA ? A[(long long)gk * lda + gm] : A[(long long)gm * lda + gk];
            As[kk][mm] = v;
        }
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            const int e = tid + r * 256;
            int nn, kk;
            if (TB) { kk = e % GM_BK; nn = e / GM_BK; } else { nn = e % GM_BN; kk = e / GM_BN; }
            const int gn = n0 + nn, gk = k0 + kk;
            float v = 0.0f;
            if (gn < N && gk < k_end)
                v = TB ? B[(long long)gn * ldb + gk] : B[(long long)gk * ldb + gn];
            Bs[kk][nn] = v;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < GM_BK; ++kk) {
            const float4 a0 = *reinterpret_cast<const float4*>(&As[kk][ty * 4]);
            const float4 a1 = *reinterpret_cast<const float4*>(&As[kk][64 + ty * 4]);
            const float4 b0 = *reinterpret_cast<const float4*>(&Bs[kk][tx * 4]);
            const float4 b1 = *reinterpret_cast<const float4*>(&Bs[kk][64 + tx * 4]);
            const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
            const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
            for (int i = 0; i < 8; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }

#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int row = m0 + (i < 4 ? ty * 4 + i : 64 + ty * 4 + (i - 4));
        if (row >= M) continue;
        float* crow = C + (long long)row * ldc;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int col = n0 + h * 64 + tx * 4;
            if (ATOMIC) {
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    if (col + j < N) atomicAdd(crow + col + j, acc[i][h * 4 + j]);
            } else if (vec_ok && col + 3 < N) {
                float4 o;
                o.x = epi(acc[i][h * 4 + 0], row, col + 0);
                o.y = epi(acc[i][h * 4 + 1], row, col + 1);
                o.z = epi(acc[i][h * 4 + 2], row, col + 2);
                o.w = epi(acc[i][h * 4 + 3], row, col + 3);
                *reinterpret_cast<float4*>(crow + col) = o;
            } else {
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    if (col + j < N) crow[col + j] = epi(acc[i][h * 4 + j], row, col + j);
            }
        }
    }
}

// Applies the epilogue in place after a split-K GEMM (C is M x N, row-major, batch 1).
__global__ void __launch_bounds__(256) epilogue_kernel(float* __restrict__ C, long long total,
                                                       int N, Epi epi) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total; i += stride) {
        const int row = (int)(i / N), col = (int)(i % N);
        C[i] = epi(C[i], row, col);
    }
}

// C must be dense: ldc == N and sC == M * N (or batch == 1) whenever split-K may be chosen.
// identity_epi: the epilogue is the identity (skip the extra pass after split-K).
template <bool TA, bool TB>
static void gemm_run(const float* A, const float* B, float* C, long long M, long long N,
                     long long K, long long lda, long long ldb, long long ldc, long long sA,
                     long long sB, long long sC, int batch, Epi epi, bool identity_epi) {
    if (M <= 0 || N <= 0 || batch <= 0) return;
    const long long tiles_m = (M + GM_BM - 1) / GM_BM, tiles_n = (N + GM_BN - 1) / GM_BN;
    const long long tiles = tiles_m * tiles_n * batch;
    const int sms = cp_num_sms();
    int splits = 1;
    if (tiles < sms && K >= 2048 && ldc == N && (batch == 1 || sC == M * N)) {
        long long want = (2LL * sms + tiles - 1) / tiles;
        long long most = K / 512;
        splits = (int)(want < most ? want : most);
        if (splits < 1) splits = 1;
    }
    int kps = (int)K;
    if (splits > 1) {
        kps = (int)(((K + splits - 1) / splits + GM_BK - 1) / GM_BK * GM_BK);
        splits = (int)((K + kps - 1) / kps);
    }
    const int vec_ok = ((ldc & 3) == 0 && (sC & 3) == 0 && ((uintptr_t)C & 15) == 0) ? 1 : 0;
    dim3 grid((unsigned)tiles_n, (unsigned)tiles_m, (unsigned)(batch * splits));
    if (K <= 0) splits = 1;
    if (splits > 1) {
        cudaMemsetAsync(C, 0, sizeof(float) * (size_t)(M * N * batch), 0);
        sgemm_kernel<TA, TB, true><<<grid, 256>>>(A, B, C, (int)M, (int)N, (int)K, lda, ldb, ldc,
                                                  sA, sB, sC, splits, kps, vec_ok, epi);
        if (!identity_epi)
            epilogue_kernel<<<cp_grid(M * N, 256, 8), 256>>>(C, M * N, (int)N, epi);
    } else {
        sgemm_kernel<TA, TB, false><<<grid, 256>>>(A, B, C, (int)M, (int)N, (int)K, lda, ldb,
                                                   ldc, sA, sB, sC, 1, kps, vec_ok, epi);
    }
}

static void linear_fused_host(
    const float* x,
    const float* w,
    const float* bias,
    const float* add,
    float* y,
    long long M,
    long long N,
    long long K,
    float p0,
    float p1,
    float p2) {
    Epi epi{bias, add, p0, p1, p2};
    gemm_run<false, true>(x, w, y, M, N, K, K, K, N, 0, 0, 0, 1, epi, false);
}

void linear_fused(
    torch::Tensor x,
    torch::Tensor w,
    torch::Tensor bias,
    torch::Tensor add,
    torch::Tensor y,
    int64_t M,
    int64_t N,
    int64_t K,
    double p0,
    double p1,
    double p2) {
    TORCH_CHECK(x.is_cuda() && x.is_contiguous(),
                "x must be a contiguous CUDA tensor");
    TORCH_CHECK(w.is_cuda() && w.is_contiguous(),
                "w must be a contiguous CUDA tensor");
    TORCH_CHECK(bias.is_cuda() && bias.is_contiguous(),
                "bias must be a contiguous CUDA tensor");
    TORCH_CHECK(add.is_cuda() && add.is_contiguous(),
                "add must be a contiguous CUDA tensor");
    TORCH_CHECK(y.is_cuda() && y.is_contiguous(),
                "y must be a contiguous CUDA tensor");
    linear_fused_host(
        x.data_ptr<float>(),
        w.data_ptr<float>(),
        bias.data_ptr<float>(),
        add.data_ptr<float>(),
        y.data_ptr<float>(),
        (long long)M,
        (long long)N,
        (long long)K,
        (float)p0,
        (float)p1,
        (float)p2);
}
"""

CPP_SRC = r"""
void linear_fused(
    torch::Tensor x,
    torch::Tensor w,
    torch::Tensor bias,
    torch::Tensor add,
    torch::Tensor y,
    int64_t M,
    int64_t N,
    int64_t K,
    double p0,
    double p1,
    double p2);
"""

_ext = load_inline(
    name="kb_2_76_gemm_add_relu_cp",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["linear_fused"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias_shape):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.lib = _ext

    def forward(self, x):
        x = x.contiguous()
        w = self.gemm.weight.contiguous()
        b = self.bias.contiguous()
        a = self.bias.contiguous()
        n, k = w.shape
        m = x.numel() // k
        y = torch.empty(tuple(x.shape[:-1]) + (n,), dtype=x.dtype, device=x.device)
        self.lib.linear_fused(x, w, b, a, y, m, n, k, 0.0, 0.0, 0.0)
        return y
