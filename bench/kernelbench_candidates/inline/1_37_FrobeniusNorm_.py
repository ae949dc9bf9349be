"""KernelBench level 1 / 37_FrobeniusNorm_.py

x / ||x||_F.

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

#define FRO_MAX_PARTIALS 2048

__global__ void __launch_bounds__(256) sumsq_partial_kernel(const float* __restrict__ x,
                                                            long long n, int vec,
                                                            double* __restrict__ partial) {
    __shared__ float sh[32];
    const long long stride = (long long)gridDim.x * blockDim.x;
    const long long t0 = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    float acc = 0.0f;
    long long head = 0;
    if (vec) {
        const float4* x4 = (const float4*)x;
        const long long n4 = n / 4;
        for (long long i = t0; i < n4; i += stride) {
            const float4 v = x4[i];
            acc += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
        }
        head = n4 * 4;
    }
    for (long long i = head + t0; i < n; i += stride) acc += x[i] * x[i];
    acc = block_sum(acc, sh);
    if (threadIdx.x == 0) partial[blockIdx.x] = (double)acc;
}

__global__ void __launch_bounds__(1024) norm_finalize_kernel(const double* __restrict__ partial,
                                                             int np, float* __restrict__ norm) {
    __shared__ double sh[32];
    double acc = 0.0;
    for (int i = threadIdx.x; i < np; i += blockDim.x) acc += partial[i];
    acc = block_sum_d(acc, sh);
    if (threadIdx.x == 0) norm[0] = (float)sqrt(acc);
}

__global__ void __launch_bounds__(256) div_scalar_kernel(const float* __restrict__ x,
                                                         float* __restrict__ y, long long n,
                                                         int vec,
                                                         const float* __restrict__ norm) {
    const float d = norm[0];
    const long long stride = (long long)gridDim.x * blockDim.x;
    const long long t0 = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    long long head = 0;
    if (vec) {
        const float4* x4 = (const float4*)x;
        float4* y4 = (float4*)y;
        const long long n4 = n / 4;
        for (long long i = t0; i < n4; i += stride) {
            float4 v = x4[i];
            v.x = v.x / d;
            v.y = v.y / d;
            v.z = v.z / d;
            v.w = v.w / d;
            y4[i] = v;
        }
        head = n4 * 4;
    }
    for (long long i = head + t0; i < n; i += stride) y[i] = x[i] / d;
}

static void frobenius_normalize_host(
    const float* x,
    float* y,
    double* partial,
    float* norm,
    long long n) {
    if (n <= 0) return;
    const int vec = ((((uintptr_t)x | (uintptr_t)y) & 15) == 0) ? 1 : 0;
    unsigned g = cp_grid(vec ? (n + 3) / 4 : n, 256, 8);
    if (g > FRO_MAX_PARTIALS) g = FRO_MAX_PARTIALS;
    sumsq_partial_kernel<<<g, 256>>>(x, n, vec, partial);
    norm_finalize_kernel<<<1, 1024>>>(partial, (int)g, norm);
    div_scalar_kernel<<<cp_grid(vec ? (n + 3) / 4 : n, 256, 8), 256>>>(x, y, n, vec, norm);
}

void frobenius_normalize(
    torch::Tensor x,
    torch::Tensor y,
    torch::Tensor partial,
    torch::Tensor norm,
    int64_t n) {
    TORCH_CHECK(x.is_cuda() && x.is_contiguous(),
                "x must be a contiguous CUDA tensor");
    TORCH_CHECK(y.is_cuda() && y.is_contiguous(),
                "y must be a contiguous CUDA tensor");
    TORCH_CHECK(partial.is_cuda() && partial.is_contiguous(),
                "partial must be a contiguous CUDA tensor");
    TORCH_CHECK(norm.is_cuda() && norm.is_contiguous(),
                "norm must be a contiguous CUDA tensor");
    frobenius_normalize_host(
        x.data_ptr<float>(),
        y.data_ptr<float>(),
        partial.data_ptr<double>(),
        norm.data_ptr<float>(),
        (long long)n);
}
"""

CPP_SRC = r"""
void frobenius_normalize(
    torch::Tensor x,
    torch::Tensor y,
    torch::Tensor partial,
    torch::Tensor norm,
    int64_t n);
"""

_ext = load_inline(
    name="kb_1_37_frobeniusnorm__cp",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["frobenius_normalize"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.lib = _ext

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        partial = torch.empty(2048, dtype=torch.float64, device=x.device)
        norm = torch.empty(1, dtype=x.dtype, device=x.device)
        self.lib.frobenius_normalize(x, y, partial, norm, x.numel())
        return y
