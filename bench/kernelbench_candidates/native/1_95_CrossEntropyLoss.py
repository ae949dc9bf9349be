"""KernelBench level 1 / 95_CrossEntropyLoss.py

cross entropy (mean, ignore_index -100).

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

__global__ void __launch_bounds__(256) ce_rows_kernel(const float* __restrict__ x,
                                                      const int64_t* __restrict__ tgt,
                                                      float* __restrict__ row_loss,
                                                      long long rows, long long C) {
    for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
        const float* xr = x + r * C;
        float m = -INFINITY, s = 0.0f;
        for (long long i = threadIdx.x; i < C; i += blockDim.x) ms_add(m, s, xr[i]);
        block_ms(m, s);
        if (threadIdx.x == 0) {
            const long long t = tgt[r];
            row_loss[r] = (t >= 0 && t < C) ? (m + logf(s)) - xr[t] : 0.0f;
        }
    }
}

__global__ void __launch_bounds__(1024) ce_finalize_kernel(const float* __restrict__ row_loss,
                                                           const int64_t* __restrict__ tgt,
                                                           long long rows, long long C,
                                                           float* __restrict__ out) {
    __shared__ double sh[32];
    double acc = 0.0, cnt = 0.0;
    for (long long r = threadIdx.x; r < rows; r += blockDim.x) {
        const long long t = tgt[r];
        if (t >= 0 && t < C) {
            acc += (double)row_loss[r];
            cnt += 1.0;
        }
    }
    acc = block_sum_d(acc, sh);
    cnt = block_sum_d(cnt, sh);
    if (threadIdx.x == 0) out[0] = (float)(acc / cnt);
}

extern "C" void cross_entropy_mean(
    const float* x,
    const int64_t* tgt,
    float* row_loss,
    float* out,
    long long rows,
    long long C) {
    if (rows <= 0) return;
    long long g = rows < 65535LL * 16 ? rows : 65535LL * 16;
    ce_rows_kernel<<<(unsigned)g, 256>>>(x, tgt, row_loss, rows, C);
    ce_finalize_kernel<<<1, 1024>>>(row_loss, tgt, rows, C, out);
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.lib = load_cuda(CUDA_SRC)

    def forward(self, predictions, targets):
        x = predictions.contiguous()
        t = targets.contiguous()
        rows, C = x.shape
        row_loss = torch.empty(rows, dtype=x.dtype, device=x.device)
        out = torch.empty((), dtype=x.dtype, device=x.device)
        self.lib.cross_entropy_mean(x, t, row_loss, out, rows, C)
        return out
