"""KernelBench level 1 / 47_Sum_reduction_over_a_dimension.py

sum over a dim (keepdim).

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

#define RED_INIT (0.0f)
#define RED_FINAL(acc, R) (acc)
__device__ __forceinline__ float red_combine(float a, float b) {
    return a + b;
}

// inner == 1: one block per row.
__global__ void __launch_bounds__(256) reduce_rows_kernel(const float* __restrict__ x,
                                                          float* __restrict__ y, long long rows,
                                                          long long R) {
    __shared__ float sh[32];
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
        const float* xr = x + r * R;
        float acc = RED_INIT;
        for (long long i = threadIdx.x; i < R; i += blockDim.x) acc = red_combine(acc, xr[i]);
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) acc = red_combine(acc, __shfl_xor_sync(FULL_MASK, acc, o));
        if (lane == 0) sh[w] = acc;
        __syncthreads();
        if (w == 0) {
            acc = lane < (int)(blockDim.x >> 5) ? sh[lane] : RED_INIT;
#pragma unroll
            for (int o = 16; o > 0; o >>= 1)
                acc = red_combine(acc, __shfl_xor_sync(FULL_MASK, acc, o));
            if (lane == 0) y[r] = RED_FINAL(acc, R);
        }
        __syncthreads();
    }
}

// inner > 1: one thread per output, reading along R with stride inner (coalesced across
// threads); four independent loads in flight per iteration.
__global__ void __launch_bounds__(256) reduce_cols_kernel(const float* __restrict__ x,
                                                          float* __restrict__ y, long long outer,
                                                          long long R, long long inner) {
    const long long total = outer * inner;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < total; t += stride) {
        const long long o = t / inner, i = t % inner;
        const float* xp = x + o * R * inner + i;
        float acc = RED_INIT;
        long long k = 0;
        for (; k + 4 <= R; k += 4) {
            const float v0 = xp[(k + 0) * inner], v1 = xp[(k + 1) * inner];
            const float v2 = xp[(k + 2) * inner], v3 = xp[(k + 3) * inner];
            acc = red_combine(acc, v0);
            acc = red_combine(acc, v1);
            acc = red_combine(acc, v2);
            acc = red_combine(acc, v3);
        }
        for (; k < R; ++k) acc = red_combine(acc, xp[k * inner]);
        y[t] = RED_FINAL(acc, R);
    }
}

static void reduce_run(const float* x, float* y, long long outer, long long R, long long inner) {
    if (outer <= 0 || inner <= 0) return;
    if (inner == 1) {
        long long g = outer < 65535LL * 16 ? outer : 65535LL * 16;
        reduce_rows_kernel<<<(unsigned)g, 256>>>(x, y, outer, R);
    } else {
        reduce_cols_kernel<<<cp_grid(outer * inner, 256, 8), 256>>>(x, y, outer, R, inner);
    }
}

extern "C" void reduce_dim(
    const float* x,
    float* y,
    long long outer,
    long long R,
    long long inner) {
    reduce_run(x, y, outer, R, inner);
}
"""


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
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim
        self.lib = load_cuda(CUDA_SRC)

    def forward(self, x):
        x = x.contiguous()
        dim = self.dim % x.dim()
        outer, size, inner = _split(x.shape, dim)
        shape = list(x.shape)
        shape[dim] = 1
        y = torch.empty(shape, dtype=x.dtype, device=x.device)
        self.lib.reduce_dim(x, y, outer, size, inner)
        return y
