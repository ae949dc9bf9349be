"""KernelBench level 1 / 99_TripletMarginLoss.py

triplet margin loss (p=2, eps=1e-6, mean).

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

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}

// Sum over the block (blockDim.x a multiple of 32); every thread gets the result.
// `sh` holds 32 floats; safe to call repeatedly.
__device__ __forceinline__ float block_sum(float v, float* sh) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int nw = (blockDim.x + 31) >> 5;
    v = warp_sum(v);
    if (lane == 0) sh[w] = v;
    __syncthreads();
    if (w == 0) {
        v = lane < nw ? sh[lane] : 0.0f;
        v = warp_sum(v);
        if (lane == 0) sh[0] = v;
    }
    __syncthreads();
    const float r = sh[0];
    __syncthreads();
    return r;
}

__device__ __forceinline__ double warp_sum_d(double v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}

__device__ __forceinline__ double block_sum_d(double v, double* sh) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int nw = (blockDim.x + 31) >> 5;
    v = warp_sum_d(v);
    if (lane == 0) sh[w] = v;
    __syncthreads();
    if (w == 0) {
        v = lane < nw ? sh[lane] : 0.0;
        v = warp_sum_d(v);
        if (lane == 0) sh[0] = v;
    }
    __syncthreads();
    const double r = sh[0];
    __syncthreads();
    return r;
}

__global__ void __launch_bounds__(256) triplet_rows_kernel(const float* __restrict__ a,
                                                           const float* __restrict__ pos,
                                                           const float* __restrict__ neg,
                                                           float* __restrict__ row_loss,
                                                           long long rows, long long D,
                                                           float margin) {
    __shared__ float sh[32];
    const float eps = 1e-6f;  // pairwise_distance adds eps to the difference
    for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
        const long long off = r * D;
        float dp = 0.0f, dn = 0.0f;
        for (long long i = threadIdx.x; i < D; i += blockDim.x) {
            const float av = a[off + i];
            const float u = av - pos[off + i] + eps;
            const float v = av - neg[off + i] + eps;
            dp = fmaf(u, u, dp);
            dn = fmaf(v, v, dn);
        }
        dp = block_sum(dp, sh);
        dn = block_sum(dn, sh);
        if (threadIdx.x == 0) row_loss[r] = fmaxf(sqrtf(dp) - sqrtf(dn) + margin, 0.0f);
    }
}

__global__ void __launch_bounds__(1024) mean_finalize_kernel(const float* __restrict__ v,
                                                             long long n,
                                                             float* __restrict__ out) {
    __shared__ double sh[32];
    double acc = 0.0;
    for (long long i = threadIdx.x; i < n; i += blockDim.x) acc += (double)v[i];
    acc = block_sum_d(acc, sh);
    if (threadIdx.x == 0) out[0] = (float)(acc / (double)n);
}

static void triplet_margin_mean_host(
    const float* a,
    const float* pos,
    const float* neg,
    float* row_loss,
    float* out,
    long long rows,
    long long D,
    float margin) {
    if (rows <= 0) return;
    long long g = rows < 65535LL * 16 ? rows : 65535LL * 16;
    triplet_rows_kernel<<<(unsigned)g, 256>>>(a, pos, neg, row_loss, rows, D, margin);
    mean_finalize_kernel<<<1, 1024>>>(row_loss, rows, out);
}

void triplet_margin_mean(
    torch::Tensor a,
    torch::Tensor pos,
    torch::Tensor neg,
    torch::Tensor row_loss,
    torch::Tensor out,
    int64_t rows,
    int64_t D,
    double margin) {
    TORCH_CHECK(a.is_cuda() && a.is_contiguous(),
                "a must be a contiguous CUDA tensor");
    TORCH_CHECK(pos.is_cuda() && pos.is_contiguous(),
                "pos must be a contiguous CUDA tensor");
    TORCH_CHECK(neg.is_cuda() && neg.is_contiguous(),
                "neg must be a contiguous CUDA tensor");
    TORCH_CHECK(row_loss.is_cuda() && row_loss.is_contiguous(),
                "row_loss must be a contiguous CUDA tensor");
    TORCH_CHECK(out.is_cuda() && out.is_contiguous(),
                "out must be a contiguous CUDA tensor");
    triplet_margin_mean_host(
        a.data_ptr<float>(),
        pos.data_ptr<float>(),
        neg.data_ptr<float>(),
        row_loss.data_ptr<float>(),
        out.data_ptr<float>(),
        (long long)rows,
        (long long)D,
        (float)margin);
}
"""

CPP_SRC = r"""
void triplet_margin_mean(
    torch::Tensor a,
    torch::Tensor pos,
    torch::Tensor neg,
    torch::Tensor row_loss,
    torch::Tensor out,
    int64_t rows,
    int64_t D,
    double margin);
"""

_ext = load_inline(
    name="kb_1_99_tripletmarginloss_cp",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["triplet_margin_mean"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, margin=1.0):
        super().__init__()
        self.margin = margin
        self.lib = _ext

    def forward(self, anchor, positive, negative):
        a = anchor.contiguous()
        p = positive.contiguous()
        n = negative.contiguous()
        D = a.shape[-1]
        rows = a.numel() // D
        row_loss = torch.empty(rows, dtype=a.dtype, device=a.device)
        out = torch.empty((), dtype=a.dtype, device=a.device)
        self.lib.triplet_margin_mean(a, p, n, row_loss, out, rows, D, float(self.margin))
        return out
