"""KernelBench level 1 / 41_Max_Pooling_1D.py

MaxPool1d.

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

__global__ void __launch_bounds__(256) maxpool1d_kernel(const float* __restrict__ x,
                                                        float* __restrict__ y, long long planes,
                                                        long long L, long long Lout, int k,
                                                        int stride, int pad, int dil) {
    const long long total = planes * Lout;
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < total; t += step) {
        const long long o = t % Lout, pl = t / Lout;
        const float* xp = x + pl * L;
        const long long start = o * stride - pad;
        float m = -INFINITY;
        for (int j = 0; j < k; ++j) {
            const long long p = start + (long long)j * dil;
            if (p >= 0 && p < L) {
                const float v = xp[p];
                if (v > m || v != v) m = v;
            }
        }
        y[t] = m;
    }
}

extern "C" void maxpool1d(
    const float* x,
    float* y,
    long long planes,
    long long L,
    long long Lout,
    int k,
    int stride,
    int pad,
    int dil) {
    if (planes <= 0 || Lout <= 0) return;
    maxpool1d_kernel<<<cp_grid(planes * Lout, 256, 8), 256>>>(
        x, y, planes, L, Lout, k, stride, pad, dil);
}
"""


class ModelNew(nn.Module):
    def __init__(
        self,
        kernel_size: int,
        stride: int = None,
        padding: int = 0,
        dilation: int = 1,
        return_indices: bool = False,
    ):
        super().__init__()
        if return_indices:
            raise ValueError("return_indices=True is not supported by this kernel")
        self.kernel_size = kernel_size
        self.stride = kernel_size if stride is None else stride
        self.padding = padding
        self.dilation = dilation
        self.lib = load_cuda(CUDA_SRC)

    def forward(self, x):
        x = x.contiguous()
        L = x.shape[-1]
        planes = x.numel() // L
        k, s, p, d = self.kernel_size, self.stride, self.padding, self.dilation
        Lout = (L + 2 * p - d * (k - 1) - 1) // s + 1
        y = torch.empty(tuple(x.shape[:-1]) + (Lout,), dtype=x.dtype, device=x.device)
        self.lib.maxpool1d(x, y, planes, L, Lout, k, s, p, d)
        return y
