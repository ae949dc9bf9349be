"""KernelBench level 1 / 45_Average_Pooling_2D.py

AvgPool2d (count_include_pad).

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

__global__ void __launch_bounds__(256) avgpool2d_kernel(const float* __restrict__ x,
                                                        float* __restrict__ y, long long planes,
                                                        int H, int W, int Ho, int Wo, int kh,
                                                        int kw, int sh, int sw, int ph, int pw) {
    const long long total = planes * Ho * Wo;
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < total; t += step) {
        const int ow = (int)(t % Wo);
        const int oh = (int)((t / Wo) % Ho);
        const long long pl = t / ((long long)Wo * Ho);
        const float* xp = x + pl * H * W;
        int h0 = oh * sh - ph, w0 = ow * sw - pw;
        int h1 = min(h0 + kh, H + ph), w1 = min(w0 + kw, W + pw);
        const float count = (float)((h1 - h0) * (w1 - w0));  // count_include_pad=True
        h0 = max(h0, 0);
        w0 = max(w0, 0);
        h1 = min(h1, H);
        w1 = min(w1, W);
        float s = 0.0f;
        for (int h = h0; h < h1; ++h) {
            const float* row = xp + (long long)h * W;
            for (int w = w0; w < w1; ++w) s += row[w];
        }
        y[t] = s / count;
    }
}

extern "C" void avgpool2d(
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
    int pw) {
    if (planes <= 0 || Ho <= 0 || Wo <= 0) return;
    avgpool2d_kernel<<<cp_grid(planes * Ho * Wo, 256, 8), 256>>>(
        x, y, planes, H, W, Ho, Wo, kh, kw, sh, sw, ph, pw);
}
"""


def _pair(v):
    return (v, v) if isinstance(v, int) else (v[0], v[1])


class ModelNew(nn.Module):
    def __init__(self, kernel_size: int, stride: int = None, padding: int = 0):
        super().__init__()
        self.kernel_size = _pair(kernel_size)
        self.stride = _pair(kernel_size if stride is None else stride)
        self.padding = _pair(padding)
        self.lib = load_cuda(CUDA_SRC)

    def forward(self, x):
        x = x.contiguous()
        H, W = x.shape[-2], x.shape[-1]
        planes = x.numel() // (H * W)
        (kh, kw), (sh, sw), (ph, pw) = self.kernel_size, self.stride, self.padding
        Ho = (H + 2 * ph - kh) // sh + 1
        Wo = (W + 2 * pw - kw) // sw + 1
        y = torch.empty(tuple(x.shape[:-2]) + (Ho, Wo), dtype=x.dtype, device=x.device)
        self.lib.avgpool2d(x, y, planes, H, W, Ho, Wo, kh, kw, sh, sw, ph, pw)
        return y
