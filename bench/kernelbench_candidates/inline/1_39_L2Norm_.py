"""KernelBench level 1 / 39_L2Norm_.py

x / ||x||_2 over dim 1.

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

#define NORM_ACC(v) ((v) * (v))
#define NORM_DENOM(acc, F, eps) (sqrtf(acc))

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

// inner == 1: one block per row; pass 1 reduces, pass 2 scales.
__global__ void __launch_bounds__(512) norm_rows_kernel(const float* __restrict__ x,
                                                        float* __restrict__ y, long long rows,
                                                        long long F, float eps) {
    __shared__ float sh[32];
    for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
        const float* xr = x + r * F;
        float* yr = y + r * F;
        float acc = 0.0f;
        for (long long i = threadIdx.x; i < F; i += blockDim.x) acc += NORM_ACC(xr[i]);
        acc = block_sum(acc, sh);
        const float denom = NORM_DENOM(acc, F, eps);
        for (long long i = threadIdx.x; i < F; i += blockDim.x) yr[i] = xr[i] / denom;
    }
}

// inner > 1: one thread per (outer, inner) position, coalesced along inner.
__global__ void __launch_bounds__(256) norm_cols_kernel(const float* __restrict__ x,
                                                        float* __restrict__ y, long long outer,
                                                        long long F, long long inner, float eps) {
    const long long total = outer * inner;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < total; t += stride) {
        const long long o = t / inner, i = t % inner;
        const float* xp = x + o * F * inner + i;
        float* yp = y + o * F * inner + i;
        float acc = 0.0f;
        for (long long k = 0; k < F; ++k) acc += NORM_ACC(xp[k * inner]);
        const float denom = NORM_DENOM(acc, F, eps);
        for (long long k = 0; k < F; ++k) yp[k * inner] = xp[k * inner] / denom;
    }
}

static void norm_run(const float* x, float* y, long long outer, long long F, long long inner,
                     float eps) {
    if (outer <= 0 || F <= 0 || inner <= 0) return;
    if (inner == 1) {
        long long g = outer < 65535LL * 16 ? outer : 65535LL * 16;
        norm_rows_kernel<<<(unsigned)g, 512>>>(x, y, outer, F, eps);
    } else {
        norm_cols_kernel<<<cp_grid(outer * inner, 256, 8), 256>>>(x, y, outer, F, inner, eps);
    }
}

static void normalize_dim1_host(
    const float* x,
    float* y,
    long long outer,
    long long F,
    long long inner,
    float eps) {
    norm_run(x, y, outer, F, inner, eps);
}

void normalize_dim1(
    torch::Tensor x,
    torch::Tensor y,
    int64_t outer,
    int64_t F,
    int64_t inner,
    double eps) {
    TORCH_CHECK(x.is_cuda() && x.is_contiguous(),
                "x must be a contiguous CUDA tensor");
    TORCH_CHECK(y.is_cuda() && y.is_contiguous(),
                "y must be a contiguous CUDA tensor");
    normalize_dim1_host(
        x.data_ptr<float>(),
        y.data_ptr<float>(),
        (long long)outer,
        (long long)F,
        (long long)inner,
        (float)eps);
}
"""

CPP_SRC = r"""
void normalize_dim1(
    torch::Tensor x,
    torch::Tensor y,
    int64_t outer,
    int64_t F,
    int64_t inner,
    double eps);
"""

_ext = load_inline(
    name="kb_1_39_l2norm__cp",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["normalize_dim1"],
    verbose=False,
)


def _split(shape, dim):
    """(outer, size, inner) of a contiguous tensor viewed around axis `dim`."""
    outer = 1
    for s in shape[:dim]:
        outer *= s
    inner = 1
    for s in shape[dim + 1 :]:
        inner *= s
    return outer, shape[dim], inner


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.lib = _ext

    def forward(self, x):
        x = x.contiguous()
        outer, size, inner = _split(x.shape, 1)
        y = torch.empty_like(x)
        self.lib.normalize_dim1(x, y, outer, size, inner, 0.0)
        return y
