"""KernelBench level 1 / 40_LayerNorm.py

LayerNorm over the trailing normalized_shape.

cudaperf fast native form (nvcc, extern "C" launchers, no torch headers).
"""

import torch
import torch.nn as nn

from cudaperf.execute.native import load_cuda

CUDA_SRC = r"""
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

#define LN_CHUNK 8192

// Partial sums of (x - shift) and (x - shift)^2 per (row, chunk); shift = the row's first
// element, which keeps E[d^2] - E[d]^2 well conditioned.
__global__ void __launch_bounds__(256) ln_partial_kernel(const float* __restrict__ x,
                                                         double* __restrict__ part,
                                                         long long rows, long long N,
                                                         long long chunks) {
    __shared__ float sh[32];
    for (long long b = blockIdx.x; b < rows * chunks; b += gridDim.x) {
        const long long row = b / chunks, c = b % chunks;
        const float* xr = x + row * N;
        const float shift = xr[0];
        const long long begin = c * LN_CHUNK;
        const long long end = begin + LN_CHUNK < N ? begin + LN_CHUNK : N;
        float s1 = 0.0f, s2 = 0.0f;
        for (long long i = begin + threadIdx.x; i < end; i += blockDim.x) {
            const float d = xr[i] - shift;
            s1 += d;
            s2 += d * d;
        }
        s1 = block_sum(s1, sh);
        s2 = block_sum(s2, sh);
        if (threadIdx.x == 0) {
            part[2 * b] = (double)s1;
            part[2 * b + 1] = (double)s2;
        }
    }
}

__global__ void __launch_bounds__(256) ln_stats_kernel(const float* __restrict__ x,
                                                       const double* __restrict__ part,
                                                       float* __restrict__ stats, long long rows,
                                                       long long N, long long chunks,
                                                       float eps) {
    __shared__ double sh[32];
    for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
        double s1 = 0.0, s2 = 0.0;
        for (long long c = threadIdx.x; c < chunks; c += blockDim.x) {
            s1 += part[2 * (row * chunks + c)];
            s2 += part[2 * (row * chunks + c) + 1];
        }
        s1 = block_sum_d(s1, sh);
        s2 = block_sum_d(s2, sh);
        if (threadIdx.x == 0) {
            const double md = s1 / (double)N;
            double var = s2 / (double)N - md * md;
            if (var < 0.0) var = 0.0;
            stats[2 * row] = (float)((double)x[row * N] + md);
            stats[2 * row + 1] = (float)(1.0 / sqrt(var + (double)eps));
        }
    }
}

__global__ void __launch_bounds__(256) ln_apply_kernel(const float* __restrict__ x,
                                                       const float* __restrict__ w,
                                                       const float* __restrict__ bias,
                                                       const float* __restrict__ stats,
                                                       float* __restrict__ y, long long rows,
                                                       long long N) {
    for (long long r = blockIdx.y; r < rows; r += gridDim.y) {
        const float mean = stats[2 * r], rstd = stats[2 * r + 1];
        const float* xr = x + r * N;
        float* yr = y + r * N;
        for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < N;
             i += (long long)gridDim.x * blockDim.x)
            yr[i] = (xr[i] - mean) * rstd * w[i] + bias[i];
    }
}

extern "C" void layer_norm_fwd(
    const float* x,
    const float* w,
    const float* b,
    float* y,
    double* part,
    float* stats,
    long long rows,
    long long N,
    float eps) {
    if (rows <= 0 || N <= 0) return;
    const long long chunks = (N + LN_CHUNK - 1) / LN_CHUNK;
    long long g1 = rows * chunks;
    if (g1 > (1LL << 30)) g1 = 1LL << 30;
    ln_partial_kernel<<<(unsigned)g1, 256>>>(x, part, rows, N, chunks);
    long long g2 = rows < 65535LL * 16 ? rows : 65535LL * 16;
    ln_stats_kernel<<<(unsigned)g2, 256>>>(x, part, stats, rows, N, chunks, eps);
    const long long gy = rows < 65535 ? rows : 65535;
    long long gx = (N + 255) / 256;
    long long cap = (long long)cp_num_sms() * 16 / gy;
    if (cap < 1) cap = 1;
    if (gx > cap) gx = cap;
    ln_apply_kernel<<<dim3((unsigned)gx, (unsigned)gy), 256>>>(x, w, b, stats, y, rows, N);
}
"""


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)
        self.lib = load_cuda(CUDA_SRC)

    def forward(self, x):
        x = x.contiguous()
        n = 1
        for s in self.ln.normalized_shape:
            n *= s
        rows = x.numel() // n
        chunks = (n + 8191) // 8192
        y = torch.empty_like(x)
        part = torch.empty(2 * rows * chunks, dtype=torch.float64, device=x.device)
        stats = torch.empty(2 * rows, dtype=torch.float32, device=x.device)
        w = self.ln.weight.contiguous()
        b = self.ln.bias.contiguous()
        self.lib.layer_norm_fwd(x, w, b, y, part, stats, rows, n, float(self.ln.eps))
        return y
