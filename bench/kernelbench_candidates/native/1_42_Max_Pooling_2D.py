"""KernelBench level 1 / 42_Max_Pooling_2D.py

MaxPool2d.

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

__global__ void __launch_bounds__(256) maxpool2d_kernel(const float* __restrict__ x,
                                                        float* __restrict__ y, long long planes,
                                                        int H, int W, int Ho, int Wo, int kh,
                                                        int kw, int sh, int sw, int ph, int pw,
                                                        int dh, int dw) {
    const long long total = planes * Ho * Wo;
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < total; t += step) {
        const int ow = (int)(t % Wo);
        const int oh = (int)((t / Wo) % Ho);
        const long long pl = t / ((long long)Wo * Ho);
        const float* xp = x + pl * H * W;
        const int h0 = oh * sh - ph, w0 = ow * sw - pw;
        float m = -INFINITY;
        for (int i = 0; i < kh; ++i) {
            const int h = h0 + i * dh;
            if (h < 0 || h >= H) continue;
            const float* row = xp + (long long)h * W;
            for (int j = 0; j < kw; ++j) {
                const int w = w0 + j * dw;
                if (w < 0 || w >= W) continue;
                const float v = row[w];
                if (v > m || v != v) m = v;
            }
        }
        y[t] = m;
    }
}

extern "C" void maxpool2d(
    const float* x,
    float* y,
    long long planes,
    int H,
    int W,
    int Ho,
    int Wo,
    int kh,
    int kw,
    int sh,
    int sw,
    int ph,
    int pw,
    int dh,
    int dw) {
    if (planes <= 0 || Ho <= 0 || Wo <= 0) return;
    maxpool2d_kernel<<<cp_grid(planes * Ho * Wo, 256, 8), 256>>>(
        x, y, planes, H, W, Ho, Wo, kh, kw, sh, sw, ph, pw, dh, dw);
}
"""


def _pair(v):
    return (v, v) if isinstance(v, int) else (v[0], v[1])


class ModelNew(nn.Module):
    def __init__(self, kernel_size: int, stride: int, padding: int, dilation: int):
        super().__init__()
        self.kernel_size = _pair(kernel_size)
        self.stride = _pair(kernel_size if stride is None else stride)
        self.padding = _pair(padding)
        self.dilation = _pair(dilation)
        self.lib = load_cuda(CUDA_SRC)

    def forward(self, x):
        x = x.contiguous()
        H, W = x.shape[-2], x.shape[-1]
        planes = x.numel() // (H * W)
        (kh, kw), (sh, sw) = self.kernel_size, self.stride
        (ph, pw), (dh, dw) = self.padding, self.dilation
        Ho = (H + 2 * ph - dh * (kh - 1) - 1) // sh + 1
        Wo = (W + 2 * pw - dw * (kw - 1) - 1) // sw + 1
        y = torch.empty(tuple(x.shape[:-2]) + (Ho, Wo), dtype=x.dtype, device=x.device)
        self.lib.maxpool2d(x, y, planes, H, W, Ho, Wo, kh, kw, sh, sw, ph, pw, dh, dw)
        return y
