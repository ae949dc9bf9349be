"""KernelBench level 1 / 23_Softmax.py

softmax over dim 1.

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

#define LOG_SOFTMAX 0

__device__ __forceinline__ void ms_merge(float& m, float& s, float m2, float s2) {
    if (m2 == -INFINITY) return;
    if (m == -INFINITY) { m = m2; s = s2; return; }
    if (m2 > m) { s = s * expf(m - m2) + s2; m = m2; }
    else { s += s2 * expf(m2 - m); }
}

__device__ __forceinline__ void ms_add(float& m, float& s, float v) {
    if (v > m) { s = s * expf(m - v) + 1.0f; m = v; }
    else { s += expf(v - m); }
}

// Merge (m, s) over the block; every thread gets the block's pair.
__device__ __forceinline__ void block_ms(float& m, float& s) {
    __shared__ float sh_m[32], sh_s[32];
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int nw = (blockDim.x + 31) >> 5;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float m2 = __shfl_xor_sync(FULL_MASK, m, o);
        const float s2 = __shfl_xor_sync(FULL_MASK, s, o);
        ms_merge(m, s, m2, s2);
    }
    if (lane == 0) { sh_m[w] = m; sh_s[w] = s; }
    __syncthreads();
    if (w == 0) {
        m = lane < nw ? sh_m[lane] : -INFINITY;
        s = lane < nw ? sh_s[lane] : 0.0f;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            const float m2 = __shfl_xor_sync(FULL_MASK, m, o);
            const float s2 = __shfl_xor_sync(FULL_MASK, s, o);
            ms_merge(m, s, m2, s2);
        }
        if (lane == 0) { sh_m[0] = m; sh_s[0] = s; }
    }
    __syncthreads();
    m = sh_m[0];
    s = sh_s[0];
    __syncthreads();
}

// inner == 1: one block per row, online max/sum pass then a write pass.
__global__ void __launch_bounds__(512) softmax_rows_kernel(const float* __restrict__ x,
                                                           float* __restrict__ y, long long rows,
                                                           long long L) {
    for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
        const float* xr = x + r * L;
        float* yr = y + r * L;
        float m = -INFINITY, s = 0.0f;
        for (long long i = threadIdx.x; i < L; i += blockDim.x) ms_add(m, s, xr[i]);
        block_ms(m, s);
#if LOG_SOFTMAX
        const float shift = m + logf(s);
        for (long long i = threadIdx.x; i < L; i += blockDim.x) yr[i] = xr[i] - shift;
#else
        const float inv = 1.0f / s;
        for (long long i = threadIdx.x; i < L; i += blockDim.x) yr[i] = expf(xr[i] - m) * inv;
#endif
    }
}

// inner > 1: one thread per (outer, inner) position, coalesced along inner.
__global__ void __launch_bounds__(256) softmax_cols_kernel(const float* __restrict__ x,
                                                           float* __restrict__ y, long long outer,
                                                           long long L, long long inner) {
    const long long total = outer * inner;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < total; t += stride) {
        const long long o = t / inner, i = t % inner;
        const float* xp = x + o * L * inner + i;
        float* yp = y + o * L * inner + i;
        float m = -INFINITY, s = 0.0f;
        for (long long k = 0; k < L; ++k) ms_add(m, s, xp[k * inner]);
#if LOG_SOFTMAX
        const float shift = m + logf(s);
        for (long long k = 0; k < L; ++k) yp[k * inner] = xp[k * inner] - shift;
#else
        const float inv = 1.0f / s;
        for (long long k = 0; k < L; ++k) yp[k * inner] = expf(xp[k * inner] - m) * inv;
#endif
    }
}

static void softmax_run(const float* x, float* y, long long outer, long long L,
                        long long inner) {
    if (outer <= 0 || L <= 0 || inner <= 0) return;
    if (inner == 1) {
        long long g = outer < 65535LL * 16 ? outer : 65535LL * 16;
        softmax_rows_kernel<<<(unsigned)g, 512>>>(x, y, outer, L);
    } else {
        softmax_cols_kernel<<<cp_grid(outer * inner, 256, 8), 256>>>(x, y, outer, L, inner);
    }
}

static void softmax_dim_host(
    const float* x,
    float* y,
    long long outer,
    long long L,
    long long inner) {
    softmax_run(x, y, outer, L, inner);
}

void softmax_dim(torch::Tensor x, torch::Tensor y, int64_t outer, int64_t L, int64_t inner) {
    TORCH_CHECK(x.is_cuda() && x.is_contiguous(),
                "x must be a contiguous CUDA tensor");
    TORCH_CHECK(y.is_cuda() && y.is_contiguous(),
                "y must be a contiguous CUDA tensor");
    softmax_dim_host(
        x.data_ptr<float>(),
        y.data_ptr<float>(),
        (long long)outer,
        (long long)L,
        (long long)inner);
}
"""

CPP_SRC = r"""
void softmax_dim(torch::Tensor x, torch::Tensor y, int64_t outer, int64_t L, int64_t inner);
"""

_ext = load_inline(
    name="kb_1_23_softmax_cp",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["softmax_dim"],
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
        self.dim = 1
        self.lib = _ext

    def forward(self, x):
        x = x.contiguous()
        outer, size, inner = _split(x.shape, self.dim % x.dim())
        y = torch.empty_like(x)
        self.lib.softmax_dim(x, y, outer, size, inner)
        return y
